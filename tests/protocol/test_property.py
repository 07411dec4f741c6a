"""Property: whatever follows the magic, in whatever chunks it arrives, V2Connection only ever
hands over commands and its sentinels, or raises NSQError (always fatal) or ProtocolClosed,
and the outcome does not depend on the chunking."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from v2wire import MAGIC, MSG_ID, Err, i32, identify, run, sized

import protocol.v2.connection as v2connection
from protocol.v2 import (
    Auth,
    Cls,
    DPub,
    Fin,
    Identify,
    Limits,
    MPub,
    MPubStart,
    Nop,
    Pub,
    Rdy,
    Req,
    Sub,
    Touch,
)

COMMAND_TYPES = (Identify, Auth, Sub, Pub, MPubStart, MPub, DPub, Rdy, Fin, Req, Touch, Cls, Nop)
PROFILE = settings(
    max_examples=250,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

VERBS = [
    b"IDENTIFY",
    b"AUTH",
    b"SUB",
    b"PUB",
    b"MPUB",
    b"DPUB",
    b"RDY",
    b"FIN",
    b"REQ",
    b"TOUCH",
    b"CLS",
    b"NOP",
    b"",
    b"XX",
    b"nop",
]
IDENTIFY_KEYS = [
    "client_id",
    "hostname",
    "heartbeat_interval",
    "output_buffer_size",
    "output_buffer_timeout",
    "feature_negotiation",
    "tls_v1",
    "deflate",
    "deflate_level",
    "snappy",
    "sample_rate",
    "user_agent",
    "msg_timeout",
    "SAMPLE_RATE",
    "x",
]

params = st.one_of(
    st.sampled_from(
        [
            b"t",
            b"c",
            b"p#ephemeral",
            MSG_ID,
            b"10",
            b"0",
            b"-1",
            b"",
            b"3600001",
            b"18446744073709551616",
            b"bad!",
        ]
    ),
    st.binary(max_size=18).map(lambda b: b.replace(b"\n", b"").replace(b" ", b"")),
)
line = st.builds(
    lambda verb, ps, cr: b" ".join([verb, *ps]) + (b"\r\n" if cr else b"\n"),
    st.sampled_from(VERBS),
    st.lists(params, max_size=3),
    st.booleans(),
)
json_value = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**64), 2**64)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(IDENTIFY_KEYS) | st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=8,
)
body = st.one_of(json_value.map(lambda v: json.dumps(v).encode()), st.binary(max_size=40))
sized_body = st.builds(
    lambda data, size: (i32(size) if size is not None else i32(len(data))) + data,
    body,
    st.one_of(st.none(), st.integers(-3, 60)),
)
mpub_payload = st.builds(
    lambda msgs, count, declared: (
        i32(declared)
        + i32(len(msgs) if count is None else count)
        + b"".join(sized(m) for m in msgs)
    ),
    st.lists(st.binary(max_size=8), max_size=4),
    st.one_of(st.none(), st.integers(-2, 6)),
    st.integers(-2, 100),
)
piece = st.one_of(
    line,
    st.builds(bytes.__add__, line, sized_body),
    st.builds(
        lambda topic, payload: b"MPUB " + topic + b"\n" + payload,
        st.sampled_from([b"p", b"bad!"]),
        mpub_payload,
    ),
    st.binary(max_size=30),
)
streams = st.lists(piece, max_size=8).map(b"".join)
limits = st.sampled_from(
    [
        Limits(),
        Limits(
            max_msg_size=8,
            max_body_size=64,
            max_rdy_count=5,
            max_req_timeout_ms=50,
            max_line_length=32,
            max_heartbeat_interval_ms=2000,
        ),
    ]
)


def check(data: bytes, cuts: list[int], limits: Limits, tls_required: bool) -> None:
    wire = MAGIC + data
    points = sorted({c for c in cuts if 0 < c < len(wire)})
    chunks = [wire[a:b] for a, b in zip([0, *points], [*points, len(wire)], strict=True)]
    # run() lets any exception but NSQError/ProtocolClosed through, and checks the sentinels
    whole = run([wire], limits=limits, tls_required=tls_required)
    assert all(isinstance(event, COMMAND_TYPES) for event in whole[0])
    assert run(chunks, limits=limits, tls_required=tls_required) == whole


@PROFILE
@given(st.binary(max_size=300), st.lists(st.integers(0, 310), max_size=6), limits, st.booleans())
def test_arbitrary_bytes(data: bytes, cuts: list[int], limits: Limits, tls: bool) -> None:
    check(data, cuts, limits, tls)


@PROFILE
@given(streams, st.lists(st.integers(0, 400), max_size=8), limits, st.booleans())
def test_command_like_streams(data: bytes, cuts: list[int], limits: Limits, tls: bool) -> None:
    check(data, cuts, limits, tls)


@PROFILE
@given(streams, limits)
def test_command_like_streams_byte_by_byte(data: bytes, limits: Limits) -> None:
    wire = MAGIC + data
    whole = run([wire], limits=limits)
    assert run([wire[i : i + 1] for i in range(len(wire))], limits=limits) == whole


@PROFILE
@given(json_value)
def test_identify_any_json(value: object) -> None:
    # Go decodes only an object (or null) into nsqd's identify struct.
    events, end = run([MAGIC + identify(json.dumps(value).encode())])
    if value is None or isinstance(value, dict):
        assert events or isinstance(end, Err)
        if isinstance(end, Err):
            assert end.text.startswith(b"E_BAD_BODY IDENTIFY ")
    else:
        assert (events, end) == ([], Err(b"E_BAD_BODY IDENTIFY failed to decode JSON body"))


# PUBs to one topic, most of them well formed (read in one step once the topic is known, by
# whole.pub, protocol/v2/whole.py), among lines that look like them and are not: a CR, another
# parameter, a bad or long name, a size of 0, a negative one or one over the limit, a body cut
# short by the end of the stream
pub_line = st.sampled_from(
    [b"PUB p\n"] * 6
    + [b"PUB q\n", b"PUB p\r\n", b"PUB p x\n", b"PUB  p\n", b"PUB p \n", b"PUB bad!\n"]
    + [b"PUB " + b"p" * 64 + b"\n", b"PUB " + b"p" * 65 + b"\n", b"PUB\n", b"PUB p#ephemeral\n"]
)
pub_body = st.one_of(
    st.binary(min_size=1, max_size=8).map(sized),  # within either limit
    st.sampled_from([i32(0), i32(-1), i32(9) + b"x" * 9, i32(2**31 - 1), i32(3) + b"x"]),
    sized_body,
)
# MPUBs of one message (whole.mpub_one), sizes that agree or not
mpub_line = st.sampled_from(
    [b"MPUB p\n"] * 6 + [b"MPUB q\n", b"MPUB p\r\n", b"MPUB p x\n", b"MPUB bad!\n", b"MPUB\n"]
)
maybe_size = st.one_of(st.none(), st.none(), st.integers(-2, 80))
mpub_one = st.builds(
    lambda msg, declared, count, size: (
        i32(len(msg) + 8 if declared is None else declared)
        + i32(1 if count is None else count)
        + i32(len(msg) if size is None else size)
        + msg
    ),
    st.binary(min_size=0, max_size=10),
    maybe_size,
    st.one_of(st.none(), st.none(), st.integers(-1, 3)),
    maybe_size,
)
pub_piece = st.one_of(
    st.builds(bytes.__add__, pub_line, pub_body),
    st.builds(bytes.__add__, pub_line, pub_body),
    st.builds(bytes.__add__, pub_line, st.binary(max_size=6)),
    st.builds(bytes.__add__, mpub_line, mpub_one),
    st.builds(bytes.__add__, mpub_line, mpub_one),
    piece,
)
pub_streams = st.lists(pub_piece, max_size=10).map(b"".join)


@PROFILE
@given(pub_streams, st.lists(st.integers(0, 500), max_size=8), limits, st.booleans())
def test_whole_pub_reads_as_the_line_and_body_stages(
    data: bytes, cuts: list[int], limits: Limits, tls: bool
) -> None:
    """A PUB read in one step gives what the stages give: the same commands, the same error
    at the same place, whatever the chunks."""
    wire = MAGIC + data
    points = sorted({c for c in cuts if 0 < c < len(wire)})
    chunks = [wire[a:b] for a, b in zip([0, *points], [*points, len(wire)], strict=True)]
    fast = run(chunks, limits=limits, tls_required=tls)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(v2connection, "_PUB_TOPICS", 0)  # no name is ever known: the stages
        staged = run(chunks, limits=limits, tls_required=tls)
    assert fast == staged


@pytest.mark.parametrize(
    "after",
    [
        i32(0),
        i32(-1),
        i32(2**31 - 1),
        i32(1_048_577) + b"x" * 1_048_577,
        i32(5) + b"x",
        b"",
    ],
    ids=["size 0", "size -1", "size 2**31-1", "over max-msg-size", "cut short", "no size"],
)
@pytest.mark.parametrize("verb", [b"PUB", b"MPUB"])
def test_whole_pub_refuses_as_the_stages(verb: bytes, after: bytes) -> None:
    """A PUB (an MPUB of one) to a known topic that the one-step read must leave to the
    stages: refused, or cut short, the same way."""
    first = sized(b"one")
    if verb == b"MPUB":  # the same messages, as MPUBs of one
        first, after = i32(11) + i32(1) + first, i32(len(after) + 4) + i32(1) + after
    wire = MAGIC + verb + b" p\n" + first + verb + b" p\n" + after
    fast = run([wire])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(v2connection, "_PUB_TOPICS", 0)
        staged = run([wire])
    assert fast == staged
    assert isinstance(fast[1], Err)


@pytest.mark.parametrize(
    "body",
    [
        i32(11) + i32(2) + sized(b"one") + sized(b"two"),
        i32(11) + i32(0) + sized(b"one"),
        i32(0) + i32(1) + sized(b"one"),
        i32(-1) + i32(1) + sized(b"one"),
        i32(5 * 1024 * 1024 + 1) + i32(1) + sized(b"one"),
        i32(99) + i32(1) + sized(b"one") + b"NOP\n",
        i32(3) + i32(1) + sized(b"one") + b"NOP\n",
    ],
    ids=["count 2", "count 0", "size 0", "size -1", "size over", "size above", "size below"],
)
def test_whole_mpub_reads_as_the_stages(body: bytes) -> None:
    """An MPUB whose count or declared size is not that of one message in its body."""
    wire = MAGIC + b"MPUB p\n" + i32(11) + i32(1) + sized(b"one") + b"MPUB p\n" + body
    fast = run([wire])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(v2connection, "_PUB_TOPICS", 0)
        staged = run([wire])
    assert fast == staged


def test_whole_pub_is_taken_for_a_known_topic() -> None:
    """The properties above compare something: the one-step read happens (a second PUB or
    MPUB to the topic leaves the line stage untouched) and gives the body whole."""
    conn = v2connection.V2Connection()
    conn.receive_data(MAGIC + b"PUB p\n" + sized(b"one") + b"PUB p\n" + sized(b"two"))
    assert conn.next_command() == Pub("p", b"one")
    conn._handlers = {}  # the line stage would now fail on any verb
    assert conn.next_command() == Pub("p", b"two")
    assert conn.next_command() is v2connection.NEED_DATA
    conn = v2connection.V2Connection()
    conn.receive_data(MAGIC + b"MPUB p\n" + i32(11) + i32(1) + sized(b"one"))
    assert conn.next_command() == MPubStart("p")
    assert conn.next_command() == MPub("p", [b"one"])
    conn.receive_data(b"MPUB p\n" + i32(11) + i32(1) + sized(b"tri"))
    conn._handlers = {}
    assert conn.next_command() == MPubStart("p")  # as from the stages: AUTH checks it
    assert conn.next_command() == MPub("p", [b"tri"])
    assert conn.next_command() is v2connection.NEED_DATA
