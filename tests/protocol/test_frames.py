"""What nsqd writes: frames, error frame bodies, message frames (spec 2.1, 2.2, 2.6)."""

from __future__ import annotations

import struct

import pytest
from v2wire import MSG_ID, bytewise, splits

from protocol.v2 import (
    CLOSE_WAIT_FRAME,
    HEARTBEAT_FRAME,
    MSG_ID_LENGTH,
    OK_FRAME,
    ErrorCode,
    Frame,
    FrameDecoder,
    FrameType,
    NSQError,
    decode_message,
    encode_error,
    encode_frame,
    encode_message,
    encode_message_frame,
    encode_response,
)
from protocol.v2.message import (
    ATTEMPTS_AT,
    FRAME_TYPE_AT,
    ID_AT,
    MESSAGE_FRAME_HEAD_SIZE,
    TIMESTAMP_AT,
    DecodedMessage,
    append_message_frames,
)

# -- fixed frames, byte for byte (spec appendix A) ---------------------------------------------


@pytest.mark.parametrize(
    ("frame", "wire"),
    [
        (OK_FRAME, b"\x00\x00\x00\x06\x00\x00\x00\x00OK"),
        (HEARTBEAT_FRAME, b"\x00\x00\x00\x0f\x00\x00\x00\x00_heartbeat_"),
        (CLOSE_WAIT_FRAME, b"\x00\x00\x00\x0e\x00\x00\x00\x00CLOSE_WAIT"),
        (encode_response(b"OK"), OK_FRAME),
        (encode_frame(FrameType.RESPONSE, b""), b"\x00\x00\x00\x04\x00\x00\x00\x00"),
        (
            encode_error(b"E_INVALID invalid command ASDF"),
            b"\x00\x00\x00\x22\x00\x00\x00\x01E_INVALID invalid command ASDF",
        ),
        (encode_error(b"E_BAD_PROTOCOL"), b"\x00\x00\x00\x12\x00\x00\x00\x01E_BAD_PROTOCOL"),
        (encode_frame(2, b"x"), b"\x00\x00\x00\x05\x00\x00\x00\x02x"),
    ],
)
def test_frame_bytes(frame: bytes, wire: bytes) -> None:
    assert frame == wire


def test_frame_types() -> None:
    assert (FrameType.RESPONSE, FrameType.ERROR, FrameType.MESSAGE) == (0, 1, 2)


# -- FrameDecoder ------------------------------------------------------------------------------

STREAM = (
    OK_FRAME
    + encode_error(b"E_FIN_FAILED FIN x failed ID not in flight")
    + encode_message_frame(1700000000123456789, 1, MSG_ID, b"body\n\x00")
    + HEARTBEAT_FRAME
    + encode_frame(0, b"")
)
FRAMES = [
    Frame(0, b"OK"),
    Frame(1, b"E_FIN_FAILED FIN x failed ID not in flight"),
    Frame(2, encode_message(1700000000123456789, 1, MSG_ID, b"body\n\x00")),
    Frame(0, b"_heartbeat_"),
    Frame(0, b""),
]


def decode_in(chunks: list[bytes]) -> list[Frame]:
    decoder = FrameDecoder()
    return [frame for chunk in chunks for frame in decoder.feed(chunk)]


def test_decoder_whole() -> None:
    assert decode_in([STREAM]) == FRAMES


def test_decoder_split_at_every_offset() -> None:
    for chunks in splits(STREAM):
        assert decode_in(chunks) == FRAMES, f"cut at {len(chunks[0])}"


def test_decoder_byte_at_a_time() -> None:
    assert decode_in(bytewise(STREAM)) == FRAMES


def test_decoder_waits_for_a_whole_frame() -> None:
    decoder = FrameDecoder()
    assert decoder.feed(OK_FRAME[:7]) == []
    assert decoder.feed(b"") == []
    assert decoder.feed(OK_FRAME[7:] + OK_FRAME[:2]) == [Frame(0, b"OK")]
    assert decoder.feed(OK_FRAME[2:]) == [Frame(0, b"OK")]


@pytest.mark.parametrize("size", [3, 0, -1, -(2**31)])
def test_decoder_rejects_impossible_sizes(size: int) -> None:
    with pytest.raises(ValueError):
        FrameDecoder().feed(struct.pack(">ii", size, 0))


# -- messages ----------------------------------------------------------------------------------

MESSAGES = [
    (0, 0, MSG_ID, b""),
    (1700000000123456789, 1, MSG_ID, b"hello"),
    (-1, 65535, b"\x00" * 16, b"\x00" * 1000),
    (2**63 - 1, 2, b"ffffffffffffffff", bytes(range(256))),
]


@pytest.mark.parametrize(("timestamp", "attempts", "msg_id", "body"), MESSAGES)
def test_message_round_trip(timestamp: int, attempts: int, msg_id: bytes, body: bytes) -> None:
    data = encode_message(timestamp, attempts, msg_id, body)
    assert data == struct.pack(">qH", timestamp, attempts) + msg_id + body
    assert len(data) == 26 + len(body)
    decoded = decode_message(data)
    assert (decoded.timestamp, decoded.attempts, decoded.id, decoded.body) == (
        timestamp,
        attempts,
        msg_id,
        body,
    )


@pytest.mark.parametrize(("timestamp", "attempts", "msg_id", "body"), MESSAGES)
def test_message_frame_is_a_type_2_frame(
    timestamp: int, attempts: int, msg_id: bytes, body: bytes
) -> None:
    frame = encode_message_frame(timestamp, attempts, msg_id, body)
    assert frame == encode_frame(
        FrameType.MESSAGE, encode_message(timestamp, attempts, msg_id, body)
    )
    assert struct.unpack_from(">i", frame)[0] == 4 + 26 + len(body)
    (decoded,) = FrameDecoder().feed(frame)
    assert decoded.frame_type == 2
    assert decode_message(decoded.data).body == body


def test_message_header_layout() -> None:
    frame = encode_message_frame(0x0102030405060708, 0x090A, MSG_ID, b"B")
    assert frame == (
        b"\x00\x00\x00\x1f"  # size: 4 + 8 + 2 + 16 + 1
        b"\x00\x00\x00\x02"
        b"\x01\x02\x03\x04\x05\x06\x07\x08"  # timestamp ns, big-endian
        b"\x09\x0a" + MSG_ID + b"B"  # attempts
    )
    assert MSG_ID_LENGTH == 16


def test_message_frames_appended_are_the_encoded_frames_back_to_back() -> None:
    """The batch encoder (TCP delivery, HTTP's binary answers) writes what the single one does,
    and its size is what it appended; the offsets decoders read point at those fields."""
    msgs = [DecodedMessage(ts, att, mid, body) for ts, att, mid, body in MESSAGES]
    parts: list[bytes] = [b"before"]
    size = append_message_frames(parts, msgs)
    wire = b"".join(parts[1:])
    assert wire == b"".join(
        encode_message_frame(m.timestamp, m.attempts, m.id, m.body) for m in msgs
    )
    assert size == len(wire) and parts[0] == b"before"
    first = encode_message_frame(-7, 65535, MSG_ID, b"xyz")
    assert struct.unpack_from(">i", first, FRAME_TYPE_AT)[0] == FrameType.MESSAGE
    assert struct.unpack_from(">q", first, TIMESTAMP_AT)[0] == -7
    assert struct.unpack_from(">H", first, ATTEMPTS_AT)[0] == 65535
    assert first[ID_AT:MESSAGE_FRAME_HEAD_SIZE] == MSG_ID
    assert first[MESSAGE_FRAME_HEAD_SIZE:] == b"xyz"
    assert append_message_frames(parts, []) == 0


def test_decode_message_too_short() -> None:
    with pytest.raises(ValueError):
        decode_message(b"\x00" * 25)
    assert decode_message(b"\x00" * 26).body == b""


# -- NSQError: the error frame body ------------------------------------------------------------


@pytest.mark.parametrize(
    ("err", "body", "fatal"),
    [
        (NSQError(ErrorCode.E_INVALID, "invalid command "), b"E_INVALID invalid command ", True),
        (NSQError(ErrorCode.E_BAD_PROTOCOL), b"E_BAD_PROTOCOL", True),
        (
            NSQError(ErrorCode.E_FIN_FAILED, "FIN x failed ID not in flight"),
            b"E_FIN_FAILED FIN x failed ID not in flight",
            False,
        ),
        (
            NSQError(ErrorCode.E_REQ_FAILED, "REQ x failed exiting"),
            b"E_REQ_FAILED REQ x failed exiting",
            False,
        ),
        (
            NSQError(ErrorCode.E_TOUCH_FAILED, "TOUCH x failed"),
            b"E_TOUCH_FAILED TOUCH x failed",
            False,
        ),
        (
            NSQError(ErrorCode.E_PUB_FAILED, "PUB failed exiting"),
            b"E_PUB_FAILED PUB failed exiting",
            True,
        ),
        (NSQError(ErrorCode.E_FIN_FAILED, "forced", fatal=True), b"E_FIN_FAILED forced", True),
        # client bytes that are not UTF-8 come back unchanged
        (
            NSQError(
                ErrorCode.E_INVALID, b"invalid command \xff".decode("utf-8", "surrogateescape")
            ),
            b"E_INVALID invalid command \xff",
            True,
        ),
    ],
)
def test_error_body_and_fatality(err: NSQError, body: bytes, fatal: bool) -> None:
    assert bytes(err) == body
    assert str(err) == body.decode("utf-8", "surrogateescape")
    assert err.fatal is fatal


def test_only_three_codes_are_not_fatal() -> None:
    non_fatal = {code for code in ErrorCode if not NSQError(code, "x").fatal}
    assert non_fatal == {ErrorCode.E_FIN_FAILED, ErrorCode.E_REQ_FAILED, ErrorCode.E_TOUCH_FAILED}
