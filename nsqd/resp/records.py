"""The keyspace's log records, both ways: `apply` redoes one (a table from the record's name to
the keyspace change it stands for; a record about a key that no longer has that type is a
no-op, as the change it followed already removed it), `snapshot` yields the records that
rebuild a keyspace as it is (the log's compaction)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from . import stream_nodes
from .stream import Stream, format_id
from .zset import ZSet

if TYPE_CHECKING:
    from .keyspace import Keyspace, Record
    from .values import Value

Args = tuple[bytes, ...]

# LMOVE's record (`MOVELR src dst`: from the left, to the right), one for the pop and the push,
# by (wherefrom, whereto), True for LEFT (RPOPLPUSH is MOVERL)
MOVES = {
    (True, True): b"MOVELL",
    (True, False): b"MOVELR",
    (False, True): b"MOVERL",
    (False, False): b"MOVERR",
}


def _if(kind: type, redo: Callable[[Keyspace, Args], object]) -> Callable[[Keyspace, Args], None]:
    def apply(ks: Keyspace, args: Args) -> None:
        if isinstance(ks.data.get(args[0]), kind):
            redo(ks, args)

    return apply


def _zadd(ks: Keyspace, args: Args) -> None:
    ks.zadd(args[0], [(float(args[i]), args[i + 1]) for i in range(1, len(args), 2)])


def _sid(raw: bytes) -> tuple[int, int]:
    ms, _, seq = raw.partition(b"-")
    return int(ms), int(seq)


def _group(redo: Callable[..., object]) -> Callable[[Keyspace, Args], None]:
    """A group record's redo, a no-op where the key holds no stream with that group any more
    (a DEL or a DESTROY after it; an XGCREATE makes its own)."""

    def apply(ks: Keyspace, args: Args) -> None:
        st = ks.data.get(args[0])
        if isinstance(st, Stream) and args[1] in st.groups:
            redo(ks, *args)

    return apply


def _xgcreate(ks: Keyspace, args: Args) -> None:
    if isinstance(ks.data.get(args[0], Stream()), Stream):
        ks.xgroup_create(args[0], args[1], _sid(args[2]), int(args[3]))


def _xnack(ks: Keyspace, key: bytes, group: bytes, consumer: bytes, *rest: bytes) -> None:
    seen, time, items = int(rest[0]), int(rest[1]), rest[2:]
    given = [(_sid(items[i]), int(items[i + 1])) for i in range(0, len(items), 2)]
    ks.xnack(key, group, consumer, seen, time, given)


def _xmeta(ks: Keyspace, args: Args) -> None:
    if isinstance(ks.data.get(args[0], Stream()), Stream):
        ks.xmeta(args[0], _sid(args[1]), int(args[2]), _sid(args[3]))


def _expireat(ks: Keyspace, args: Args) -> None:
    if args[0] in ks.data:
        ks.set_expire(args[0], int(args[1]))


def _move(wherefrom: bool, whereto: bool) -> Callable[[Keyspace, Args], None]:
    def apply(ks: Keyspace, args: Args) -> None:
        src, dst = args
        lst = ks.data.get(src)
        if isinstance(lst, deque) and lst and isinstance(ks.data.get(dst, lst), deque):
            ks.move(src, dst, wherefrom, whereto)

    return apply


def _smove(ks: Keyspace, args: Args) -> None:
    src, dst, member = args
    source = ks.data.get(src)
    if isinstance(source, set) and member in source and isinstance(ks.data.get(dst, source), set):
        ks.smove(src, dst, member)


def _rename(ks: Keyspace, args: Args) -> None:
    if args[0] in ks.data:
        ks.rename(args[0], args[1])


REDO: dict[bytes, Callable[[Keyspace, Args], object]] = {
    b"LPUSH": lambda ks, a: ks.push(a[0], list(a[1:]), True),
    b"RPUSH": lambda ks, a: ks.push(a[0], list(a[1:]), False),
    b"LPOP": _if(deque, lambda ks, a: ks.pop(a[0], int(a[1]), True)),
    b"RPOP": _if(deque, lambda ks, a: ks.pop(a[0], int(a[1]), False)),
    b"LREM": _if(deque, lambda ks, a: ks.lrem(a[0], int(a[1]), a[2])),
    b"LTRIM": _if(deque, lambda ks, a: ks.ltrim(a[0], int(a[1]), int(a[2]))),
    b"LINSERT": lambda ks, a: ks.linsert(a[0], int(a[1]), a[2]),
    b"LSET": lambda ks, a: ks.lset(a[0], int(a[1]), a[2]),
    **{op: _move(*sides) for sides, op in MOVES.items()},  # (older logs: a pop, then a push)
    b"SET": lambda ks, a: ks.set_string(a[0], a[1], None, False),
    b"SETPX": lambda ks, a: ks.set_string(a[0], a[1], int(a[2]), False),  # (older: + PEXPIREAT)
    b"SETK": lambda ks, a: ks.set_string(a[0], a[1], None, True),
    b"MSET": lambda ks, a: ks.mset(list(a)),  # (older logs: a SET per key)
    b"HSET": lambda ks, a: ks.hset(a[0], list(a[1:])),
    b"HDEL": _if(dict, lambda ks, a: ks.hdel(a[0], list(a[1:]))),
    b"SADD": lambda ks, a: ks.sadd(a[0], list(a[1:])),
    b"SREM": _if(set, lambda ks, a: ks.srem(a[0], list(a[1:]))),
    b"SMOVE": _smove,  # (older logs: SREM, then SADD)
    b"ZADD": _zadd,
    b"ZREM": _if(ZSet, lambda ks, a: ks.zrem(a[0], list(a[1:]))),
    b"XADD": lambda ks, a: ks.xadd(a[0], _sid(a[1]), list(a[2:]), None),
    b"XTRIM": _if(Stream, lambda ks, a: ks.trim_stream(a[0], (b"maxlen", int(a[1]), False, 0))),
    b"XTRIMID": _if(Stream, lambda ks, a: ks.trim_stream(a[0], (b"minid", _sid(a[1]), False, 0))),
    b"XDEL": _if(Stream, lambda ks, a: ks.xdel(a[0], [_sid(x) for x in a[1:]])),
    b"XGCREATE": _xgcreate,
    b"XGSETID": _group(lambda ks, k, g, sid, n: ks.xgroup_setid(k, g, _sid(sid), int(n))),
    b"XGDESTROY": _group(lambda ks, k, g: ks.xgroup_destroy(k, g)),
    b"XCONSUMER": _group(lambda ks, k, g, c, now: ks.xconsumer(k, g, c, int(now))),
    b"XDELCONSUMER": _group(lambda ks, k, g, c: ks.xdelconsumer(k, g, c)),
    b"XNACK": _group(_xnack),
    b"XACK": _group(lambda ks, k, g, *sids: ks.xack(k, g, [_sid(x) for x in sids])),
    b"XMETA": _xmeta,
    b"XNODES": _if(Stream, lambda ks, a: ks.xnodes(a[0], list(a[1:]))),
    b"RENAME": _rename,
    b"DEL": lambda ks, a: ks.delete(a),  # nothing expires or is logged while loading
    b"PEXPIREAT": _expireat,
    b"PERSIST": lambda ks, a: ks.expires.pop(a[0], None),
    b"FLUSHALL": lambda ks, a: ks.flush(),
}


def apply(ks: Keyspace, rec: Record) -> None:
    """Redo one logged change (storage/resp_log.py's replay; ks.loading is set)."""
    redo = REDO.get(rec[0])
    if redo is None:
        raise ValueError(f"unknown record {rec[0]!r}")
    redo(ks, rec[1:])


def _chunks(op: bytes, key: bytes, items: list[bytes], size: int) -> Iterable[Record]:
    for i in range(0, len(items), size):
        yield (op, key, *items[i : i + size])


def snapshot(ks: Keyspace, chunk: int = 512) -> Iterable[Record]:
    """Each key's records, then its expiry: a string with one is one SETPX (the record the
    live SET ... EX writes), any other value its records and a PEXPIREAT (the file is renamed
    over the log whole: a key is never read back without its expiry)."""
    expires = ks.expires
    for key, value in ks.data.items():
        yield from key_records(key, value, expires.get(key), chunk)


def key_records(key: bytes, value: Value, when: int | None, chunk: int = 512) -> Iterable[Record]:
    """The records that rebuild one key with its expiry (`when`, unix ms, or None): the
    snapshot's, and what COPY applies to its destination (commands/keys.py)."""
    if isinstance(value, bytes):
        yield (b"SET", key, value) if when is None else (b"SETPX", key, value, b"%d" % when)
        return
    yield from _value(key, value, chunk)
    if when is not None:
        yield (b"PEXPIREAT", key, b"%d" % when)


def _value(key: bytes, value: Value, chunk: int) -> Iterable[Record]:
    """The records that rebuild one list, set, stream, sorted set or hash."""
    if isinstance(value, deque):
        yield from _chunks(b"RPUSH", key, list(value), chunk)
    elif isinstance(value, set):
        yield from _chunks(b"SADD", key, list(value), chunk)
    elif isinstance(value, Stream):
        yield from _stream(key, value)
    elif isinstance(value, ZSet):
        items = [x for score, m in value.order for x in (repr(score).encode(), m)]
        yield from _chunks(b"ZADD", key, items, 2 * chunk)
    else:
        yield from _chunks(b"HSET", key, [x for kv in value.items() for x in kv], 2 * chunk)


def _stream(key: bytes, st: Stream) -> Iterable[Record]:
    """A stream's entries, its last ID and counters (XMETA: an empty one comes back too, and
    the replayed stream refuses what the original refused), its node layout (XNODES: where
    deleted entries left room, stream_nodes.py), then each group: its last ID,
    its pending entries by consumer and delivery time and count, its consumers."""
    for sid, fields in zip(st.ids, st.entries, strict=True):
        yield (b"XADD", key, format_id(sid), *fields)
    yield (b"XMETA", key, format_id(st.last), b"%d" % st.added, format_id(st.max_deleted))
    yield (b"XNODES", key, *stream_nodes.encode(st.nodes))
    for name, group in st.groups.items():
        yield (b"XGCREATE", key, name, format_id(group.last), b"%d" % group.read)
        held: dict[tuple[bytes, int], list[bytes]] = {}
        for sid, nack in sorted(group.pel.items()):
            held.setdefault((nack.consumer.name, nack.time), []).extend(
                (format_id(sid), b"%d" % nack.count)
            )
        for (consumer, time), items in held.items():
            yield (b"XNACK", key, name, consumer, b"%d" % time, b"%d" % time, *items)
        for c in group.consumers.values():  # (after: an XNACK sets its consumer's seen)
            yield (b"XCONSUMER", key, name, c.name, b"%d" % c.seen)
