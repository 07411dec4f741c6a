"""Lua scripts as Redis 7.0 runs them (what Celery's Redis transport loads at worker start):
EVAL, EVALSHA, SCRIPT LOAD/EXISTS/FLUSH, with KEYS and ARGV, `redis.call`/`redis.pcall` into
the same command table (a script runs to its end before any other command, as in Redis),
`redis.status_reply`/`error_reply`/`sha1hex`/`log`, and Redis's conversions between Lua values
and replies. The Lua is lupa's embedded Lua 5.1 (the version Redis embeds), imported on the
first script: a daemon that never runs one never loads it, and without lupa installed a script
is answered with an error that says so."""

from __future__ import annotations

import hashlib
from typing import Any

from protocol.resp.codec import OK, bulk, integer, string2ll
from protocol.resp.replies import RESP2

from .registry import TABLE, Block, ReplyError, Session, command, container, run

NOSCRIPT = "NOSCRIPT No matching script. Please use EVAL."


class _Lua:
    """One Lua state for the daemon (Redis has one too): the scripts by SHA1 and the session
    the running script's redis.call acts for."""

    def __init__(self) -> None:
        try:
            from lupa import lua51
        except ImportError:
            raise ReplyError(
                "ERR scripts need the lupa package here (pip install 'lupa>=2.4')"
            ) from None
        self.rt = lua51.LuaRuntime(encoding=None, unpack_returned_tuples=False)
        self.session: Session | None = None
        self.funcs: dict[str, Any] = {}
        lua_redis = self.rt.eval("{}")
        lua_redis.call = lambda *args: self._call(args, raise_errors=True)
        lua_redis.pcall = lambda *args: self._call(args, raise_errors=False)
        lua_redis.status_reply = lambda text: self.rt.table_from({b"ok": text})
        lua_redis.error_reply = lambda text: self.rt.table_from({b"err": text})
        lua_redis.sha1hex = lambda text: hashlib.sha1(_arg(text)).hexdigest().encode()
        lua_redis.log = lambda *args: None
        for i, name in enumerate((b"LOG_DEBUG", b"LOG_VERBOSE", b"LOG_NOTICE", b"LOG_WARNING")):
            lua_redis[name] = i
        self.rt.globals()[b"redis"] = lua_redis
        self._raise = self.rt.eval("function(e) error(e, 0) end")
        self._loader = self.rt.eval("function(b) return loadstring(b, '@user_script') end")
        self.rt.execute(
            'setmetatable(_G, {__index = function(_, name) error("Script attempted to access '
            'nonexistent global variable \'" .. tostring(name) .. "\'", 2) end})'
        )
        # the script's line that called redis.call: level 3 past this function and the call
        self._line = self.rt.eval("function() return debug.getinfo(3, 'l').currentline end")
        self.error: tuple[bytes, int] | None = None  # a redis.call error ending the script

    def _call(self, args: tuple, raise_errors: bool) -> Any:
        s = self.session
        assert s is not None
        if not args:
            return self._fail("Please specify at least one argument for this redis lib call")
        argv = [_arg(a) for a in args]
        cmd = TABLE.get(argv[0].lower())
        if cmd is None:
            error = b"ERR Unknown Redis command called from script"
        else:
            reply = run(s, cmd, argv) if _arity_ok(cmd.arity, len(argv)) else None
            if reply is None:
                error = b"ERR Wrong number of args calling Redis command from script"
            else:
                value = _parse(self.rt, reply.now() if isinstance(reply, Block) else reply)
                if not (isinstance(value, _Error)):
                    return value
                error = value.text
        table = self.rt.table_from({b"err": error})
        if not raise_errors:
            return table
        self.error = (error, self._line())
        return self._raise(table)

    def _fail(self, text: str) -> Any:
        error = b"ERR " + text.encode()
        self.error = (error, self._line())
        return self._raise(self.rt.table_from({b"err": error}))

    def load(self, body: bytes) -> str:
        sha = hashlib.sha1(body).hexdigest()
        if sha not in self.funcs:
            func = self._loader(body)  # the function, or (nil, the error) as a tuple
            if isinstance(func, tuple):
                problem = func[1]
                raise ReplyError(
                    b"ERR Error compiling script (new function): " + _arg(problem)
                ) from None
            self.funcs[sha] = func
        return sha

    def run(self, s: Session, sha: str, keys: list[bytes], args: list[bytes]) -> bytes:
        g = self.rt.globals()
        g[b"KEYS"] = self.rt.table_from(keys)
        g[b"ARGV"] = self.rt.table_from(args)
        enc, s.enc = s.enc, RESP2  # a script sees RESP2 replies, as Redis's default
        self.session, self.error = s, None
        try:
            value = self.funcs[sha]()
        except Exception as exc:
            raise ReplyError(self._script_error(exc, sha)) from None
        finally:
            self.session = None
            s.enc = enc
        return _reply(s, value)

    def _script_error(self, exc: Exception, sha: str) -> bytes:
        """Redis 7.0's text: the error, the script's SHA1 and the line that raised it."""
        if self.error is not None:  # a redis.call error: its own text goes on
            text, line = self.error
        else:
            message = _text(exc).split("\nstack traceback:", 1)[0]
            text = b"ERR " + message.encode()
            head = message.split(":", 2)
            line = int(head[1]) if len(head) > 2 and head[1].isdigit() else 0
        return text + b" script: %b, on @user_script:%d." % (sha.encode(), line)


def _text(exc: Exception) -> str:
    raw = exc.args[0] if exc.args else str(exc)
    return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)


def _arity_ok(arity: int, argc: int) -> bool:
    return argc == arity if arity > 0 else argc >= -arity


def _arg(value: Any) -> bytes:
    """A redis.call argument: strings as they are, numbers as Lua writes them (%.14g)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, bool) or value is None:
        raise ReplyError("ERR Lua redis lib command arguments must be strings or integers")
    if isinstance(value, int):
        return b"%d" % value
    if isinstance(value, float):
        return (b"%d" % value) if value.is_integer() else (b"%.14g" % value)
    raise ReplyError("ERR Lua redis lib command arguments must be strings or integers")


class _Error:
    __slots__ = ("text",)

    def __init__(self, text: bytes) -> None:
        self.text = text


def _parse(rt: Any, data: bytes) -> Any:
    value, _ = _parse_at(rt, data, 0)
    return value


def _parse_at(rt: Any, data: bytes, pos: int) -> tuple[Any, int]:
    """A RESP2 reply as Redis hands it to Lua: integers as numbers, bulk strings as strings,
    nulls as false, arrays as tables, +status as {ok=...}, -errors as errors."""
    end = data.index(b"\r\n", pos)
    kind, head, nxt = data[pos : pos + 1], data[pos + 1 : end], end + 2
    if kind == b":":
        return int(head), nxt
    if kind == b"+":
        return rt.table_from({b"ok": head}), nxt
    if kind == b"-":
        return _Error(head), nxt
    if kind == b"$":
        n = int(head)
        if n < 0:
            return False, nxt
        return data[nxt : nxt + n], nxt + n + 2
    n = int(head)  # '*'
    if n < 0:
        return False, nxt
    items = []
    for _ in range(n):
        item, nxt = _parse_at(rt, data, nxt)
        items.append(item.text if isinstance(item, _Error) else item)
    return rt.table_from(items), nxt


def _reply(s: Session, value: Any) -> bytes:
    """A script's Lua value as the client's reply, by Redis's conversion rules."""
    if value is None or value is False:
        return s.enc.null
    if value is True:
        return integer(1)
    if isinstance(value, int | float):
        return integer(int(value))  # truncated, as (long long) of a Lua number
    if isinstance(value, bytes):
        return bulk(value)
    ok, err = value[b"ok"], value[b"err"]
    if err is not None:
        raise ReplyError(_arg(err) if not isinstance(err, bytes) else err)
    if ok is not None:
        return b"+" + _arg(ok).replace(b"\r", b" ").replace(b"\n", b" ") + b"\r\n"
    items = []
    i = 1
    while value[i] is not None:
        items.append(_reply(s, value[i]))
        i += 1
    return b"*%d\r\n" % len(items) + b"".join(items)


_LUA: list[_Lua] = []


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
    return lua.run(s, lua.load(argv[1]), keys, args)


@command("evalsha", -3)
def evalsha(s: Session, argv: list[bytes]) -> bytes:
    keys, args = _keys_args(argv)
    lua = _lua()
    sha = argv[1].decode("latin-1").lower()
    if sha not in lua.funcs:
        raise ReplyError(NOSCRIPT)
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
    if _LUA:
        _LUA[0].funcs.clear()
    return OK


container(
    "script",
    {
        "load": (_script_load, 3),
        "exists": (_script_exists, -3),
        "flush": (_script_flush, -2),
    },
)
