"""What Redis's own test suite asks of a server around its tests: CONFIG GET/SET of the
settings that exist here, FUNCTION FLUSH, MEMORY USAGE, and the DEBUG subcommands that mean
something here (with --resp-enable-debug-command, as Redis's enable-debug-command): SLEEP,
SET-ACTIVE-EXPIRE, QUICKLIST-PACKED-THRESHOLD (accepted: memory layout only), RELOAD and
LOADAOF (a round trip of the dataset through the log).

The encoding knobs (list-max-listpack-size, list-compress-depth, hash-max-listpack-*) only
choose how Redis packs small values in memory; no reply depends on them, so they are kept,
validated as Redis 7.0 does and reported back, and have no other effect. `save` is "" and
only "" is accepted: this front-end persists by its log, never by RDB snapshots."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from protocol.resp.codec import OK, bulk, integer, string2ll

from .. import glob
from ..stream import Stream
from ..zset import ZSet
from .registry import SYNTAX, ReplyError, Session, command, container, integer_arg, wrong_arity

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
_UNITS = {b"": 1, b"b": 1, b"k": 1000, b"kb": 1024, b"m": 1000**2, b"mb": 1024**2,
          b"g": 1000**3, b"gb": 1024**3}  # fmt: skip


def memtoull(raw: bytes) -> int | None:
    """Redis's memtoull: digits with an optional unit (1k, 5mb), or None."""
    text = raw.lower()
    digits = text.rstrip(b"kmgb")
    unit = _UNITS.get(text[len(digits) :])
    if unit is None or not digits.isdigit() or len(digits) >= 128:
        return None  # memtoull copies the digits into a 128-byte buffer, or refuses them
    # strtoull saturates (ERANGE, which memtoull does not check); the product wraps, as C's
    return min(int(digits), 2**64 - 1) * unit % 2**64


# -- CONFIG GET / SET -------------------------------------------------------------------------


Check = Callable[[bytes], "bytes | str"]  # the value as CONFIG GET shows it, or why not


def _number(
    low: int,
    high: int,
    parse: Callable[[bytes], int | None],
    bad: str = "argument couldn't be parsed into an integer",
) -> Check:
    def check(raw: bytes) -> bytes | str:
        value = parse(raw)
        if value is None:
            return bad  # numericParseString's words: a memory value's differ
        if not low <= value <= high:
            return f"argument must be between {low} and {high} inclusive"
        return b"%d" % value  # 1k reads back as 1000

    return check


def _save(raw: bytes) -> bytes | str:
    return raw if raw == b"" else "this server persists by its log, not by RDB snapshots"


def _immutable(raw: bytes) -> bytes | str:
    return "can't set immutable config"


def _fixed(value: bytes) -> Check:
    """A parameter Redis can change and this server cannot: setting it to what it is works."""

    def check(raw: bytes) -> bytes | str:
        return raw if raw.lower() == value else f"only '{value.decode()}' is supported here"

    return check


@dataclass(frozen=True, slots=True)
class Setting:
    names: tuple[bytes, ...]  # the name and Redis 7.0's alias for it
    default: bytes
    check: Check


# Redis 7.0's values of the parameters clients and test suites read; those this server cannot
# change are fixed (every write is logged here, hence appendonly yes)
FIXED = {
    "appendfsync": "everysec", "appendonly": "yes", "hz": "10",
    "maxclients": "10000", "maxmemory": "0", "maxmemory-policy": "noeviction",
    "notify-keyspace-events": "", "set-max-intset-entries": "512",
    "timeout": "0", "zset-max-listpack-entries": "128", "zset-max-listpack-value": "64",
    "zset-max-ziplist-entries": "128", "zset-max-ziplist-value": "64",
}  # fmt: skip
IMMUTABLE = {"databases": "16", "port": "6379"}  # set at start in Redis too
SETTINGS = (
    Setting((b"list-max-listpack-size", b"list-max-ziplist-size"), b"-2",
            _number(-(2**31), INT_MAX, string2ll)),
    Setting((b"list-compress-depth",), b"0", _number(0, INT_MAX, string2ll)),
    Setting((b"hash-max-listpack-entries", b"hash-max-ziplist-entries"), b"512",
            _number(0, LONG_MAX, string2ll)),
    Setting((b"hash-max-listpack-value", b"hash-max-ziplist-value"), b"64",
            _number(0, LONG_MAX, memtoull, "argument must be a memory value")),
    Setting((b"save",), b"", _save),
    *(Setting((name.encode(),), value.encode(), _fixed(value.encode()))
      for name, value in FIXED.items()),
    *(Setting((name.encode(),), value.encode(), _immutable) for name, value in IMMUTABLE.items()),
)  # fmt: skip
BY_NAME = {name: setting for setting in SETTINGS for name in setting.names}


def _config_get(s: Session, argv: list[bytes]) -> bytes:
    """Every parameter some pattern matches, once each (Redis 7.0 takes several patterns; a
    plain name comes back as it was given)."""
    values = s.fe.settings
    found: dict[bytes, bytes] = {}  # the name as replied -> its value
    for pattern in argv[2:]:
        if any(c in pattern for c in b"*?["):
            names = [(n, n) for n in BY_NAME if glob.match(pattern, n, nocase=True)]
        else:
            names = [(pattern, pattern.lower())] if pattern.lower() in BY_NAME else []
        for shown, name in names:
            setting = BY_NAME[name]
            found.setdefault(shown, values.get(setting.names[0], setting.default))
    return s.enc.map([bulk(x) for pair in found.items() for x in pair])


def _config_set(s: Session, argv: list[bytes]) -> bytes:
    if len(argv) % 2:
        raise wrong_arity("config|set")
    staged: dict[bytes, bytes] = {}  # by the setting's own name
    for raw_name, value in zip(argv[2::2], argv[3::2], strict=True):
        setting = BY_NAME.get(raw_name.lower())
        name = raw_name.decode("utf-8", "surrogateescape")
        if setting is None:
            raise ReplyError(f"ERR Unknown option or number of arguments for CONFIG SET - '{name}'")
        checked = "duplicate parameter" if setting.names[0] in staged else setting.check(value)
        if isinstance(checked, str):
            raise ReplyError(
                f"ERR CONFIG SET failed (possibly related to argument '{name}') - {checked}"
            )
        staged[setting.names[0]] = checked
    s.fe.settings.update(staged)  # all or nothing, as Redis 7.0
    return OK


container(
    "config",
    {
        "get": (_config_get, -3),
        "set": (_config_set, -4),
        "resetstat": (lambda s, a: OK, 2),
    },
)


# -- FUNCTION ---------------------------------------------------------------------------------


def _function_flush(s: Session, argv: list[bytes]) -> bytes:
    """There are no functions here (no FUNCTION LOAD): flushing them is done at once."""
    if len(argv) == 3 and argv[2].lower() not in (b"sync", b"async"):
        raise ReplyError("ERR FUNCTION FLUSH only supports SYNC|ASYNC option")
    if len(argv) > 3:
        sub = argv[1].decode("utf-8", "surrogateescape")
        raise ReplyError(
            f"ERR unknown subcommand or wrong number of arguments for '{sub}'. Try FUNCTION HELP."
        )
    return OK


container("function", {"flush": (_function_flush, -2)})


# -- DEBUG ------------------------------------------------------------------------------------

DEBUG_REFUSED = (
    'ERR DEBUG command not allowed. If the enable-debug-command option is set to "local", you '
    "can run it from a local connection, otherwise you need to set this option in the "
    "configuration file, and then restart the server."
)


def _debug_sleep(s: Session, argv: list[bytes]) -> bytes:
    """The whole server stops serving for that long, as Redis's does (tests use it to let
    time pass inside one MULTI)."""
    try:
        seconds = float(argv[2])
    except ValueError:
        seconds = 0.0  # Redis's strtold: garbage reads as 0
    time.sleep(max(seconds, 0.0))
    return OK


def _debug_set_active_expire(s: Session, argv: list[bytes]) -> bytes:
    s.fe.expirer.set_active(string2ll(argv[2]) not in (None, 0))  # Redis's atoi
    return OK


def _debug_packed_threshold(s: Session, argv: list[bytes]) -> bytes:
    """Where Redis starts storing a list element in a node of its own: memory layout only."""
    value = memtoull(argv[2])
    if value is None or value >= 2**32:
        raise ReplyError("ERR argument must be a memory value bigger than 1 and smaller than 4gb")
    return OK


def _debug_reload(s: Session, argv: list[bytes]) -> bytes:
    """Redis saves an RDB and loads it back; here the log is rewritten from the dataset
    (fsynced), the dataset emptied and rebuilt from the log, as a restart would."""
    s.fe.log.rewrite()
    return _replay(s)


def _debug_loadaof(s: Session, argv: list[bytes]) -> bytes:
    """Redis flushes its AOF and loads it back; here the log is the append-only file (not
    while it cannot be written: it lacks the changes it keeps, and the load would lose them)."""
    if s.fe.misconf:
        raise ReplyError(s.fe.misconf[1:-2])
    s.fe.log.flush()
    return _replay(s)


def _replay(s: Session) -> bytes:
    fe = s.fe
    fe.ks.loading = True  # emptied without a record of it: the log rebuilds what it holds
    try:
        for db in fe.ks.dbs:
            db.flush()
    finally:
        fe.ks.loading = False
    fe.log.replay(fe.ks)
    return OK


# name -> (handler, exact argc); DEBUG's arity errors name the subcommand
_DEBUG = {
    b"sleep": (_debug_sleep, 3),
    b"reload": (_debug_reload, 2),
    b"loadaof": (_debug_loadaof, 2),
    b"set-active-expire": (_debug_set_active_expire, 3),
    b"quicklist-packed-threshold": (_debug_packed_threshold, 3),
}


@command("debug", -2)
def debug(s: Session, argv: list[bytes]) -> bytes:
    if not s.fe.options.resp_enable_debug_command:
        raise ReplyError(DEBUG_REFUSED)
    sub = _DEBUG.get(argv[1].lower())
    if sub is None or len(argv) != sub[1]:
        name = argv[1].decode("utf-8", "surrogateescape")
        raise ReplyError(
            f"ERR unknown subcommand or wrong number of arguments for '{name}'. Try DEBUG HELP."
        )
    return sub[0](s, argv)


# -- MEMORY USAGE -----------------------------------------------------------------------------


def _size(value: object) -> int:
    """What a value takes in this process, its elements included (Python's own sizes)."""
    if isinstance(value, bytes):
        return sys.getsizeof(value)
    if isinstance(value, dict):
        return (
            sys.getsizeof(value)
            + sum(map(sys.getsizeof, value))
            + sum(map(sys.getsizeof, value.values()))
        )
    if isinstance(value, ZSet):
        return _size(value.scores) + sys.getsizeof(value.order) + 72 * len(value.order)
    if isinstance(value, Stream):
        ids = sys.getsizeof(value.ids) + 72 * len(value.ids)  # the list and its ID tuples
        return sys.getsizeof(value) + ids + sum(map(_size, value.entries))
    return sys.getsizeof(value) + sum(map(sys.getsizeof, value))  # a list (deque)


def _memory_usage(s: Session, argv: list[bytes]) -> bytes:
    if len(argv) not in (3, 5) or (len(argv) == 5 and argv[3].lower() != b"samples"):
        raise ReplyError(SYNTAX)
    if len(argv) == 5:
        integer_arg(argv[4])
    value = s.ks.get(argv[2])
    if value is None:
        return s.enc.null
    return integer(sys.getsizeof(argv[2]) + _size(value))


container("memory", {"usage": (_memory_usage, -3)})
