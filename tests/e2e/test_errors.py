"""Each error code on the wire: exact frame text, and whether the connection survives it.

nsqd keeps the connection open only after E_FIN_FAILED, E_REQ_FAILED and E_TOUCH_FAILED; every
other error frame is followed by a close. The daemon runs with SMALL_LIMITS
(--max-msg-size=100 --max-body-size=1000 --max-rdy-count=50)."""

from __future__ import annotations

import pytest
import trio

from .conftest import Daemon
from .wire import Conn, command, identify_cmd, mpub_body, publish

UNKNOWN_ID = b"0123456789abcdef"
T = "{topic}"  # replaced by the test's topic


def pub(topic: str, body: bytes) -> bytes:
    return command(f"PUB {topic}", body)


FIN_ID = b"FIN " + UNKNOWN_ID + b"\n"
REQ_ID = b"REQ " + UNKNOWN_ID + b" 0\n"
TOUCH_ID = b"TOUCH " + UNKNOWN_ID + b"\n"
ID = UNKNOWN_ID.decode()
SUB_T = f"SUB {T} ch\n".encode()


def case(name: str, state: str, raw: bytes, expected: str, fatal: bool = True) -> object:
    """One error scenario: in `state` (init / subscribed / closing), send `raw`, get the
    error frame `expected`, then the connection closes (fatal) or stays usable."""
    return pytest.param(state, raw, expected, fatal, id=name)


CASES = [
    # wrong state
    case("rdy-before-sub", "init", b"RDY 1\n", "E_INVALID cannot RDY in current state"),
    case("fin-before-sub", "init", FIN_ID, "E_INVALID cannot FIN in current state"),
    case("req-before-sub", "init", REQ_ID, "E_INVALID cannot REQ in current state"),
    case("touch-before-sub", "init", TOUCH_ID, "E_INVALID cannot TOUCH in current state"),
    case("cls-before-sub", "init", b"CLS\n", "E_INVALID cannot CLS in current state"),
    case("sub-twice", "subscribed", SUB_T, "E_INVALID cannot SUB in current state"),
    case(
        "identify-after-sub",
        "subscribed",
        identify_cmd(),
        "E_INVALID cannot IDENTIFY in current state",
    ),
    case(
        "auth-after-sub",
        "subscribed",
        command("AUTH", b"secret"),
        "E_INVALID cannot AUTH in current state",
    ),
    case("sub-after-cls", "closing", SUB_T, "E_INVALID cannot SUB in current state"),
    case("cls-twice", "closing", b"CLS\n", "E_INVALID cannot CLS in current state"),
    # commands and parameters
    case("unknown-command", "init", b"ASDF\n", "E_INVALID invalid command ASDF"),
    case("empty-line", "init", b"\n", "E_INVALID invalid command "),
    case(
        "sub-missing-channel",
        "init",
        f"SUB {T}\n".encode(),
        "E_INVALID SUB insufficient number of parameters",
    ),
    case("rdy-unparsable", "subscribed", b"RDY -1\n", "E_INVALID RDY could not parse count -1"),
    case("rdy-above-max", "subscribed", b"RDY 51\n", "E_INVALID RDY count 51 out of range 0-50"),
    case("fin-short-id", "subscribed", b"FIN 1234\n", "E_INVALID invalid message ID"),
    case(
        "req-unparsable",
        "subscribed",
        b"REQ " + UNKNOWN_ID + b" x\n",
        "E_INVALID REQ could not parse timeout x",
    ),
    case(
        "dpub-out-of-range",
        "init",
        command(f"DPUB {T} 3600001", b"x"),
        "E_INVALID DPUB timeout 3600001 out of range 0-3600000",
    ),
    case("auth-disabled", "init", command("AUTH", b"secret"), "E_AUTH_DISABLED AUTH disabled"),
    # names
    case(
        "sub-bad-topic",
        "init",
        b"SUB bad!topic ch\n",
        'E_BAD_TOPIC SUB topic name "bad!topic" is not valid',
    ),
    case(
        "sub-long-topic",
        "init",
        b"SUB " + b"t" * 65 + b" ch\n",
        f'E_BAD_TOPIC SUB topic name "{"t" * 65}" is not valid',
    ),
    case(
        "sub-bad-channel",
        "init",
        f"SUB {T} bad:chan\n".encode(),
        'E_BAD_CHANNEL SUB channel name "bad:chan" is not valid',
    ),
    case(
        "pub-bad-topic",
        "init",
        pub("bad!topic", b"x"),
        'E_BAD_TOPIC PUB topic name "bad!topic" is not valid',
    ),
    case(
        "mpub-bad-topic",
        "init",
        command("MPUB bad!topic", mpub_body([b"x"])),
        'E_BAD_TOPIC E_BAD_TOPIC MPUB topic name "bad!topic" is not valid',
    ),
    case(
        "dpub-bad-topic",
        "init",
        command("DPUB bad!topic 10", b"x"),
        'E_BAD_TOPIC DPUB topic name "bad!topic" is not valid',
    ),
    # sizes
    case("pub-too-big", "init", pub(T, b"x" * 101), "E_BAD_MESSAGE PUB message too big 101 > 100"),
    case("pub-empty", "init", pub(T, b""), "E_BAD_MESSAGE PUB invalid message body size 0"),
    case(
        "dpub-too-big",
        "init",
        command(f"DPUB {T} 10", b"x" * 101),
        "E_BAD_MESSAGE DPUB message too big 101 > 100",
    ),
    case(
        "mpub-body-too-big",
        "init",
        command(f"MPUB {T}", mpub_body([b"x" * 50] * 20)),
        "E_BAD_BODY MPUB body too big 1084 > 1000",
    ),
    case(
        "mpub-message-too-big",
        "init",
        command(f"MPUB {T}", mpub_body([b"x", b"y" * 101])),
        "E_BAD_MESSAGE MPUB message too big 101 > 100",
    ),
    case(
        "mpub-message-empty",
        "init",
        command(f"MPUB {T}", mpub_body([b"x", b""])),
        "E_BAD_MESSAGE MPUB invalid message(1) body size 0",
    ),
    case(
        "identify-too-big",
        "init",
        command("IDENTIFY", b" " * 1001),
        "E_BAD_BODY IDENTIFY body too big 1001 > 1000",
    ),
    case(
        "auth-too-big",
        "init",
        command("AUTH", b"s" * 1001),
        "E_BAD_BODY AUTH body too big 1001 > 1000",
    ),
    case(
        "identify-bad-json",
        "init",
        command("IDENTIFY", b"{nope"),
        "E_BAD_BODY IDENTIFY failed to decode JSON body",
    ),
    case(
        "identify-bad-heartbeat",
        "init",
        identify_cmd(heartbeat_interval=999),
        "E_BAD_BODY IDENTIFY heartbeat interval (999) is invalid",
    ),
    case(
        "identify-bad-msg-timeout",
        "init",
        identify_cmd(msg_timeout=999),
        "E_BAD_BODY IDENTIFY msg timeout (999) is invalid",
    ),
    case(
        "identify-bad-sample-rate",
        "init",
        identify_cmd(sample_rate=100),
        "E_BAD_BODY IDENTIFY sample rate (100) is invalid",
    ),
    # the three non-fatal ones
    case(
        "fin-unknown", "subscribed", FIN_ID, f"E_FIN_FAILED FIN {ID} failed ID not in flight", False
    ),
    case(
        "req-unknown", "subscribed", REQ_ID, f"E_REQ_FAILED REQ {ID} failed ID not in flight", False
    ),
    case(
        "touch-unknown",
        "subscribed",
        TOUCH_ID,
        f"E_TOUCH_FAILED TOUCH {ID} failed ID not in flight",
        False,
    ),
    case(
        "fin-unknown-closing",
        "closing",
        FIN_ID,
        f"E_FIN_FAILED FIN {ID} failed ID not in flight",
        False,
    ),
]


async def enter_state(conn: Conn, state: str, topic: str) -> None:
    if state in ("subscribed", "closing"):
        await conn.sub(topic, "ch")
    if state == "closing":
        await conn.cmd("CLS")
        await conn.expect_response(b"CLOSE_WAIT")


@pytest.mark.parametrize(("state", "raw", "expected", "fatal"), CASES)
async def test_error(
    limited_daemon: Daemon, topic: str, state: str, raw: bytes, expected: str, fatal: bool
) -> None:
    raw = raw.replace(T.encode(), topic.encode())
    async with await Conn.open(limited_daemon.addr) as conn:
        await enter_state(conn, state, topic)
        await conn.send(raw)
        assert await conn.expect_error() == expected
        if fatal:
            await conn.expect_closed()
        else:
            await conn.expect_open()


async def test_bad_magic_closes(limited_daemon: Daemon) -> None:
    async with await Conn.open(limited_daemon.addr, magic=False) as conn:
        await conn.send(b"  V1PUB x\n")
        assert (await conn.expect_error()).startswith("E_BAD_PROTOCOL")
        await conn.expect_closed()


async def test_sub_with_heartbeats_disabled(limited_daemon: Daemon, topic: str) -> None:
    async with await Conn.open(limited_daemon.addr) as conn:
        await conn.send(identify_cmd(heartbeat_interval=-1))
        await conn.expect_response(b"OK")  # no feature_negotiation: a plain OK
        await conn.cmd(f"SUB {topic} ch")
        assert await conn.expect_error() == "E_INVALID cannot SUB with heartbeats disabled"
        await conn.expect_closed()


async def test_fin_of_another_clients_message(limited_daemon: Daemon, topic: str) -> None:
    """Non-fatal E_FIN_FAILED / E_REQ_FAILED / E_TOUCH_FAILED for a message in flight to
    another connection of the same channel; the owner can still FIN it."""
    async with (
        await Conn.open(limited_daemon.addr) as owner,
        await Conn.open(limited_daemon.addr) as other,
    ):
        await owner.sub(topic, "ch", rdy=1)
        await other.sub(topic, "ch")
        await publish(limited_daemon.addr, topic, [b"mine"])
        msg = await owner.expect_message()
        mid = msg.id.decode()
        await other.fin(msg.id)
        assert (
            await other.expect_error()
            == f"E_FIN_FAILED FIN {mid} failed client does not own message"
        )
        await other.req(msg.id, 0)
        assert (
            await other.expect_error()
            == f"E_REQ_FAILED REQ {mid} failed client does not own message"
        )
        await other.touch(msg.id)
        assert (
            await other.expect_error()
            == f"E_TOUCH_FAILED TOUCH {mid} failed client does not own message"
        )
        await other.expect_open()
        await owner.fin(msg.id)
        await owner.expect_open()  # no error for the owner's FIN
        await owner.fin(msg.id)  # a second FIN: no longer in flight
        assert await owner.expect_error() == f"E_FIN_FAILED FIN {mid} failed ID not in flight"
        await owner.expect_open()


async def test_rdy_in_closing_state_is_ignored(limited_daemon: Daemon, topic: str) -> None:
    async with await Conn.open(limited_daemon.addr) as conn:
        await enter_state(conn, "closing", topic)
        await conn.cmd("RDY 5")
        await conn.expect_open()


async def test_max_channel_consumers(make_daemon, topic: str) -> None:  # type: ignore[no-untyped-def]
    d = make_daemon("--max-channel-consumers=1")
    async with await Conn.open(d.addr) as first, await Conn.open(d.addr) as second:
        await first.sub(topic, "ch")
        await second.cmd(f"SUB {topic} ch")
        assert await second.expect_error() == (
            f"E_SUB_FAILED SUB failed consumers for {topic}:ch exceeds limit of 1"
        )
        await second.expect_closed()
        await first.expect_open()


async def test_identify_response_reflects_limits(limited_daemon: Daemon) -> None:
    async with await Conn.open(limited_daemon.addr) as conn:
        answer = await conn.identify(msg_timeout=5000, sample_rate=10)
        assert answer["max_rdy_count"] == 50
        assert answer["version"] == "1.3.0"
        assert answer["msg_timeout"] == 5000
        assert answer["max_msg_timeout"] == 900_000
        assert answer["sample_rate"] == 10
        await conn.expect_open()
    async with await Conn.open(limited_daemon.addr) as conn:
        answer = await conn.identify()
        assert answer["msg_timeout"] == 45_000  # --msg-timeout
        assert (answer["output_buffer_size"], answer["output_buffer_timeout"]) == (16384, 250)
        await conn.expect_open()


async def test_limits_are_inclusive(limited_daemon: Daemon, topic: str) -> None:
    """A body of exactly --max-msg-size, an MPUB of exactly --max-body-size: accepted."""
    async with await Conn.open(limited_daemon.addr) as conn:
        await conn.pub(topic, b"x" * 100)
        await conn.cmd(f"DPUB {topic} 0", b"y" * 100)
        await conn.expect_response()
        # 4 (count) + 9 * (4 + 96) + (4 + 92) = 1000 bytes
        body = mpub_body([b"z" * 96] * 9 + [b"z" * 92])
        assert len(body) == 1000
        await conn.cmd(f"MPUB {topic}", body)
        await conn.expect_response()
    async with await Conn.open(limited_daemon.addr) as consumer:
        await consumer.sub(topic, "ch", rdy=50)
        got = await consumer.messages(12)
        assert sorted(len(m.body) for m in got) == [92] + [96] * 9 + [100, 100]


async def test_mpub_with_a_bad_message_publishes_nothing(
    limited_daemon: Daemon, topic: str
) -> None:
    async with await Conn.open(limited_daemon.addr) as consumer:
        await consumer.sub(topic, "ch", rdy=10)
        async with await Conn.open(limited_daemon.addr) as producer:
            await producer.cmd(f"MPUB {topic}", mpub_body([b"good", b"also good", b"x" * 101]))
            assert (await producer.expect_error()).startswith("E_BAD_MESSAGE MPUB message too big")
            await producer.expect_closed()
        assert await consumer.messages_for(0.4) == []
        await publish(limited_daemon.addr, topic, [b"after"])
        (msg,) = await consumer.messages(1)
        assert msg.body == b"after"


async def test_commands_split_across_writes_and_crlf(limited_daemon: Daemon, topic: str) -> None:
    """The parser copes with a command arriving a byte at a time, `\\r\\n` line endings and
    several commands in one write; binary bodies come back byte for byte."""
    body = bytes(range(256))[:100]
    async with await Conn.open(limited_daemon.addr) as consumer:
        await consumer.sub(topic, "ch", rdy=10)
        async with await Conn.open(limited_daemon.addr) as producer:
            for byte in command(f"PUB {topic}", body):
                await producer.send(bytes([byte]))
                await trio.sleep(0.001)
            await producer.expect_response()
            await producer.send(b"NOP\r\n" + command(f"PUB {topic}\r", b"crlf") + b"NOP\n" * 3)
            await producer.expect_response()
        got = await consumer.messages(2)
        assert [m.body for m in got] == [body, b"crlf"]
