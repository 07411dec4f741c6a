"""XINFO GROUPS / CONSUMERS / STREAM [FULL [COUNT n]] / HELP as Redis 7.0 answers them
(t_stream.c's xinfoCommand): the key is looked up before a subcommand's options are read;
FULL gives the stream's entries and every group with its pending entries (their delivery
times as unix ms) and consumers (their seen-time), at most COUNT of each list (10 when not
given or negative, all for 0). A field/value reply is an array under RESP2, a map under RESP3.
radix-tree-keys and radix-tree-nodes count Redis's macro nodes and its radix tree's nodes as
they would be (stream_nodes.py)."""

from __future__ import annotations

from protocol.resp.codec import bulk, integer
from protocol.resp.replies import Resp2

from ..stream import Group, Stream, format_id, lag
from ..stream_nodes import tree_nodes
from ..values import now_ms
from .registry import ReplyError, Session, container, integer_arg
from .stream_groups import _help
from .streams import entries


def _fields(enc: Resp2, pairs: list[tuple[bytes, bytes]]) -> bytes:
    """A field/value reply: an array under RESP2, a map under RESP3."""
    flat = [x for name, value in pairs for x in (bulk(name), value)]
    return enc.map(flat) if enc.version == 3 else b"*%d\r\n" % len(flat) + b"".join(flat)


def _stream_of(s: Session, key: bytes) -> Stream:
    st = s.ks.get_stream(key)
    if st is None:
        raise ReplyError("ERR no such key")
    return st


def _xinfo_groups(s: Session, argv: list[bytes]) -> bytes:
    st = _stream_of(s, argv[2])
    enc, out = s.enc, []
    for name, group in sorted(st.groups.items()):
        out.append(_fields(enc, [
            (b"name", bulk(name)),
            (b"consumers", integer(len(group.consumers))),
            (b"pending", integer(len(group.pel))),
            (b"last-delivered-id", bulk(format_id(group.last))),
            (b"entries-read", _read(enc, group)),
            (b"lag", _lag(enc, st, group)),
        ]))  # fmt: skip
    return b"*%d\r\n" % len(out) + b"".join(out)


def _read(enc: Resp2, group: Group) -> bytes:
    return enc.null if group.read < 0 else integer(group.read)


def _lag(enc: Resp2, st: Stream, group: Group) -> bytes:
    behind = lag(st, group)
    return enc.null if behind is None else integer(behind)


def _xinfo_consumers(s: Session, argv: list[bytes]) -> bytes:
    st = _stream_of(s, argv[2])
    group = st.groups.get(argv[3])
    if group is None:
        raise ReplyError(
            b"NOGROUP No such consumer group '" + argv[3] + b"' for key name '" + argv[2] + b"'"
        )
    now, out = now_ms(), []
    for name, c in sorted(group.consumers.items()):
        out.append(_fields(s.enc, [
            (b"name", bulk(name)), (b"pending", integer(len(c.pel))),
            (b"idle", integer(max(0, now - c.seen))),
        ]))  # fmt: skip
    return b"*%d\r\n" % len(out) + b"".join(out)


def _full_count(argv: list[bytes]) -> int | None:
    """STREAM's options: None without FULL, else FULL's COUNT (0: no limit)."""
    options = argv[3:]
    if not options:
        return None
    if (
        len(options) not in (1, 3)
        or options[0].lower() != b"full"
        or (len(options) == 3 and options[1].lower() != b"count")
    ):
        sub = argv[1][:128].decode("utf-8", "surrogateescape")
        raise ReplyError(
            f"ERR unknown subcommand or wrong number of arguments for '{sub}'. Try XINFO HELP."
        )
    count = integer_arg(options[2]) if len(options) == 3 else 10
    return 10 if count < 0 else count


def _xinfo_stream(s: Session, argv: list[bytes]) -> bytes:
    st = _stream_of(s, argv[2])
    count = _full_count(argv)
    enc, n = s.enc, len(st.ids)
    head = [
        (b"length", integer(n)),
        (b"radix-tree-keys", integer(len(st.nodes))),
        (b"radix-tree-nodes", integer(tree_nodes(st.nodes))),
        (b"last-generated-id", bulk(format_id(st.last))),
        (b"max-deleted-entry-id", bulk(format_id(st.max_deleted))),
        (b"entries-added", integer(st.added)),
        (b"recorded-first-entry-id", bulk(format_id(st.ids[0] if n else (0, 0)))),
    ]
    if count is None:
        return _fields(enc, [
            *head,
            (b"groups", integer(len(st.groups))),
            (b"first-entry", entries(st, [0])[4:] if n else enc.null),
            (b"last-entry", entries(st, [n - 1])[4:] if n else enc.null),
        ])  # fmt: skip
    groups = [_full_group(enc, st, name, group, count) for name, group in sorted(st.groups.items())]
    return _fields(enc, [
        *head,
        (b"entries", entries(st, range(min(n, count) if count else n))),
        (b"groups", b"*%d\r\n" % len(groups) + b"".join(groups)),
    ])  # fmt: skip


def _full_group(enc: Resp2, st: Stream, name: bytes, group: Group, count: int) -> bytes:
    """One group of XINFO STREAM FULL: its counters, its first `count` pending entries (all
    for 0) and its consumers, each with its own first `count`."""
    pel = sorted(group.pel.items())
    pending = [
        b"*4\r\n" + bulk(format_id(sid)) + bulk(nack.consumer.name) + integer(nack.time)
        + integer(nack.count)
        for sid, nack in (pel[:count] if count else pel)
    ]  # fmt: skip
    consumers = []
    for cname, c in sorted(group.consumers.items()):
        held = sorted(c.pel)
        rows = [
            b"*3\r\n" + bulk(format_id(sid)) + integer(group.pel[sid].time)
            + integer(group.pel[sid].count)
            for sid in (held[:count] if count else held)
        ]  # fmt: skip
        consumers.append(_fields(enc, [
            (b"name", bulk(cname)),
            (b"seen-time", integer(c.seen)),
            (b"pel-count", integer(len(c.pel))),
            (b"pending", b"*%d\r\n" % len(rows) + b"".join(rows)),
        ]))  # fmt: skip
    return _fields(enc, [
        (b"name", bulk(name)),
        (b"last-delivered-id", bulk(format_id(group.last))),
        (b"entries-read", _read(enc, group)),
        (b"lag", _lag(enc, st, group)),
        (b"pel-count", integer(len(group.pel))),
        (b"pending", b"*%d\r\n" % len(pending) + b"".join(pending)),
        (b"consumers", b"*%d\r\n" % len(consumers) + b"".join(consumers)),
    ])  # fmt: skip


XINFO_HELP = [
    "XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
    "HELP",
    "    Prints this help.",
]

container(
    "xinfo",
    {
        "groups": (_xinfo_groups, 3),
        "consumers": (_xinfo_consumers, 4),
        "stream": (_xinfo_stream, -3),
        "help": (lambda s, argv: _help(XINFO_HELP), 2),
    },
)
