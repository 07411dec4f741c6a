"""Redis 7.0's macro-node layout of a stream, which its replies show: XTRIM and XADD with `~`
remove whole nodes only (so how many entries go depends on where the nodes end), and XINFO
STREAM counts the nodes (radix-tree-keys) and the radix tree's nodes over their keys
(radix-tree-nodes). Redis keeps a stream's entries in listpacks of at most 100 entries,
deleted ones included (stream-node-max-entries), that start a new one before an entry would
take them to 4096 bytes (stream-node-max-bytes), each keyed in a radix tree by its first
entry's ID (the master entry, whose field names later entries may share). A node here holds
no entries (they are the stream's flat lists, stream.py): it mirrors one listpack's byte size,
its live and deleted entry counts, its master ID and field names and its last entry's ID,
computed as t_stream.c and listpack.c write them. XDEL and an exact trim only mark entries
deleted (the bytes stay); a node goes when its last live entry is deleted, or whole by a trim.

The layout follows from the commands, so replaying the log rebuilds it; what rebuilds a stream
from its live entries (the log's rewrite, COPY) would pack them afresh, so it writes the
layout too (an XNODES record: `encode`, `decode`), as Redis's RDB and COPY keep it."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable

from protocol.resp.codec import string2ll

StreamID = tuple[int, int]

MAX_ENTRIES = 100  # stream-node-max-entries
MAX_BYTES = 4096  # stream-node-max-bytes
APPROX_LIMIT = 100 * MAX_ENTRIES  # a `~` trim's work when no LIMIT is given
_EMPTY_LISTPACK = 7  # its header (total bytes, element count) and end byte
_SAME_FIELDS = 2  # STREAM_ITEM_FLAG_SAMEFIELDS
_WRAP = 2**64


class Node:
    __slots__ = ("bytes", "deleted", "fields", "last", "live", "master")

    def __init__(self, master: StreamID, fields: list[bytes]) -> None:
        self.master = master
        self.fields = fields  # the master entry's field names
        self.live = 0
        self.deleted = 0
        self.last = master  # its last entry's ID, deleted or not
        self.bytes = (
            _EMPTY_LISTPACK + 3 * _INT_1 + _int_size(len(fields)) + sum(map(_str_size, fields))
        )  # count, deleted, the number of fields, the names and the master's 0 terminator


def encode(nodes: list[Node]) -> list[bytes]:
    """The layout as an XNODES record's arguments: per node its master ID, last ID, live and
    deleted counts, bytes, and master field names (their count first)."""
    out: list[bytes] = []
    for n in nodes:
        out += [b"%d-%d" % n.master, b"%d-%d" % n.last, b"%d" % n.live, b"%d" % n.deleted]
        out += [b"%d" % n.bytes, b"%d" % len(n.fields), *n.fields]
    return out


def decode(args: tuple[bytes, ...] | list[bytes]) -> list[Node]:
    """`encode`'s inverse."""
    nodes, i = [], 0
    while i < len(args):
        master, last = (_sid(x) for x in args[i : i + 2])
        count = int(args[i + 5])
        node = Node(master, list(args[i + 6 : i + 6 + count]))
        node.last, node.live, node.deleted, node.bytes = (
            last, int(args[i + 2]), int(args[i + 3]), int(args[i + 4])
        )  # fmt: skip
        nodes.append(node)
        i += 6 + count
    return nodes


def _sid(raw: bytes) -> StreamID:
    ms, _, seq = raw.partition(b"-")
    return int(ms), int(seq)


def _backlen(n: int) -> int:
    """lpEncodeBacklen: the bytes that give an element's size backwards."""
    return 1 if n <= 127 else 2 if n < 16383 else 3 if n < 2097151 else 4 if n < 268435455 else 5


def _int_size(v: int) -> int:
    """A listpack integer element's bytes (lpEncodeIntegerGetType and its backlen)."""
    if 0 <= v <= 127:
        return 2
    if -4096 <= v <= 4095:
        return 3
    if -32768 <= v <= 32767:
        return 4
    if -8388608 <= v <= 8388607:
        return 5
    return 6 if -(2**31) <= v < 2**31 else 10


_INT_1 = _int_size(0)


def _str_size(s: bytes) -> int:
    """A listpack element's bytes for a string (lpEncodeGetType: one that reads as a 64-bit
    integer is stored as one)."""
    n = len(s)
    if n and n <= 20 and (48 <= s[0] <= 57 or s[0] == 45):
        if n < 19 and s.isdigit() and (s[0] != 48 or n == 1):  # (the usual: no sign, short)
            return _int_size(int(s))
        v = string2ll(s)
        if v is not None:
            return _int_size(v)
    if n < 63:
        return n + 2
    enc = n + 1 if n < 64 else n + 2 if n < 4096 else n + 5
    return enc + _backlen(enc)


def _signed(v: int) -> int:
    """A uint64 difference as the long long lpAppendInteger is given."""
    v %= _WRAP
    return v - _WRAP if v >= 2**63 else v


def place(nodes: list[Node], sid: StreamID, fields: list[bytes]) -> None:
    """streamAppendItem: the entry goes into the last node, or opens a new one when that one
    has MAX_ENTRIES entries or its bytes and the entry's raw ones reach MAX_BYTES. (Written
    for XADD's path: ~1 us an entry.)"""
    names = fields[0::2]
    tail = nodes[-1] if nodes else None
    if (
        tail is None
        or tail.bytes + sum(map(len, fields)) >= MAX_BYTES
        or tail.live + tail.deleted >= MAX_ENTRIES
    ):
        tail = Node(sid, names)
        nodes.append(tail)
    n = len(names)
    ms = sid[0] - tail.master[0]  # (never below 0: IDs only grow)
    seq = sid[1] - tail.master[1]
    size = (
        (4 if ms <= 127 else 2 + _int_size(_signed(ms)))  # the flags and the ms delta
        + (2 if 0 <= seq <= 127 else _int_size(_signed(seq)))
        + sum(map(_str_size, fields[1::2]))
    )
    if names == tail.fields:
        size += 2 if n < 125 else _int_size(n + 3)  # lp-count: the entry's elements
    else:
        size += _int_size(2 * n + 4) + _int_size(n) + sum(map(_str_size, names))
    tail.bytes += size
    tail.live += 1
    tail.last = sid


def remove(nodes: list[Node], sid: StreamID) -> None:
    """XDEL of a live entry: marked deleted, its node gone with its last live entry."""
    i = bisect_right(nodes, sid, key=_master) - 1
    node = nodes[i]
    if node.live == 1:
        del nodes[i]
    else:
        node.live -= 1
        node.deleted += 1


def _master(node: Node) -> StreamID:
    return node.master


def trim_length(
    nodes: list[Node], length: int, maxlen: int, approx: bool, limit: int
) -> int:  # fmt: skip
    """streamTrim by MAXLEN of a stream of `length` live entries: whole nodes from the head
    while the rest keeps `maxlen`; exact, then the first entries of the next node marked
    deleted; `~`, nothing more, and (`limit` > 0) no node that takes the count past it. How
    many entries went: the stream's first ones."""
    return _trim(
        nodes,
        approx,
        limit,
        whole=lambda node, gone: length - gone - node.live >= maxlen,
        marked=lambda gone: length - gone - maxlen,
        kept=lambda gone: length - gone <= maxlen,
    )


def trim_below(
    nodes: list[Node], ids: list[StreamID], minid: StreamID, approx: bool, limit: int
) -> int:  # fmt: skip
    """streamTrim by MINID: whole nodes whose last entry (deleted or not) is below `minid`;
    exact, then the live entries below it in the next node marked deleted. How many entries
    went (the first ones of `ids`, the stream's live IDs)."""
    return _trim(
        nodes,
        approx,
        limit,
        whole=lambda node, gone: node.last < minid,
        marked=lambda gone: bisect_left(ids, minid, lo=gone) - gone,
    )


def _trim(
    nodes: list[Node],
    approx: bool,
    limit: int,
    whole: Callable[[Node, int], bool],
    marked: Callable[[int], int],
    kept: Callable[[int], bool] = lambda gone: False,
) -> int:
    """streamTrim's walk from the head, `gone` entries gone so far: a node goes whole while
    `whole` says so (and, with `limit`, while the count stays within it); then, exact, the
    `marked` first live entries of the next are marked deleted. It stops once `kept`."""
    gone = i = 0
    while i < len(nodes) and not kept(gone):
        node = nodes[i]
        if limit and gone + node.live > limit:
            break
        if whole(node, gone):
            gone += node.live
            i += 1
            continue
        if not approx:
            n = marked(gone)
            node.live -= n
            node.deleted += n
            gone += n
        break
    del nodes[:i]
    return gone


def tree_nodes(nodes: list[Node]) -> int:
    """rax's node count over the nodes' keys (each master ID as 16 big-endian bytes): the head,
    a compressed node per run without a branch, a node per branch, a leaf per key."""
    keys = [m.to_bytes(8, "big") + s.to_bytes(8, "big") for m, s in map(_master, nodes)]
    return _count(keys, 0) if keys else 1


def _count(keys: list[bytes], depth: int) -> int:
    """The rax nodes under the node reached after `depth` bytes of `keys` (sorted, at least
    one, sharing those bytes)."""
    if len(keys) == 1:
        return 1 + (depth < 16)  # a compressed node of what is left, then the leaf
    common = depth
    first, last = keys[0], keys[-1]
    while first[common] == last[common]:
        common += 1
    total = 1 if common > depth else 0  # the shared run, compressed
    total += 1  # the branch
    start = 0
    for j in range(1, len(keys) + 1):
        if j == len(keys) or keys[j][common] != keys[start][common]:
            total += _count(keys[start:j], common + 1)
            start = j
    return total
