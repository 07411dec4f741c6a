"""Lua values and RESP replies, both ways, as Redis 7.0 converts them: a command's reply as
redis.call hands it to the script (`parse`), a script's value as the client's reply
(`reply`), and redis.call's arguments (`arg`)."""

from __future__ import annotations

from time import perf_counter
from typing import TYPE_CHECKING, Any

from protocol.resp.codec import ReplyError, bulk, integer

from . import lua_sandbox

if TYPE_CHECKING:
    from .commands.registry import Session


def arg(value: Any) -> bytes:
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


class Error:
    """A -error reply in what a command answered (redis.call raises it, redis.pcall returns
    it as {err=...}; inside an array, its text)."""

    __slots__ = ("text",)

    def __init__(self, text: bytes) -> None:
        self.text = text


def parse(rt: Any, data: bytes) -> Any:
    value, _ = parse_at(rt, data, 0)
    return value


def parse_at(rt: Any, data: bytes, pos: int) -> tuple[Any, int]:
    """A RESP2 reply as Redis hands it to Lua: integers as numbers, bulk strings as strings,
    nulls as false, arrays as tables, +status as {ok=...}, -errors as errors."""
    end = data.index(b"\r\n", pos)
    kind, head, nxt = data[pos : pos + 1], data[pos + 1 : end], end + 2
    if kind == b":":
        return int(head), nxt
    if kind == b"+":
        return rt.table_from({b"ok": head}), nxt
    if kind == b"-":
        return Error(head), nxt
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
        item, nxt = parse_at(rt, data, nxt)
        items.append(item.text if isinstance(item, Error) else item)
    return rt.table_from(items), nxt


# a value inside this many arrays is replaced by Redis's error (its Lua stack's limit, as a
# fresh redis-server 7.0 has it: each such error leaves a slot used there, and lowers it)
_STACK_LIMIT = 7995
_STACK_ERROR = b"-ERR reached lua stack limit\r\n"
_LLONG_MIN = b":-9223372036854775808\r\n"  # what (long long) makes of NaN, inf, 1e300
_REPLY_MAX = 512 << 20  # Redis's proto-max-bulk-len


def reply(s: Session, value: Any, rawget: Any, lua_type: Any) -> bytes:
    """A script's Lua value as the client's reply, by Redis's conversion rules: a table is an
    error ({err="..."}; inside an array, an error element), a status ({ok="..."}) or an array
    of its items 1, 2, ... up to the first nil, read raw (no metamethod runs); a function,
    coroutine or userdata is a nil. Iterative: a table may hold itself. Bounded, as the script
    was: a table that holds itself twice would double at every level (Redis converts it for
    ever), so past the script time limit, or 512 MiB, the reply is an error."""
    out: list[bytes] = []
    frames: list[list[Any]] = []  # per open array: [table, next index, its header's slot]
    deadline, size, count = perf_counter() + lua_sandbox.TIME_LIMIT_S, 0, 0
    while True:
        if len(frames) >= _STACK_LIMIT:
            out.append(_STACK_ERROR)
        elif lua_type(value) == "table":
            err, ok = rawget(value, b"err"), rawget(value, b"ok")
            if type(err) is bytes:
                if not frames:
                    raise ReplyError(err)
                out.append(b"-" + _one_line(err) + b"\r\n")
            elif type(ok) is bytes:
                out.append(b"+" + _one_line(ok) + b"\r\n")
            else:
                frames.append([value, 1, len(out)])
                out.append(b"")  # the header, once the count is known
        else:
            out.append(_scalar(s, value))
        count += 1
        if not count & 4095:
            size += sum(map(len, out[-4096:]))
            if perf_counter() > deadline or size > _REPLY_MAX:
                limit_ms, limit_mib = round(lua_sandbox.TIME_LIMIT_S * 1000), _REPLY_MAX >> 20
                raise ReplyError(
                    f"ERR the script's reply is too large (past {limit_ms} ms or {limit_mib} MiB)"
                )
        while frames:  # the next item of the innermost open array; ended ones get their count
            frame = frames[-1]
            value = rawget(frame[0], frame[1])
            if value is not None:
                frame[1] += 1
                break
            out[frame[2]] = b"*%d\r\n" % (frame[1] - 1)
            frames.pop()
        else:
            return b"".join(out)


def _scalar(s: Session, value: Any) -> bytes:
    if value is None or value is False:
        return s.enc.null
    if value is True:
        return integer(1)
    if isinstance(value, bytes):
        return bulk(value)
    if isinstance(value, int | float):  # truncated, as (long long) of a Lua number
        if value != value or not -(2**63) <= value < 2**63:
            return _LLONG_MIN
        return integer(int(value))
    return s.enc.null  # a function, a coroutine, a userdata


def _one_line(text: bytes) -> bytes:
    return text.replace(b"\r", b" ").replace(b"\n", b" ")
