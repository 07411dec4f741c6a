"""The pull link's reader (nsqd/group/pull.py `LinkDecoder`): the frames of a peer's stream,
messages read straight into records, whatever the reads' boundaries; the same messages and
frames as the generic client decoder gives."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsqd.group.pull import LinkDecoder
from protocol.v2.frames import (
    HEARTBEAT_FRAME,
    OK_FRAME,
    FrameDecoder,
    FrameType,
    encode_error,
    encode_frame,
)
from protocol.v2.message import decode_message, encode_message_frame

_ids = st.binary(min_size=16, max_size=16)
_message = st.builds(
    encode_message_frame,
    st.integers(0, 2**62),
    st.integers(0, 65535),
    _ids,
    st.binary(max_size=300),
)
_frame = st.one_of(
    _message,
    _message,
    st.just(HEARTBEAT_FRAME),
    st.just(OK_FRAME),
    st.just(encode_error(b"E_FIN_FAILED FIN failed")),
)


Decoded = tuple[list[tuple[bytes, bytes, int, int]], list[tuple[int, bytes]]]


def _reference(stream: bytes) -> Decoded:
    msgs, others = [], []
    for frame in FrameDecoder().feed(stream):
        if frame.frame_type == FrameType.MESSAGE:
            m = decode_message(frame.data)
            msgs.append((m.id, m.body, m.timestamp, max(0, m.attempts - 1)))
        else:
            others.append((frame.frame_type, frame.data))
    return msgs, others


def _check(frames: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(frames)
    bounds = sorted({0, len(stream), *(c % (len(stream) + 1) for c in cuts)})
    decoder = LinkDecoder()
    msgs, others = [], []
    for start, end in pairwise(bounds):
        got_msgs, got_others = decoder.feed(stream[start:end])
        msgs += [(m.id, m.body, m.timestamp, m.attempts) for m in got_msgs]
        others += [(f.frame_type, f.data) for f in got_others]
    assert (msgs, others) == _reference(stream)
    assert decoder.feed(b"") == ([], [])  # nothing left over


@settings(max_examples=300, deadline=None)
@given(st.lists(_frame, max_size=30), st.lists(st.integers(0, 10_000), max_size=8))
def test_the_same_messages_and_frames_whatever_the_reads(
    frames: list[bytes], cuts: list[int]
) -> None:
    _check(frames, cuts)


@st.composite
def _one_size(draw: st.DrawFn) -> list[bytes]:
    """Message frames of one size (a busy link's reads, cut by struct in one go), and maybe
    one other frame among them: a heartbeat, an error, a message of another size."""
    size = draw(st.integers(0, 40))
    body = st.binary(min_size=size, max_size=size)
    message = st.builds(
        encode_message_frame, st.integers(0, 2**62), st.integers(0, 65535), _ids, body
    )
    frames = draw(st.lists(message, min_size=1, max_size=40))
    other = st.one_of(st.just(HEARTBEAT_FRAME), _message, st.just(encode_error(b"E_INVALID x")))
    if draw(st.booleans()):
        frames.insert(draw(st.integers(0, len(frames))), draw(other))
    return frames


@settings(max_examples=300, deadline=None)
@given(_one_size(), st.lists(st.integers(0, 10_000), max_size=6))
def test_frames_of_one_size_read_as_any_other(frames: list[bytes], cuts: list[int]) -> None:
    _check(frames, cuts)


def test_attempts_are_the_peers_less_its_delivery_to_the_link() -> None:
    frame = encode_message_frame(123, 3, b"0123456789abcdef", b"body")
    (msg,), _ = LinkDecoder().feed(frame)
    assert (msg.id, msg.body, msg.timestamp, msg.attempts) == (b"0123456789abcdef", b"body", 123, 2)


@pytest.mark.parametrize(
    ("frame", "error"),
    [
        (b"\x00\x00\x00\x02\x00\x00", "invalid frame size 2"),
        (encode_frame(FrameType.MESSAGE, b"x" * 25), "message too short: 25 bytes"),
    ],
)
def test_a_broken_stream_is_refused(frame: bytes, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        LinkDecoder().feed(frame + b"\x00" * 8)
