"""Stream consumer groups as Redis 7.0 answers them (t_stream.c): XGROUP CREATE (MKSTREAM,
ENTRIESREAD) / SETID / DESTROY / CREATECONSUMER / DELCONSUMER, XACK, XPENDING (the summary,
and the extended form with IDLE and a consumer). Their changes are the keyspace's
(group_values.py: one record each, kept across a restart); XCLAIM and XAUTOCLAIM are
stream_claims.py's, XINFO stream_info.py's, XREADGROUP stream_read.py's."""

from __future__ import annotations

from protocol.resp.codec import OK, ONE, ZERO, bulk, integer

from ..keyspace import Keyspace
from ..stream import INVALID_READ, Group, Stream, StreamID, format_id
from ..values import now_ms
from .registry import SYNTAX, ReplyError, Session, command, container, integer_arg
from .streams import bound, parse_id

NO_KEY = (
    "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want "
    "to use the MKSTREAM option to create an empty stream automatically."
)
ENTRIESREAD = "ERR value for ENTRIESREAD must be positive or -1"


def _nogroup(key: bytes, name: bytes, where: bytes = b"") -> ReplyError:
    return ReplyError(
        b"NOGROUP No such key '" + key + b"' or consumer group '" + name + b"'" + where
    )


def _group_of(ks: Keyspace, key: bytes, name: bytes) -> tuple[Stream, Group]:
    """XACK/XPENDING/XCLAIM's lookup: WRONGTYPE, or -NOGROUP for a missing key or group."""
    st = ks.get_stream(key)
    group = st.groups.get(name) if st is not None else None
    if st is None or group is None:
        raise _nogroup(key, name)
    return st, group


# -- XGROUP ---------------------------------------------------------------------------------


def _xgroup_target(
    s: Session, argv: list[bytes], mkstream: bool
) -> tuple[Stream | None, Group | None]:
    """xgroupCommand's checks before a subcommand runs: the key's type, then (without
    MKSTREAM) that it exists, and for all but CREATE and DESTROY that the group does."""
    st = s.ks.get_stream(argv[2])
    if st is None and mkstream:
        return None, None
    if st is None:
        raise ReplyError(NO_KEY)
    group = st.groups.get(argv[3])
    if group is None and argv[1].lower() in (b"setid", b"createconsumer", b"delconsumer"):
        raise ReplyError(
            b"NOGROUP No such consumer group '" + argv[3] + b"' for key name '" + argv[2] + b"'"
        )
    return st, group


def _entries_read(raw: bytes) -> int:
    read = integer_arg(raw)
    if read < 0 and read != INVALID_READ:
        raise ReplyError(ENTRIESREAD)
    return read


def _subcommand_syntax(argv: list[bytes]) -> ReplyError:
    sub = argv[1].decode("utf-8", "surrogateescape")
    return ReplyError(
        f"ERR unknown subcommand or wrong number of arguments for '{sub}'. Try XGROUP HELP."
    )


def _xgroup_create(s: Session, argv: list[bytes]) -> bytes:
    mkstream, read, j = False, INVALID_READ, 5
    while j < len(argv):
        opt = argv[j].lower()
        if opt == b"mkstream":
            mkstream, j = True, j + 1
        elif opt == b"entriesread" and j + 1 < len(argv):
            read, j = _entries_read(argv[j + 1]), j + 2
        else:
            raise _subcommand_syntax(argv)
    st, group = _xgroup_target(s, argv, mkstream)
    if len(argv) > 8:
        raise _subcommand_syntax(argv)
    top = st.last if st is not None else (0, 0)  # (`$` of a stream MKSTREAM makes: 0-0)
    last = top if argv[4] == b"$" else parse_id(argv[4], 0)
    if group is not None:
        raise ReplyError("BUSYGROUP Consumer Group name already exists")
    s.ks.xgroup_create(argv[2], argv[3], last, read)
    return OK


def _xgroup_setid(s: Session, argv: list[bytes]) -> bytes:
    st, _ = _xgroup_target(s, argv, False)
    assert st is not None
    if len(argv) not in (5, 7):
        raise _subcommand_syntax(argv)
    last = st.last if argv[4] == b"$" else bound(argv[4], True)
    read = INVALID_READ
    if len(argv) == 7:
        if argv[5].lower() != b"entriesread":
            raise ReplyError(SYNTAX)
        read = _entries_read(argv[6])
    s.ks.xgroup_setid(argv[2], argv[3], last, read)
    return OK


def _xgroup_destroy(s: Session, argv: list[bytes]) -> bytes:
    _, group = _xgroup_target(s, argv, False)
    if group is None:
        return ZERO
    s.ks.xgroup_destroy(argv[2], argv[3])
    return ONE


def _xgroup_createconsumer(s: Session, argv: list[bytes]) -> bytes:
    _, group = _xgroup_target(s, argv, False)
    assert group is not None
    if argv[4] in group.consumers:
        return ZERO
    s.ks.xconsumer(argv[2], argv[3], argv[4], now_ms())
    return ONE


def _xgroup_delconsumer(s: Session, argv: list[bytes]) -> bytes:
    _xgroup_target(s, argv, False)
    return integer(s.ks.xdelconsumer(argv[2], argv[3], argv[4]))


XGROUP_HELP = [
    "XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
    "HELP",
    "    Prints this help.",
]


def _help(lines: list[str]) -> bytes:
    return b"*%d\r\n" % len(lines) + b"".join(b"+%s\r\n" % x.encode() for x in lines)


container(
    "xgroup",
    {
        "create": (_xgroup_create, -5),
        "setid": (_xgroup_setid, -5),
        "destroy": (_xgroup_destroy, 4),
        "createconsumer": (_xgroup_createconsumer, 5),
        "delconsumer": (_xgroup_delconsumer, 5),
        "help": (lambda s, argv: _help(XGROUP_HELP), 2),
    },
)


# -- XACK, XPENDING -------------------------------------------------------------------------


@command("xack", -4)
def xack(s: Session, argv: list[bytes]) -> bytes:
    st = s.ks.get_stream(argv[1])
    if st is None or argv[2] not in st.groups:  # (before the IDs are read, as Redis)
        return ZERO
    sids = [parse_id(raw, 0) for raw in argv[3:]]  # all read before anything is acked
    return integer(s.ks.xack(argv[1], argv[2], sids))


def _pending_range(argv: list[bytes]) -> tuple[int, StreamID, StreamID, int, bytes | None]:
    """XPENDING's [IDLE min] start end count [consumer], read before the key as Redis."""
    j, idle = 3, 0
    if argv[3].lower() == b"idle":
        idle = integer_arg(argv[4])
        if len(argv) < 8:
            raise ReplyError(SYNTAX)
        j = 5
    count = max(0, integer_arg(argv[j + 2]))
    start, end = bound(argv[j], True), bound(argv[j + 1], False)
    return idle, start, end, count, argv[j + 3] if j + 3 < len(argv) else None


@command("xpending", -3)
def xpending(s: Session, argv: list[bytes]) -> bytes:
    n = len(argv)
    if n != 3 and not 6 <= n <= 9:
        raise ReplyError(SYNTAX)
    ranged = _pending_range(argv) if n >= 6 else None
    group = _group_of(s.ks, argv[1], argv[2])[1]
    if ranged is None:
        return _summary(s, group)
    idle, start, end, count, name = ranged
    if name is not None and name not in group.consumers:
        return b"*0\r\n"
    ids = group.consumers[name].pel if name is not None else group.pel
    now, out = now_ms(), []
    for sid in sorted(sid for sid in ids if start <= sid <= end):
        if len(out) == count:
            break
        nack = group.pel[sid]
        if idle and now - nack.time < idle:
            continue
        out.append(
            b"*4\r\n" + bulk(format_id(sid)) + bulk(nack.consumer.name)
            + integer(max(0, now - nack.time)) + integer(nack.count)
        )  # fmt: skip
    return b"*%d\r\n" % len(out) + b"".join(out)


def _summary(s: Session, group: Group) -> bytes:
    if not group.pel:
        return b"*4\r\n:0\r\n" + s.enc.null + s.enc.null + s.enc.null_array
    ids = sorted(group.pel)
    held = sorted((c.name, len(c.pel)) for c in group.consumers.values() if c.pel)
    return (
        b"*4\r\n" + integer(len(ids)) + bulk(format_id(ids[0])) + bulk(format_id(ids[-1]))
        + b"*%d\r\n" % len(held)
        + b"".join(b"*2\r\n" + bulk(name) + bulk(b"%d" % n) for name, n in held)
    )  # fmt: skip
