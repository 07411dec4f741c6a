"""The changes of a keyspace's typed values, each written to the log as one replayable record
(`_log`): lists (the push and pop a queue lives on, LMOVE as one record), strings, hashes,
sets, streams and sorted sets. A base of keyspace.Keyspace, which holds the keys, their expiry,
the lookups these changes use (`get_list`...) and the log's hook: the calls are the keyspace's
own methods, with no extra call level on a queue's hot path."""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Any, Union

from .records import MOVES
from .stream import Stream, StreamID, format_id
from .zset import ZSet

if TYPE_CHECKING:
    from collections.abc import Iterable

    from .keyspace import Keyspace
    from .scan_order import NoOrder, ScanOrder

Value = Union[deque, bytes, dict, set, ZSet, Stream]  # noqa: UP007 (a runtime alias used in isinstance-free code)
Record = tuple[bytes, ...]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class TypedValues:
    """What a keyspace does to its values; the state and lookups are Keyspace's."""

    data: dict[bytes, Value]
    expires: dict[bytes, int]
    order: NoOrder | ScanOrder
    watched: dict[bytes, object]
    ready: list[tuple[Keyspace, bytes]]
    loading: bool

    if TYPE_CHECKING:

        def _log(self, rec: Record) -> None: ...
        def _remove(self, key: bytes) -> None: ...
        def _expire_at(self, key: bytes, when: int) -> None: ...
        def delete(self, keys: Iterable[bytes]) -> int: ...
        def get_list(self, key: bytes) -> deque | None: ...
        def get_hash(self, key: bytes) -> dict | None: ...

    # -- lists ---------------------------------------------------------------------------

    def push(self, key: bytes, elems: list[bytes], left: bool, create: bool = True) -> int:
        """LPUSH/RPUSH (LPUSHX/RPUSHX with create=False): the new length, 0 if not created."""
        # the hot path of a queue: get_list's lookup written out (pop_one's too)
        lst = self.data.get(key)
        if lst is None or type(lst) is not deque or key in self.expires:
            lst = self.get_list(key)  # expiry, WRONGTYPE, a list subclass never seen
            if lst is None:
                if not create:
                    return 0
                lst = self.data[key] = deque()
                self.order.add(key)
        if left:
            lst.extendleft(elems)
        else:
            lst.extend(elems)
        self._log((b"LPUSH" if left else b"RPUSH", key, *elems))
        if key in self.watched:
            self.ready.append((self, key))
        return len(lst)

    def pop(self, key: bytes, count: int, left: bool) -> list[bytes]:
        """Up to `count` elements from one end of an existing list; the key goes with the
        last one."""
        lst = self.data[key]
        assert isinstance(lst, deque)
        take = lst.popleft if left else lst.pop
        out = [take() for _ in range(min(count, len(lst)))]
        if not lst:
            self._remove(key)
        self._log((b"LPOP" if left else b"RPOP", key, b"%d" % count))
        return out

    def pop_one(self, key: bytes, left: bool) -> bytes | None:
        """LPOP/RPOP without a count: one element from an end of the list, None when there
        is none (WRONGTYPE for another type); logged as `pop(key, 1, left)` is."""
        lst = self.data.get(key)
        if lst is None or type(lst) is not deque or key in self.expires:
            lst = self.get_list(key)  # expiry, WRONGTYPE
            if lst is None:
                return None
        elem = lst.popleft() if left else lst.pop()
        if not lst:
            self._remove(key)
        self._log((b"LPOP" if left else b"RPOP", key, b"1"))
        return elem

    def move(self, src: bytes, dst: bytes, wherefrom: bool, whereto: bool) -> bytes:
        """LMOVE of one element from an existing list to `dst` (a list or missing: the caller
        checked), logged as one record (MOVES), so that replay never has the pop without the
        push. `src` goes when emptied; onto itself the list is rotated and keeps its TTL."""
        lst = self.data[src]
        assert isinstance(lst, deque)
        elem = lst.popleft() if wherefrom else lst.pop()
        target = lst
        if src != dst:
            if not lst:
                self._remove(src)
            target = self.data.get(dst)  # type: ignore[assignment]
            if target is None:
                target = self.data[dst] = deque()
                self.order.add(dst)
        if whereto:
            target.appendleft(elem)
        else:
            target.append(elem)
        self._log((MOVES[wherefrom, whereto], src, dst))
        if dst in self.watched:
            self.ready.append((self, dst))
        return elem

    def lrem(self, key: bytes, count: int, elem: bytes) -> int:
        lst = self.data[key]
        assert isinstance(lst, deque)
        items = list(reversed(lst)) if count < 0 else list(lst)
        limit = abs(count) or len(items)
        kept, removed = [], 0
        for item in items:
            if removed < limit and item == elem:
                removed += 1
            else:
                kept.append(item)
        if removed:
            if count < 0:
                kept.reverse()
            lst.clear()
            lst.extend(kept)
            if not lst:
                self._remove(key)
            self._log((b"LREM", key, b"%d" % count, elem))
        return removed

    def ltrim(self, key: bytes, start: int, stop: int) -> None:
        """Keep [start, stop] (already resolved to 0 <= start, stop < len, or empty)."""
        lst = self.data[key]
        assert isinstance(lst, deque)
        n = len(lst)
        if start > stop or start >= n:
            self._remove(key)
        else:
            for _ in range(n - 1 - stop):
                lst.pop()
            for _ in range(start):
                lst.popleft()
        self._log((b"LTRIM", key, b"%d" % start, b"%d" % stop))

    def linsert(self, key: bytes, index: int, elem: bytes) -> None:
        lst = self.data[key]
        assert isinstance(lst, deque)
        lst.insert(index, elem)
        self._log((b"LINSERT", key, b"%d" % index, elem))

    def lset(self, key: bytes, index: int, elem: bytes) -> None:
        lst = self.data[key]
        assert isinstance(lst, deque)
        lst[index] = elem
        self._log((b"LSET", key, b"%d" % index, elem))

    # -- strings and hashes --------------------------------------------------------------

    def set_string(self, key: bytes, value: bytes, when: int | None, keep_ttl: bool) -> None:
        """SET: the value and its expiry (`when` unix ms), or none unless `keep_ttl`."""
        if key in self.watched:  # a stream it replaces answers its blocked consumers
            self.ready.append((self, key))  # type: ignore[arg-type]
        self.data[key] = value
        self.order.add(key)
        if keep_ttl:
            self._log((b"SETK", key, value))
            return
        if when is None:
            self.expires.pop(key, None)
            self._log((b"SET", key, value))
        elif when > now_ms() or self.loading:  # one record: replay never has the value alone
            self._expire_at(key, when)
            self._log((b"SETPX", key, value, b"%d" % when))
        else:  # already past: deleted now, as set_expire does (an old TTL due: no expiry)
            self.expires.pop(key, None)
            self.delete([key])

    def mset(self, pairs: list[bytes]) -> None:
        """MSET: each key's value, its expiry gone; one record (a replay never has a part)."""
        data, expires, order = self.data, self.expires, self.order
        for i in range(0, len(pairs), 2):
            if pairs[i] in self.watched:  # (as set_string)
                self.ready.append((self, pairs[i]))  # type: ignore[arg-type]
            data[pairs[i]] = pairs[i + 1]
            expires.pop(pairs[i], None)
            order.add(pairs[i])
        self._log((b"MSET", *pairs))

    def hset(self, key: bytes, pairs: list[bytes]) -> int:
        h = self.get_hash(key)
        if h is None:
            h = self.data[key] = {}
            self.order.add(key)
        added = 0
        for i in range(0, len(pairs), 2):
            if pairs[i] not in h:
                added += 1
            h[pairs[i]] = pairs[i + 1]
        self._log((b"HSET", key, *pairs))
        return added

    def hdel(self, key: bytes, fields: list[bytes]) -> int:
        h = self.data[key]
        assert isinstance(h, dict)
        removed = 0
        for f in fields:
            if h.pop(f, None) is not None:
                removed += 1
        if removed:
            if not h:
                self._remove(key)
            self._log((b"HDEL", key, *fields))
        return removed

    def sadd(self, key: bytes, members: list[bytes]) -> int:
        """Add members (the key is made when missing); how many were new."""
        s = self.data.get(key)
        if s is None:
            s = self.data[key] = set()
            self.order.add(key)
        assert isinstance(s, set)
        before = len(s)
        s.update(members)
        added = len(s) - before
        if added:
            self._log((b"SADD", key, *members))
        return added

    def smove(self, src: bytes, dst: bytes, member: bytes) -> None:
        """SMOVE of a member of set `src` to another key, a set or missing (the caller
        checked); one record, as Keyspace.move."""
        source = self.data[src]
        assert isinstance(source, set)
        source.discard(member)
        if not source:
            self._remove(src)
        target = self.data.get(dst)
        if target is None:
            target = self.data[dst] = set()
            self.order.add(dst)
        assert isinstance(target, set)
        target.add(member)
        self._log((b"SMOVE", src, dst, member))

    def srem(self, key: bytes, members: list[bytes]) -> int:
        s = self.data[key]
        assert isinstance(s, set)
        removed = [m for m in dict.fromkeys(members) if m in s]
        if removed:
            s.difference_update(removed)
            if not s:
                self._remove(key)
            self._log((b"SREM", key, *removed))
        return len(removed)

    def xadd(self, key: bytes, sid: StreamID, fields: list[bytes], trim: Any = None) -> None:
        """XADD, then its trim (streams.Trim, or None)."""
        st = self.data.get(key)
        if st is None:
            st = self.data[key] = Stream()
            self.order.add(key)
        assert isinstance(st, Stream)
        st.add(sid, fields)
        self._log((b"XADD", key, format_id(sid), *fields))
        if trim is not None:
            self.trim_stream(key, trim)
        if key in self.watched:  # XREAD BLOCK waits on it (blocking.py, stream_read.py)
            self.ready.append((self, key))

    def trim_stream(self, key: bytes, trim: Any) -> int:
        """XTRIM (and XADD's trim) of an existing stream by (kind, threshold, approx, limit):
        how many entries went. An exact MINID is logged as given (XTRIMID); a MAXLEN, and a
        `~` MINID, whose entries the nodes chose (stream_nodes.py), as the length left
        (XTRIM), as Redis propagates a `~` trim: replayed, it takes the same entries."""
        kind, threshold, approx, limit = trim
        st = self.data[key]
        assert isinstance(st, Stream)
        if kind == b"maxlen":
            gone = st.trim(threshold, approx, limit)
        else:
            gone = st.trim_before(threshold, approx, limit)
        if gone:
            exact_id = kind == b"minid" and not approx
            self._log(
                (b"XTRIMID", key, format_id(threshold))
                if exact_id
                else (b"XTRIM", key, b"%d" % len(st))
            )
        return gone

    def xdel(self, key: bytes, sids: list[StreamID]) -> int:
        st = self.data[key]
        assert isinstance(st, Stream)
        gone = st.delete(sids)
        if gone:
            self._log((b"XDEL", key, *[format_id(sid) for sid in sids]))
        return gone

    def zadd(self, key: bytes, pairs: list[tuple[float, bytes]]) -> None:
        """Set these members' scores (the key is made when missing)."""
        z = self.data.get(key)
        if z is None:
            z = self.data[key] = ZSet()
            self.order.add(key)
        assert isinstance(z, ZSet)
        pairs = [(score + 0.0, member) for score, member in pairs]  # -0 is kept as 0, as Redis
        for score, member in pairs:
            z.add(member, score)
        self._log((b"ZADD", key, *[x for score, m in pairs for x in (repr(score).encode(), m)]))
        if key in self.watched:  # BZPOPMIN and its kin wait on it (blocking.py)
            self.ready.append((self, key))

    def zrem(self, key: bytes, members: list[bytes]) -> int:
        z = self.data[key]
        assert isinstance(z, ZSet)
        removed = [m for m in members if z.remove(m)]
        if removed:
            if not z:
                self._remove(key)
            self._log((b"ZREM", key, *removed))
        return len(removed)
