"""Lua scripts as Redis 7.0 runs them (what Celery's Redis transport loads at worker start):
EVAL, EVALSHA, SCRIPT LOAD/EXISTS/FLUSH/KILL, with KEYS and ARGV, `redis.call`/`redis.pcall`
into the same command table (a script runs to its end before any other command, as in
Redis), `redis.status_reply`/`error_reply`/`sha1hex`/`log`. Redis's conversions between Lua
values and replies are nsqd/resp/lua_values.py; the fence around the Lua (names, read-only
tables, time and memory limits) nsqd/resp/lua_sandbox.py. The Lua is lupa's embedded Lua 5.1
(the version Redis embeds), imported on the first script: a daemon that never runs one never
loads it, and without lupa installed a script is answered with an error that says so."""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from time import monotonic
from typing import Any

from protocol.resp.codec import OK, bulk, integer, string2ll
from protocol.resp.replies import RESP2

from .. import lua_sandbox
from ..lua_values import Error, arg, parse, reply
from .flags import NOT_IN_SCRIPTS, WRITE
from .registry import TABLE, ReplyError, Session, command, container, run_inside

NOSCRIPT = "NOSCRIPT No matching script. Please use EVAL."
EVAL_KEPT = 500
ROOM = 1 << 20  # what a callback's own work may allocate past the limit


class CallError(Exception):
    """Raised by redis.call (and the other callables) into the script: no Lua function is
    called from inside the callback to raise it (the callback may run in the script's
    coroutine, and Lua's state is not for re-entering there). A script that catches it gets
    its text (lua_sandbox's `settled`)."""


class _Lua:
    """One Lua state for the daemon (Redis has one too), fenced as Redis fences it
    (nsqd/resp/lua_sandbox.py): the scripts by SHA1 and the session the running script's
    redis.call acts for."""

    def __init__(self) -> None:
        try:
            from lupa.lua51 import lua_type

            # the callbacks find the state through _LUA, not `self`: a cycle through Lua's
            # registry would keep a flushed state alive (Python's collector cannot see it)
            self.rt, box = lua_sandbox.new_runtime(
                lambda *args: _LUA[0]._call(args, raise_errors=True),
                lambda *args: _LUA[0]._call(args, raise_errors=False),
                lambda *args: _LUA[0]._sha1hex(args),
                lambda: _LUA[0]._tick(),
                lambda line: _LUA[0]._killed(line),
                lambda exc: _LUA[0]._caught(exc),
            )
        except ImportError:
            raise ReplyError(
                "ERR scripts need the lupa package here (pip install 'lupa>=2.4')"
            ) from None
        self._lib, self._loader = box[b"lib"], box[b"loader"]
        self._line, self._arm, self._disarm = box[b"line"], box[b"arm"], box[b"disarm"]
        self._rawget, self._lua_type, self._run = box[b"rawget"], lua_type, box[b"run"]
        self._collect = box[b"collect"]
        self._lifted = False  # a callback lifted the limit: the hook's next tick sets it
        self.rt.set_max_memory(0)  # MAX_MEMORY only while a script's own code runs (_limit)
        self.session: Session | None = None
        self.funcs: dict[str, Any] = {}
        self._evaled: OrderedDict[str, None] = OrderedDict()  # EVAL's own, oldest first
        self.error: tuple[bytes, int] | None = None  # a redis.call error ending the script
        self.appended_at = 0  # resp.log's record count when the running script started

    # Lua's allocator must never fail outside Lua code: from lupa's Python-side calls (a
    # table made, a value pushed back from a callback) the error would jump over Python's
    # frames (the process aborts, or waits for the GIL for ever). So the limit holds while a
    # script's code runs, and a callback lifts it (with room for what it hands back) until
    # the hook's next look at the clock sets it again.

    def _limit(self) -> None:
        self.rt.set_max_memory(lua_sandbox.MAX_MEMORY)
        self._lifted = False

    def _room(self, size: int = 0) -> None:
        used = self.rt.get_memory_used() or 0
        self.rt.set_max_memory(max(used, lua_sandbox.MAX_MEMORY) + 2 * size + ROOM)
        self._lifted = True

    def _unlimited(self) -> None:
        self.rt.set_max_memory(0)
        self._lifted = True

    def _tick(self) -> float:
        if self._lifted:
            self._limit()
        return monotonic()

    def _sha1hex(self, args: tuple) -> Any:
        """Redis 7.0's: one argument, a string or a number; anything else reads as ""."""
        self._room()
        if len(args) != 1:
            return self._fail("wrong number of arguments")
        text = args[0] if type(args[0]) in (bytes, int, float) else b""
        return hashlib.sha1(arg(text)).hexdigest().encode()

    def _caught(self, exc: Any) -> bytes:
        """The text of the error a callback raised, which the script caught (pcall): the
        script goes on, so that error is no longer the one that may end it."""
        self._room()
        error, self.error = self.error, None
        if error is not None:
            return error[0]
        return str(exc).encode()

    def _killed(self, line: int) -> None:
        limit = round(lua_sandbox.TIME_LIMIT_S * 1000)
        self.error = (
            b"ERR Script killed: it ran past %d ms (Redis's busy-reply-threshold); every "
            b"client of this daemon waits while a script runs" % limit,
            line,
        )

    def _call(self, args: tuple, raise_errors: bool) -> Any:
        s = self.session
        assert s is not None
        self._unlimited()  # (a reply's table is made here)
        if not args:
            return self._fail("Please specify at least one argument for this redis lib call")
        try:
            argv = [arg(a) for a in args]
        except ReplyError as exc:  # an argument that is no string or number
            return self._error(exc.args[0], raise_errors)
        cmd = TABLE.get(argv[0].lower())
        if cmd is not None and cmd.subcommands is not None and len(argv) > 1:
            cmd = cmd.subcommands.get(argv[1].lower())  # as lookupCommand: PUBSUB NUMPAT..
        if cmd is None:
            error = b"ERR Unknown Redis command called from script"
        elif not _arity_ok(cmd.arity, len(argv)):
            error = b"ERR Wrong number of args calling Redis command from script"
        elif argv[0].lower() in NOT_IN_SCRIPTS:
            error = b"ERR This Redis command is not allowed from script"
        elif s.fe.misconf and cmd.name in WRITE and s.fe.log.appended == self.appended_at:
            # resp.log cannot be written: a script's first write is refused, as Redis's
            # scriptVerifyWriteCommandAllow (once one changed something, the rest run)
            error = s.fe.misconf[1:-2]
        else:
            # every handler answers bytes or a Block, whose now() is bytes (registry.run)
            value = parse(self.rt, run_inside(s, cmd, argv))
            if not (isinstance(value, Error)):
                self._room(len(value) if isinstance(value, bytes) else 0)  # pushed back
                return value
            error = value.text
        return self._error(error, raise_errors)

    def _error(self, error: bytes, raise_errors: bool) -> Any:
        """redis.pcall's error table; redis.call's error, raised in the script."""
        self._room(len(error))
        if not raise_errors:
            return self.rt.table_from({b"err": error})
        self.error = (error, self._line())
        raise CallError  # the script's error: its text is self.error's (see `_caught`)

    def _fail(self, text: str) -> Any:
        return self._error(b"ERR " + text.encode(), raise_errors=True)

    def load(self, body: bytes, by_eval: bool = False) -> str:
        """The script's SHA1, compiled if new. Those EVAL alone brought are forgotten past
        EVAL_KEPT, oldest use first (as Redis 7.4 does; a SCRIPT LOAD keeps one): scripts
        made up on the fly would fill the Lua state's memory."""
        sha = hashlib.sha1(body).hexdigest()
        if sha in self.funcs:
            if sha in self._evaled:
                if by_eval:
                    self._evaled.move_to_end(sha)
                else:
                    del self._evaled[sha]
            return sha
        func = self._loader(body)  # the function, or (nil, the error) as a tuple
        if isinstance(func, tuple):
            problem = arg(func[1])
            raise ReplyError(b"ERR Error compiling script (new function): " + problem) from None
        self.funcs[sha] = func
        if by_eval:
            self._evaled[sha] = None
            if len(self._evaled) > EVAL_KEPT:
                del self.funcs[self._evaled.popitem(last=False)[0]]
        return sha

    def used(self, sha: str) -> None:
        """EVALSHA of an EVAL'd script: used now."""
        if sha in self._evaled:
            self._evaled.move_to_end(sha)

    def run(self, s: Session, sha: str, keys: list[bytes], args: list[bytes]) -> bytes:
        rt, lib = self.rt, self._lib  # (no limit between scripts: __init__, the finally below)
        if (rt.get_memory_used() or 0) > lua_sandbox.MAX_MEMORY // 2:
            self._collect()  # what the last script left (Lua 5.1 does not collect on failure)
        lib[b"KEYS"] = rt.table_from(keys)
        lib[b"ARGV"] = rt.table_from(args)
        enc, s.enc = s.enc, RESP2  # a script sees RESP2 replies, as Redis's default
        self.session, self.error = s, None
        self.appended_at = s.fe.log.appended  # (a write past it: the script changed data)
        self._arm()
        self._limit()
        try:
            ok, value, line, as_is = self._run(self.funcs[sha])
        except Exception as exc:  # the time limit, raised again past the sandbox's xpcall
            ok, value, line, as_is = False, _text(exc).encode(), 0, False
        finally:
            self._unlimited()
            self._disarm()
            self.session = None
            s.enc = enc
        if not ok:
            raise ReplyError(self._script_error(value, line, as_is, sha))
        return reply(s, value, self._rawget, self._lua_type)

    def _script_error(self, message: bytes, line: int, as_is: bool, sha: str) -> bytes:
        """Redis 7.0's text: the error, the script's SHA1 and the line that raised it. A
        redis.call error and the time limit's have their own; error({err=...}) is as given."""
        if self.error is not None:
            text, line = self.error
        else:
            text = message if as_is else b"ERR " + message.split(b"\nstack traceback:", 1)[0]
        return text + b" script: %b, on @user_script:%d." % (sha.encode(), line)


def _text(exc: Exception) -> str:
    raw = exc.args[0] if exc.args else str(exc)
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


def _arity_ok(arity: int, argc: int) -> bool:
    return argc == arity if arity > 0 else argc >= -arity


_LUA: list[_Lua] = []


def in_script(s: Session) -> bool:
    """Whether `s` runs a command from inside a script (Redis's CLIENT_LUA caller)."""
    return bool(_LUA) and _LUA[0].session is s


def _lua() -> _Lua:
    if not _LUA:
        _LUA.append(_Lua())
    return _LUA[0]


def _keys_args(argv: list[bytes]) -> tuple[list[bytes], list[bytes]]:
    numkeys = string2ll(argv[2])
    if numkeys is None:
        raise ReplyError("ERR value is not an integer or out of range")
    if numkeys > len(argv) - 3:
        raise ReplyError("ERR Number of keys can't be greater than number of args")
    if numkeys < 0:
        raise ReplyError("ERR Number of keys can't be negative")
    return argv[3 : 3 + numkeys], argv[3 + numkeys :]


@command("eval", -3)
def eval_(s: Session, argv: list[bytes]) -> bytes:
    keys, args = _keys_args(argv)
    lua = _lua()
    return lua.run(s, lua.load(argv[1], by_eval=True), keys, args)


@command("evalsha", -3)
def evalsha(s: Session, argv: list[bytes]) -> bytes:
    if len(argv[1]) != 40:  # evalShaCommand: no such script, before numkeys is read
        raise ReplyError(NOSCRIPT)
    keys, args = _keys_args(argv)
    lua = _lua()
    sha = argv[1].decode("latin-1").lower()
    if sha not in lua.funcs:
        raise ReplyError(NOSCRIPT)
    lua.used(sha)
    return lua.run(s, sha, keys, args)


def _script_load(s: Session, argv: list[bytes]) -> bytes:
    return bulk(_lua().load(argv[2]).encode())


def _script_exists(s: Session, argv: list[bytes]) -> bytes:
    funcs = _lua().funcs if _LUA else {}
    return b"*%d\r\n" % (len(argv) - 2) + b"".join(
        integer(int(a.decode("latin-1").lower() in funcs)) for a in argv[2:]
    )


def _script_flush(s: Session, argv: list[bytes]) -> bytes:
    if len(argv) > 3 or (len(argv) == 3 and argv[2].lower() not in (b"sync", b"async")):
        raise ReplyError("ERR SCRIPT FLUSH only support SYNC|ASYNC option")
    _LUA.clear()  # a new Lua state at the next script, as Redis makes one: memory given back
    return OK


def _script_kill(s: Session, argv: list[bytes]) -> bytes:
    """A script never runs while a command is read here (one runs to its end or its time
    limit before the loop reads on), so there is never one to kill."""
    raise ReplyError("NOTBUSY No scripts in execution right now.")


container(
    "script",
    {
        "load": (_script_load, 3),
        "exists": (_script_exists, -3),
        "flush": (_script_flush, -2),
        "kill": (_script_kill, 2),
    },
)
