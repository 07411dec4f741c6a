"""The command table and what every command shares: registration with Redis's arity rule,
the session a command runs in, the argument parsers with Redis 7's exact error texts, and the
dispatch (unknown command, wrong arity, NOAUTH, WRONGTYPE) in processCommand's order."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from protocol.resp.codec import ReplyError, string2ll
from protocol.resp.replies import RESP2, Resp2

from .. import longdouble, watch
from ..blocking import Waiter
from ..keyspace import WRONGTYPE, Keyspace, WrongType
from .flags import DISK_BOUND, HANDS_OVER, RUNS_OTHERS, WRITE

if TYPE_CHECKING:
    from ..server import Frontend


class Block:
    """A blocking command found nothing: the connection waits on `waiter` up to `timeout`
    seconds (0: forever), then answers `on_timeout`; where it cannot wait, `at_once`."""

    __slots__ = ("at_once", "on_timeout", "timeout", "waiter")

    def __init__(
        self, waiter: Any, timeout: float, on_timeout: bytes, at_once: bytes | None = None
    ) -> None:
        self.waiter = waiter
        self.timeout = timeout
        self.on_timeout = on_timeout
        self.at_once = on_timeout if at_once is None else at_once

    def now(self) -> bytes:
        """The answer where nothing can wait (inside EXEC, or a script): as Redis, a
        blocking command there answers as if its timeout had passed, but for BLMOVE and
        BRPOPLPUSH, which answer the null bulk there (the null array on a timeout)."""
        return self.at_once


class Deferred(Block):
    """A reply that waits for the group's other workers: a pop from a bridge key, or its
    LLEN, that this worker's partition alone cannot answer (bridge.py). The connection is
    parked, its next commands kept for after it, until `ask` gives the reply; no timeout
    of its own (each peer has ASK_TIMEOUT) and no CLIENT UNBLOCK (what a peer gave is
    already taken). Where nothing can wait, `now()` is this worker's answer alone."""

    __slots__ = ("ask", "local")

    def __init__(
        self, ks: Keyspace, ask: Callable[[], Awaitable[bytes]], local: Callable[[], bytes]
    ) -> None:
        super().__init__(Waiter(ks, [], True, _served_by_ask), 0, b"")
        self.ask = ask
        self.local = local

    def now(self) -> bytes:
        return self.local()


def _served_by_ask(key: bytes, elem: bytes) -> bytes:
    raise AssertionError("a deferred reply's waiter is finished by its ask, not by a push")


class Session:
    """One connection's state as the commands see it."""

    __slots__ = (
        "authed", "channels", "close_after", "created", "db", "dirty", "enc", "fe", "handed_at",
        "id", "ks", "last", "multi", "multi_failed", "name", "parser", "patterns", "table",
        "watching",
    )  # fmt: skip

    def __init__(self, fe: Frontend, client_id: int, parser: Any) -> None:
        self.fe = fe
        self.id = client_id
        self.parser = parser
        self.authed = not fe.password
        self.name = b""
        self.created = time.monotonic()  # CLIENT LIST's age
        self.table = TABLE  # pubsub.py swaps in its own while a RESP2 connection subscribes
        self.channels: set[bytes] = set()  # SUBSCRIBEd channels and PSUBSCRIBEd patterns
        self.patterns: set[bytes] = set()
        self.db = 0  # SELECT's database, and its keyspace
        self.ks: Keyspace = fe.ks.dbs[0]
        self.enc: Resp2 = RESP2  # the reply types HELLO chose (RESP2 or RESP3)
        self.close_after = False  # QUIT: close once its +OK is sent
        self.multi: list[tuple[Command, list[bytes]]] | None = None  # queued by MULTI
        self.multi_failed = False  # a command was refused while queueing: EXEC aborts
        # WATCHed keys with their database (each keyspace's watchers has the reverse)
        self.watching: set[tuple[Keyspace, bytes]] = set()
        self.dirty = False  # one of them changed: EXEC answers the null array
        # c->lastcmd, CLIENT LIST's cmd=: the command last looked up for this connection
        # (None: an unknown one), set before its checks; EXEC's and EVAL's own calls keep it
        self.last: Command | None = None
        # resp.log's record count just after the last change that handed something over
        # from inside another command (a pop in EXEC or a script, SET ... GET): the reactor
        # answers the command that made it with its reply in a pass whose log write fails
        self.handed_at = 0


Handler = Callable[[Session, list[bytes]], "bytes | Block"]


@dataclass(slots=True)
class Command:
    name: str
    fn: Handler
    arity: int  # Redis's: n exactly, -n at least n (the name counts)
    noauth: bool = False
    subcommands: dict[bytes, Command] | None = None
    immediate: bool = False  # runs at once inside MULTI (EXEC, DISCARD, MULTI, WATCH, QUIT)
    # refused with -MISCONF while resp.log cannot be written (flags.py: Redis's write flag)
    disk_bound: bool = False
    # a change it made is a write's: its reply waits for the log, and is -MISCONF when that
    # write fails; but a pop's, which hands its element over (flags.py)
    writes: bool = False
    hands_over: bool = False  # flags.HANDS_OVER: a change it made hands something over

    def __post_init__(self) -> None:
        name = self.name
        self.disk_bound = name in DISK_BOUND
        self.hands_over = name in HANDS_OVER
        self.writes = (name in WRITE or name in RUNS_OTHERS) and not self.hands_over


TABLE: dict[bytes, Command] = {}


def command(
    name: str, arity: int, *, noauth: bool = False, immediate: bool = False
) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        TABLE[name.encode()] = Command(name, fn, arity, noauth, None, immediate)
        return fn

    return register


def container(
    name: str,
    subs: dict[str, tuple[Handler, int]],
    bare: Handler | None = None,
    *,
    noauth: bool = False,
) -> None:
    """A command with subcommands (CLIENT, COMMAND): arity errors name 'client|setname';
    alone, it runs `bare` (COMMAND) or is an arity error (CLIENT)."""
    table = {
        k.encode(): Command(f"{name}|{k}", fn, arity, noauth) for k, (fn, arity) in subs.items()
    }
    TABLE[name.encode()] = Command(name, bare or _unused, -1 if bare else -2, noauth, table)


def _unused(s: Session, argv: list[bytes]) -> bytes:
    raise AssertionError("containers dispatch to their subcommands")


def _arity_ok(arity: int, argc: int) -> bool:
    return argc == arity if arity > 0 else argc >= -arity


def wrong_arity(name: str) -> ReplyError:
    return ReplyError(f"ERR wrong number of arguments for '{name}' command")


def _unknown(argv: list[bytes]) -> bytes:
    args = b""
    for arg in argv[1:]:
        if len(args) >= 128:
            break
        args += b"'" + arg[: 128 - len(args)] + b"' "
    name = argv[0].split(b"\0", 1)[0][:128]
    return ReplyError(
        b"ERR unknown command '" + name + b"', with args beginning with: " + args
    ).reply


def dispatch(s: Session, argv: list[bytes]) -> bytes | Block:
    """Run one command (or queue it inside MULTI) in processCommand's order of checks."""
    cmd = s.table.get(argv[0].lower())
    if cmd is not None and cmd.subcommands is None and s.multi is None:
        # the usual case (no subcommand, in no MULTI): the checks below in one expression
        argc, arity = len(argv), cmd.arity
        if (
            (argc == arity if arity > 0 else argc >= -arity)
            and (s.authed or cmd.noauth)
            and not (cmd.disk_bound and s.fe.misconf)
        ):
            s.last = cmd
            return run(s, cmd, argv)
    error = None
    if cmd is None:
        error = _unknown(argv)
    else:
        if cmd.subcommands is not None and len(argv) >= 2:
            sub = cmd.subcommands.get(argv[1].lower())
            if sub is None:
                sub_name = argv[1][:128].decode("utf-8", "surrogateescape")
                error = ReplyError(
                    f"ERR unknown subcommand '{sub_name}'. Try {cmd.name.upper()} HELP."
                ).reply
            cmd = sub
        if error is None and not _arity_ok(cmd.arity, len(argv)):  # type: ignore[union-attr]
            error = wrong_arity(cmd.name).reply  # type: ignore[union-attr]
        if error is None and not s.authed and not cmd.noauth:  # type: ignore[union-attr]
            error = b"-NOAUTH Authentication required.\r\n"
        if error is None and s.fe.misconf and _disk_bound(s, cmd):  # type: ignore[arg-type]
            error = s.fe.misconf  # resp.log cannot be written: Redis's failed AOF write
    s.last = cmd
    if error is not None:
        if cmd is not None and cmd.name == "exec":
            return exec_abort(s, error)
        if s.multi is not None:
            s.multi_failed = True
        return error
    assert cmd is not None
    if s.multi is not None and not cmd.immediate:
        s.multi.append((cmd, argv))
        return b"+QUEUED\r\n"
    return run(s, cmd, argv)


def _disk_bound(s: Session, cmd: Command) -> bool:
    """processCommand's refusal after a failed AOF write: a write command or PING, and EXEC
    of a transaction that queued one."""
    if cmd.name == "exec" and s.multi is not None:
        return any(queued.disk_bound for queued, _ in s.multi)
    return cmd.disk_bound


def exec_abort(s: Session, error: bytes) -> bytes:
    """An EXEC that processCommand refuses (arity, NOAUTH, RESP2's subscribed context) ends
    the transaction, in MULTI or not, WATCHes included: execCommandAbort's reply, the
    refusal without its -ERR."""
    s.multi, s.multi_failed = None, False
    watch.unwatch(s)
    text = error[5:] if error.startswith(b"-ERR ") else error[1:]
    return b"-EXECABORT Transaction discarded because of: " + text


def run(s: Session, cmd: Command, argv: list[bytes]) -> bytes | Block:
    try:
        return cmd.fn(s, argv)
    except WrongType:
        return WRONGTYPE
    except ReplyError as exc:
        return exc.reply


def run_inside(s: Session, cmd: Command, argv: list[bytes]) -> bytes:
    """Run a command for EXEC or a script, where nothing waits (a blocking one answers at
    once). One of flags.HANDS_OVER that changed something marks the session (`handed_at`):
    the EXEC or script then keeps its reply in a pass whose log write fails, as a plain pop
    does, for its client holds what the pop removed."""
    log = s.fe.log
    before = log.appended
    answer = run(s, cmd, argv)
    reply = answer.now() if isinstance(answer, Block) else answer
    if cmd.hands_over and log.appended != before:
        s.handed_at = log.appended
    return reply


# -- argument parsers -----------------------------------------------------------------------

NOT_INTEGER = "ERR value is not an integer or out of range"
SYNTAX = "ERR syntax error"


def integer_arg(raw: bytes, message: str = NOT_INTEGER) -> int:
    value = string2ll(raw)
    if value is None:
        raise ReplyError(message)
    return value


def int_arg(raw: bytes) -> int:
    """getIntFromObjectOrReply: an integer that fits a C int (SELECT's and COPY's DB)."""
    value = integer_arg(raw)
    if not -(2**31) <= value < 2**31:
        raise ReplyError("ERR value is out of range, value must between -2147483648 and 2147483647")
    return value


def positive_arg(raw: bytes, message: str) -> int:
    """getPositiveLongFromObjectOrReply with a message: used for both kinds of failure."""
    value = string2ll(raw)
    if value is None or value < 0:
        raise ReplyError(message)
    return value


_FLOAT = re.compile(
    rb"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|inf|infinity|nan)\Z", re.IGNORECASE
)
_HEX_FLOAT = re.compile(
    rb"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?\d+)?\Z"
)


def timeout_arg(raw: bytes) -> float:
    """A blocking command's timeout in seconds, as Redis 7.0's getTimeoutFromObjectOrReply
    reads it with string2ld (strtold: its long double overflows past ~1.19e4932 and
    underflows to zero below ~3.6e-4951, both refused; a value past 2**63 ms wraps to
    negative)."""
    text = raw.decode("latin-1")
    if len(raw) >= 5 * 1024 or not (_FLOAT.match(raw) or _HEX_FLOAT.match(raw)):
        raise ReplyError("ERR timeout is not a float or out of range")
    if "nan" in text.lower():
        raise ReplyError("ERR timeout is not a float or out of range")
    if "inf" in text.lower():
        raise ReplyError("ERR timeout is negative")
    try:
        value = longdouble.parse(text)
    except longdouble.OutOfRange:
        raise ReplyError("ERR timeout is not a float or out of range") from None
    ms = math.ceil(value * 1000)  # to whole ms first, as Redis: -0.0001 s is 0, forever
    if ms < 0 or ms >= 2**63:
        raise ReplyError("ERR timeout is negative")
    return float(ms) / 1000


NOT_FLOAT = "ERR value is not a valid float"


def float_arg(raw: bytes, message: str = NOT_FLOAT) -> float:
    """getDoubleFromObject: what strtod reads whole (hex floats and inf too), no spaces, no
    NaN, no overflow to infinity or underflow to zero."""
    if not (_FLOAT.match(raw) or _HEX_FLOAT.match(raw)):  # (string2d: no length limit)
        raise ReplyError(message)
    text = raw.decode("ascii")
    try:
        value = float.fromhex(text) if _HEX_FLOAT.match(raw) else float(text)
    except OverflowError:  # a hex float past a double: strtod's ERANGE
        raise ReplyError(message) from None
    if value != value:
        raise ReplyError(message)
    if value in (float("inf"), float("-inf")) and "inf" not in text.lower():
        raise ReplyError(message)  # ERANGE: the digits overflowed
    if value == 0 and re.search(rb"[1-9]", raw.split(b"e")[0].split(b"E")[0].split(b"p")[0]):
        raise ReplyError(message)  # ERANGE: the digits underflowed to zero
    return value


_C_SPACE = b" \t\n\v\f\r"


def strtod_whole(raw: bytes) -> float | None:
    """A bare `strtod(s, &end)` that must reach the end, as zslParseRange reads a score
    bound (not getDoubleFromObject): leading C white space is skipped, an overflow is an
    infinity and an underflow zero (errno is never looked at), "" is 0; None where strtod
    stops early or reads NaN."""
    text = raw.lstrip(_C_SPACE)
    if not text:
        return 0.0 if not raw else None  # all spaces: nothing read, end points at the first
    if _HEX_FLOAT.match(text):
        try:
            return float.fromhex(text.decode("ascii"))
        except OverflowError:
            return float("-inf") if text[:1] == b"-" else float("inf")
    if not _FLOAT.match(text):
        return None
    value = float(text)
    return None if value != value else value


def _long_double(raw: bytes | None, message: str) -> Fraction:
    if raw is None:
        return Fraction(0)
    if len(raw) >= 5 * 1024 or not (_FLOAT.match(raw) or _HEX_FLOAT.match(raw)):
        raise ReplyError(message)  # string2ld: 5,120 characters or more are refused
    text = raw.decode("ascii")
    if "nan" in text.lower():
        raise ReplyError(message)
    if "inf" in text.lower():
        raise ReplyError("ERR increment would produce NaN or Infinity")
    try:
        return longdouble.parse(text)
    except longdouble.OutOfRange:
        raise ReplyError(message) from None  # getLongDoubleFromObject: ERANGE


def add_float(current: bytes | None, increment: bytes, current_error: str) -> bytes:
    """INCRBYFLOAT/HINCRBYFLOAT: the sum in long double arithmetic, written as Redis writes
    it for humans."""
    total = _long_double(current, current_error), _long_double(increment, NOT_FLOAT)
    try:
        value = longdouble.add(*total)
    except longdouble.OutOfRange:
        raise ReplyError("ERR increment would produce NaN or Infinity") from None
    return longdouble.human(value).encode()
