"""MULTI/EXEC/DISCARD and WATCH/UNWATCH, as Redis 7.0 answers them. Every command runs to its
end before another starts, so EXEC only has to run its queue in order; a blocking command in
it does not block (an empty key gives its timeout answer at once). A WATCHed key changed by
anyone (a write, a pop, a DEL, its expiry) makes EXEC answer the null array."""

from __future__ import annotations

from protocol.resp.codec import OK, raw_array

from .. import watch as watching
from .registry import ReplyError, Session, command, run_inside


@command("multi", 1, immediate=True)
def multi(s: Session, argv: list[bytes]) -> bytes:
    if s.multi is not None:
        raise ReplyError("ERR MULTI calls can not be nested")
    s.multi, s.multi_failed = [], False
    return OK


@command("exec", 1, immediate=True)
def exec_(s: Session, argv: list[bytes]) -> bytes:
    if s.multi is None:
        raise ReplyError("ERR EXEC without MULTI")
    queued, failed, dirty = s.multi, s.multi_failed, s.dirty
    s.multi, s.multi_failed = None, False
    watching.unwatch(s)
    if failed:
        raise ReplyError("EXECABORT Transaction discarded because of previous errors.")
    if dirty:
        return s.enc.null_array
    return raw_array([run_inside(s, cmd, args) for cmd, args in queued])


@command("discard", 1, immediate=True)
def discard(s: Session, argv: list[bytes]) -> bytes:
    if s.multi is None:
        raise ReplyError("ERR DISCARD without MULTI")
    s.multi, s.multi_failed = None, False
    watching.unwatch(s)
    return OK


@command("watch", -2, immediate=True)
def watch(s: Session, argv: list[bytes]) -> bytes:
    if s.multi is not None:
        raise ReplyError("ERR WATCH inside MULTI is not allowed")
    watching.watch(s.ks, s, argv[1:])
    return OK


@command("unwatch", 1)
def unwatch(s: Session, argv: list[bytes]) -> bytes:
    watching.unwatch(s)
    return OK
