"""Pub/sub as Redis 7.0 answers it (what python-rq's workers and Celery's broker use):
SUBSCRIBE UNSUBSCRIBE PSUBSCRIBE PUNSUBSCRIBE PUBLISH, PUBSUB CHANNELS/NUMSUB/NUMPAT. A
message reaches each subscribed connection as Redis frames it (an array under RESP2, a push
frame under RESP3) through the front-end's `deliver`, in the same pass as the PUBLISH. Under
RESP2 a subscribed connection runs only the pub/sub commands, PING, QUIT and RESET: its session
dispatches through a table where every other command refuses, as processCommand does."""

from __future__ import annotations

from dataclasses import replace

from protocol.resp.codec import array, bulk, integer

from .. import glob
from .registry import TABLE, Command, ReplyError, Session, command, container, exec_abort

ALLOWED = {b"subscribe", b"unsubscribe", b"psubscribe", b"punsubscribe", b"ping", b"quit",
           b"reset", b"ssubscribe", b"sunsubscribe"}  # fmt: skip


def _refuse(cmd: Command) -> Command:
    """`cmd` refusing, under its full name ('client|getname'): a container keeps its
    subcommands, so that an unknown one or a wrong arity is told first, as processCommand."""
    name = cmd.name
    error = (
        f"ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT "
        "/ RESET are allowed in this context"
    )

    def refuse(s: Session, argv: list[bytes]) -> bytes:
        if name == "exec":  # rejectCommand ends a transaction with EXECABORT
            return exec_abort(s, ReplyError(error).reply)
        raise ReplyError(error)

    subs = cmd.subcommands and {k: _refuse(sub) for k, sub in cmd.subcommands.items()}
    return replace(cmd, fn=refuse, subcommands=subs)


def _subscribed_ping(s: Session, argv: list[bytes]) -> bytes:
    if len(argv) > 2:
        raise ReplyError("ERR wrong number of arguments for 'ping' command")
    return b"*2\r\n$4\r\npong\r\n" + bulk(argv[1] if len(argv) == 2 else b"")


_RESTRICTED: dict[bytes, Command] = {}


def restricted() -> dict[bytes, Command]:
    """The table of a RESP2 connection with subscriptions (built once, when first needed:
    every command has registered by then)."""
    if not _RESTRICTED:
        for name, cmd in TABLE.items():
            _RESTRICTED[name] = cmd if name in ALLOWED else _refuse(cmd)
        _RESTRICTED[b"ping"] = Command("ping", _subscribed_ping, -1)
    return _RESTRICTED


def _count(s: Session) -> int:
    return len(s.channels) + len(s.patterns)


def _confirm(s: Session, kind: bytes, name: bytes | None) -> bytes:
    return s.enc.push([bulk(kind), s.enc.bulk(name), integer(_count(s))])


def mode(s: Session) -> None:
    """Enter or leave RESP2's subscribed mode as the count says."""
    s.table = restricted() if _count(s) and s.enc.version == 2 else TABLE


def _subscribe(s: Session, argv: list[bytes], mine: set[bytes], where: dict, kind: bytes) -> bytes:
    out = []
    for name in argv[1:]:
        mine.add(name)
        where.setdefault(name, set()).add(s)
        out.append(_confirm(s, kind, name))
    mode(s)
    return b"".join(out)


def _unsubscribe(
    s: Session, argv: list[bytes], mine: set[bytes], where: dict, kind: bytes
) -> bytes:
    names = argv[1:] or sorted(mine)
    if not names:
        return _confirm(s, kind, None)
    out = []
    for name in names:
        mine.discard(name)
        subs = where.get(name)
        if subs is not None:
            subs.discard(s)
            if not subs:
                del where[name]
        out.append(_confirm(s, kind, name))
    mode(s)
    return b"".join(out)


@command("subscribe", -2)
def subscribe(s: Session, argv: list[bytes]) -> bytes:
    return _subscribe(s, argv, s.channels, s.fe.channels, b"subscribe")


@command("psubscribe", -2)
def psubscribe(s: Session, argv: list[bytes]) -> bytes:
    return _subscribe(s, argv, s.patterns, s.fe.patterns, b"psubscribe")


@command("unsubscribe", -1)
def unsubscribe(s: Session, argv: list[bytes]) -> bytes:
    return _unsubscribe(s, argv, s.channels, s.fe.channels, b"unsubscribe")


@command("punsubscribe", -1)
def punsubscribe(s: Session, argv: list[bytes]) -> bytes:
    return _unsubscribe(s, argv, s.patterns, s.fe.patterns, b"punsubscribe")


def forget(s: Session) -> None:
    """The connection closed: it leaves every channel and pattern."""
    for mine, where in ((s.channels, s.fe.channels), (s.patterns, s.fe.patterns)):
        for name in mine:
            subs = where.get(name)
            if subs is not None:
                subs.discard(s)
                if not subs:
                    del where[name]
        mine.clear()


def _alive(s: Session) -> bool:
    """Still connected: a PUBLISH may close a subscriber past its output limit (reactor.py),
    which then leaves its channels, but the PUBLISH goes on over copies of them."""
    return s.id in s.fe.connections


@command("publish", 3)
def publish(s: Session, argv: list[bytes]) -> bytes:
    channel, message = argv[1], argv[2]
    receivers = 0
    for sub in list(s.fe.channels.get(channel, ())):
        if _alive(sub):
            sub.fe.deliver(sub.id, sub.enc.push([bulk(b"message"), bulk(channel), bulk(message)]))
            receivers += 1
    for pattern, subs in list(s.fe.patterns.items()):
        if glob.match(pattern, channel):
            for sub in list(subs):
                if _alive(sub):
                    frame = [bulk(b"pmessage"), bulk(pattern), bulk(channel), bulk(message)]
                    sub.fe.deliver(sub.id, sub.enc.push(frame))
                    receivers += 1
    return integer(receivers)


def _channels(s: Session, argv: list[bytes]) -> bytes:
    matches = glob.matcher(argv[2]) if len(argv) > 2 else None
    names = [c for c in s.fe.channels if matches is None or matches(c)]
    return array(names)


def _numsub(s: Session, argv: list[bytes]) -> bytes:
    return b"*%d\r\n" % (2 * (len(argv) - 2)) + b"".join(
        bulk(c) + integer(len(s.fe.channels.get(c, ()))) for c in argv[2:]
    )


def _numpat(s: Session, argv: list[bytes]) -> bytes:
    return integer(len(s.fe.patterns))


container(
    "pubsub",
    {
        "channels": (_channels, -2),
        "numsub": (_numsub, -2),
        "numpat": (_numpat, 2),
    },
)
