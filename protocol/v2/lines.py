"""Command lines: the checks nsqd makes on a V2 command's line (its words and the client's
state) before it reads a body or touches a topic, in nsqd's order and with its texts, and how
each command with a body reads it (`BodySpec`). Pure functions of what they are given; the
connection (connection.py) owns the state, the buffer and the reading stages."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from . import commands as c
from .errors import ErrorCode, NSQError
from .gostr import go_quote
from .identify import ClientSettings
from .limits import Limits
from .message import MSG_ID_LENGTH
from .names import is_valid_name
from .state import TRANSITIONS, ClientState, check_state

_U64: Final = 1 << 64


def text(raw: bytes) -> str:
    # Keeps arbitrary client bytes intact through NSQError's str -> bytes round trip.
    return raw.decode("utf-8", "surrogateescape")


def parse_base10(raw: bytes) -> int | None:
    """nsqd's ByteToBase10: unsigned decimal digits only (empty is 0), wrapping at 2**64."""
    if raw and not raw.isdigit():  # bytes.isdigit is ASCII-only
        return None
    return int(raw) % _U64 if raw else 0


def int64(n: int) -> int:
    n %= _U64
    return n - _U64 if n >= 1 << 63 else n


class BodySpec:
    """How one command reads its size-prefixed body and which errors it reports."""

    __slots__ = ("code", "finish", "max_size", "name", "noun", "too_big_first")

    def __init__(
        self,
        name: str,
        code: ErrorCode,
        noun: str,
        max_size: int,
        too_big_first: bool,
        finish: Callable[[bytes], c.Command],
    ) -> None:
        self.name, self.code, self.noun = name, code, noun
        self.max_size, self.too_big_first, self.finish = max_size, too_big_first, finish

    def error(self, what: str) -> NSQError:
        return NSQError(self.code, f"{self.name} {what}")

    def check_size(self, size: int) -> None:
        if 0 < size <= self.max_size:
            return  # the common case: no message to format
        big = size > self.max_size
        too_big = f"{self.noun or 'body '}too big {size} > {self.max_size}"
        if big and self.too_big_first:
            raise self.error(too_big)
        if size <= 0:
            raise self.error(f"invalid {self.noun}body size {size}")
        if big:
            raise self.error(too_big)


def transition(state: ClientState, verb: bytes) -> ClientState:
    return TRANSITIONS.get((state, verb), state)


def auth(params: list[bytes], state: ClientState) -> None:
    check_state(b"AUTH", state)
    if len(params) != 1:
        raise NSQError(ErrorCode.E_INVALID, "AUTH invalid number of parameters")


def sub(params: list[bytes], state: ClientState, settings: ClientSettings) -> c.Sub:
    check_state(b"SUB", state)
    if settings.heartbeat_interval_ms <= 0:
        raise NSQError(ErrorCode.E_INVALID, "cannot SUB with heartbeats disabled")
    if len(params) < 3:
        raise NSQError(ErrorCode.E_INVALID, "SUB insufficient number of parameters")
    topic, channel = params[1], params[2]
    if not is_valid_name(topic):
        raise NSQError(ErrorCode.E_BAD_TOPIC, f"SUB topic name {go_quote(topic)} is not valid")
    if not is_valid_name(channel):
        raise NSQError(
            ErrorCode.E_BAD_CHANNEL, f"SUB channel name {go_quote(channel)} is not valid"
        )
    return c.Sub(topic.decode(), channel.decode())


def topic(verb: str, params: list[bytes], count: int) -> bytes:
    """The topic of a PUB, MPUB or DPUB line of at least `count` words, checked."""
    if len(params) < count:
        raise NSQError(ErrorCode.E_INVALID, f"{verb} insufficient number of parameters")
    name = params[1]
    if not is_valid_name(name):
        desc = f"{verb} topic name {go_quote(name)} is not valid"
        if verb == "MPUB":  # nsqd repeats the code in MPUB's description
            desc = f"E_BAD_TOPIC {desc}"
        raise NSQError(ErrorCode.E_BAD_TOPIC, desc)
    return name


def dpub_delay(raw: bytes, limits: Limits) -> int:
    """DPUB's delay in ms, checked against --max-req-timeout."""
    delay = parse_base10(raw)
    if delay is None:
        raise NSQError(ErrorCode.E_INVALID, f"DPUB could not parse timeout {text(raw)}")
    delay_ns = int64(delay * 1_000_000)
    max_ms = limits.max_req_timeout_ms
    if delay_ns < 0 or delay_ns > max_ms * 1_000_000:
        raise NSQError(ErrorCode.E_INVALID, f"DPUB timeout {delay} out of range 0-{max_ms}")
    return delay_ns // 1_000_000


def rdy(params: list[bytes], state: ClientState, limits: Limits) -> c.Rdy | None:
    if state == ClientState.CLOSING:
        return None  # nsqd ignores RDY after CLS
    check_state(b"RDY", state)
    count = 1
    if len(params) > 1:
        parsed = parse_base10(params[1])
        if parsed is None:
            raise NSQError(ErrorCode.E_INVALID, f"RDY could not parse count {text(params[1])}")
        count = int64(parsed)
    max_rdy = limits.max_rdy_count
    if count < 0 or count > max_rdy:
        raise NSQError(ErrorCode.E_INVALID, f"RDY count {count} out of range 0-{max_rdy}")
    return c.Rdy(count)


def msg_id(verb: bytes, params: list[bytes], count: int, state: ClientState) -> bytes:
    check_state(verb, state)
    if len(params) < count:
        raise NSQError(ErrorCode.E_INVALID, f"{verb.decode()} insufficient number of params")
    got = params[1]
    if len(got) != MSG_ID_LENGTH:
        raise NSQError(ErrorCode.E_INVALID, "invalid message ID")
    return got


def req(params: list[bytes], state: ClientState, limits: Limits) -> c.Req:
    got = msg_id(b"REQ", params, 3, state)
    parsed = parse_base10(params[2])
    if parsed is None:
        raise NSQError(ErrorCode.E_INVALID, f"REQ could not parse timeout {text(params[2])}")
    delay_ns = int64(parsed * 1_000_000)
    # nsqd clamps (and only logs) an out-of-range requeue delay.
    delay_ms = min(max(delay_ns, 0), limits.max_req_timeout_ms * 1_000_000) // 1_000_000
    return c.Req(got, delay_ms)
