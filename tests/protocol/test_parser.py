"""V2Connection against the byte-level tables of nsq_cases.py, each fed three ways: whole, cut
in two at every offset, and one byte at a time. The commands handed over and the way the
stream ends (error text, clean EOF or a hang-up) must be the same every way."""

from __future__ import annotations

import pytest
from nsq_cases import (
    IDENTIFY_JSON_CASES,
    LINE_LIMIT_CASES,
    MAGIC_CASES,
    STATE_CASES,
    STREAM_CASES,
    TLS_CASES,
)
from v2wire import (
    EOF,
    MAGIC,
    MSG_ID,
    Case,
    Err,
    bytewise,
    identify,
    mpub,
    pub,
    run,
    run_case,
    sized,
    splits,
    whole,
)

from protocol.v2 import (
    CLOSED,
    NEED_DATA,
    PAUSED,
    Cls,
    ErrorCode,
    Fin,
    Identify,
    Limits,
    MPub,
    MPubStart,
    Nop,
    NSQError,
    Pub,
    Rdy,
    Req,
    Sub,
    V2Connection,
)
from protocol.v2.state import ClientState

ALL_CASES = [
    *STATE_CASES,
    *TLS_CASES,
    *STREAM_CASES,
    *MAGIC_CASES,
    *LINE_LIMIT_CASES,
    *IDENTIFY_JSON_CASES,
]
assert len({case.id for case in ALL_CASES}) == len(ALL_CASES), "duplicate case ids"

# Cutting a long input at every offset costs len(input) parses; past this size the JSON
# bodies (which dominate the cost) are cut at a sample of offsets instead: every offset near
# either end (the command's line and size, the body's end) and a stride through the body,
# which the parser only buffers until its size is there (a 10,000-deep body parses in ~25 ms:
# 918 cuts of it were 22 s of the suite; the 1,500-deep one, 3,006 bytes, cut at every
# offset, 14 s). A cut near the end parses the whole body: fewer there than at the start.
EVERY_OFFSET_UP_TO = 2_000
HEAD = 64
TAIL = 16
STRIDE = 1009


def cut_points(case: Case) -> list[list[bytes]]:
    data = case.wire
    if len(data) <= EVERY_OFFSET_UP_TO:
        return list(splits(data))
    n = len(data)
    points = {*range(1, HEAD), *range(n - TAIL, n), *range(1, n, STRIDE)}
    return [[data[:i], data[i:]] for i in sorted(points)]


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.id)
def test_whole(case: Case) -> None:
    events, end = run_case(case, whole(case.wire))
    assert (events, end) == (list(case.events), case.end)


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.id)
def test_split_in_two_at_every_offset(case: Case) -> None:
    expected = (list(case.events), case.end)
    for chunks in cut_points(case):
        assert run_case(case, chunks) == expected, f"cut at {len(chunks[0])}"


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.id)
def test_one_byte_at_a_time(case: Case) -> None:
    assert run_case(case, bytewise(case.wire)) == (list(case.events), case.end)


# -- the connection object itself --------------------------------------------------------------


def fed(data: bytes, **kwargs: object) -> V2Connection:
    conn = V2Connection(**kwargs)  # type: ignore[arg-type]
    conn.receive_data(data)
    return conn


def test_need_data_until_a_command_is_complete() -> None:
    conn = V2Connection()
    assert conn.next_command() is NEED_DATA
    conn.receive_data(MAGIC + b"PUB p\n" + sized(b"hello")[:6])
    assert conn.next_command() is NEED_DATA
    assert conn.next_command() is NEED_DATA
    conn.receive_data(b"llo")
    assert conn.next_command() == Pub("p", b"hello")
    assert conn.next_command() is NEED_DATA
    conn.receive_data(b"")
    assert conn.next_command() is CLOSED
    assert conn.next_command() is CLOSED


def test_paused_after_identify_until_resume() -> None:
    conn = fed(MAGIC + identify(b"{}") + b"NOP\n")
    assert isinstance(conn.next_command(), Identify)
    assert conn.next_command() is PAUSED
    assert conn.trailing_data == b"NOP\n"  # what an upgrade would have to carry over
    conn.receive_data(b"NOP\n")
    assert conn.next_command() is PAUSED
    conn.resume()
    assert conn.next_command() == Nop()
    assert conn.next_command() == Nop()
    assert conn.next_command() is NEED_DATA


def test_clear_trailing_data_after_upgrade() -> None:
    conn = fed(MAGIC + identify(b'{"feature_negotiation":true,"snappy":true}') + b"\xff\x06")
    assert isinstance(conn.next_command(), Identify)
    assert conn.trailing_data == b"\xff\x06"
    conn.clear_trailing_data()  # the compressed stream now owns those bytes
    assert conn.trailing_data == b""
    conn.resume()
    conn.receive_data(b"NOP\n")  # as decompressed by the upgraded transport
    assert conn.next_command() == Nop()


def test_without_magic() -> None:
    conn = fed(b"NOP\n", expect_magic=False)
    assert conn.next_command() == Nop()


def test_state_follows_sub_and_cls() -> None:
    conn = fed(MAGIC + identify(b"{}") + b"AUTH\n" + sized(b"x") + b"SUB t c\nCLS\n")
    assert conn.state == ClientState.INIT
    conn.next_command()
    conn.resume()
    assert conn.state == ClientState.INIT  # IDENTIFY leaves the state alone
    conn.next_command()
    assert conn.state == ClientState.INIT  # so does AUTH
    assert conn.next_command() == Sub("t", "c")
    assert conn.state == ClientState.SUBSCRIBED == 3
    assert conn.next_command() == Cls()
    assert conn.state == ClientState.CLOSING == 4


def test_tls_active_lifts_the_tls_requirement() -> None:
    conn = fed(MAGIC + identify(b'{"tls_v1":true,"feature_negotiation":true}'), tls_required=True)
    assert isinstance(conn.next_command(), Identify)
    conn.tls_active = True  # the daemon completed the handshake
    conn.resume()
    conn.receive_data(b"NOP\nSUB t c\nRDY 1\n")
    assert [conn.next_command() for _ in range(3)] == [Nop(), Sub("t", "c"), Rdy(1)]


def test_tls_not_required_by_default() -> None:
    assert fed(MAGIC + b"NOP\n").next_command() == Nop()


@pytest.mark.parametrize(
    ("data", "code", "desc"),
    [
        (b"XXXX", ErrorCode.E_BAD_PROTOCOL, None),
        (MAGIC + b"\n", ErrorCode.E_INVALID, "invalid command "),
        (MAGIC + b"PUB bad!\n", ErrorCode.E_BAD_TOPIC, 'PUB topic name "bad!" is not valid'),
        (
            MAGIC + b"MPUB bad!\n",
            ErrorCode.E_BAD_TOPIC,
            'E_BAD_TOPIC MPUB topic name "bad!" is not valid',
        ),
        (MAGIC + b"SUB t bad!\n", ErrorCode.E_BAD_CHANNEL, 'SUB channel name "bad!" is not valid'),
        (
            MAGIC + b"PUB p\n" + b"\0\0\0\0",
            ErrorCode.E_BAD_MESSAGE,
            "PUB invalid message body size 0",
        ),
        (MAGIC + b"AUTH\n" + b"\0\0\0\0", ErrorCode.E_BAD_BODY, "AUTH invalid body size 0"),
    ],
)
def test_error_code_desc_and_fatal(data: bytes, code: ErrorCode, desc: str | None) -> None:
    with pytest.raises(NSQError) as info:
        fed(data).next_command()
    assert (info.value.code, info.value.desc, info.value.fatal) == (code, desc, True)


def test_many_commands_in_one_read() -> None:
    data = (
        MAGIC
        + b"SUB t c\nRDY 5\n"
        + pub(b"p", b"a")
        + mpub(b"p", [b"b", b"c"])
        + b"FIN "
        + MSG_ID
        + b"\nNOP\nCLS\n"
    )
    conn = fed(data)
    events = []
    while (event := conn.next_command()) is not NEED_DATA:
        events.append(event)
    assert events == [
        Sub("t", "c"),
        Rdy(5),
        Pub("p", b"a"),
        MPubStart("p"),
        MPub("p", [b"b", b"c"]),
        Fin([MSG_ID]),
        Nop(),
        Cls(),
    ]


def test_mpub_start_comes_before_the_body_arrives() -> None:
    # nsqd checks auth and creates the topic before it reads MPUB's body.
    conn = fed(MAGIC + b"MPUB p\n")
    assert conn.next_command() == MPubStart("p")
    assert conn.next_command() is NEED_DATA


def test_custom_limits_apply_everywhere() -> None:
    limits = Limits(max_msg_size=10, max_body_size=50, max_rdy_count=3, max_req_timeout_ms=7)
    data = b"SUB t c\nRDY 3\nREQ " + MSG_ID + b" 8\nDPUB p 8\n"
    assert run([MAGIC + data], limits=limits) == (
        [Sub("t", "c"), Rdy(3), Req(MSG_ID, 7)],  # REQ's delay clamped to the maximum
        Err(b"E_INVALID DPUB timeout 8 out of range 0-7"),
    )


def test_eof_cases_end_with_closed() -> None:
    for data in (b"", b"  V", MAGIC, MAGIC + b"NOP\n", MAGIC + b"NOP"):
        assert run(whole(data))[1] is EOF


def _fins(n: int, first: int = 0) -> bytes:
    return b"".join(b"FIN %016x\n" % i for i in range(first, first + n))


@pytest.mark.parametrize(
    "tail",
    [
        b"",  # FIN lines only: read a column at a time
        b"FIN 0123",  # a FIN cut short at the read's end
        b"RDY 3\n" + _fins(3, 50),  # another command after them: the expression's run
        b"FIN 0123456789abcde\r\n" + _fins(2, 60),  # a CR ends a plain run
        b"FIN 0123456789 bcdef\n",  # a space in the id: not a FIN line, nsqd's error
        b"FIN 0123456789\rbcdef\n",  # a CR in the id
        b"FIN 0123456789abcdef0\n",  # 17 bytes
    ],
)
@pytest.mark.parametrize("count", [1, 2, 40])
def test_fin_lines_in_bulk_read_as_one_at_a_time(tail: bytes, count: int) -> None:
    """FINs read in bulk (a whole read of them as one Fin) give the ids, the commands after
    them and the error that FINs read one at a time give."""
    data = MAGIC + b"SUB t c\n" + _fins(count) + tail
    bulk = run(whole(data))
    assert bulk == run(bytewise(data))
    events, _ = bulk
    assert events[1 : 1 + count] == [Fin([b"%016x" % i]) for i in range(count)]
