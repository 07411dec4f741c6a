"""The Redis keyspace: typed values (lists as deques, strings as bytes, hashes as dicts, sets as
sets, sorted sets as zset.ZSet, streams as stream.Stream), key expiry (absolute unix ms, lazy on
access and active through `expire_due`), WRONGTYPE, and the one place every change goes through
(`_log`), so that each is written to the log (storage/resp_log.py) as a replayable record and
lists that grow wake their blocked clients (blocking.py). The changes of the values themselves
are its base's (values.py).

All synchronous: a command runs to its end before any other starts, which is what makes the
blocking engine and LMOVE atomic."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterable

from . import records, watch
from .group_values import GroupValues
from .scan_order import NO_ORDER, NoOrder, ScanOrder
from .stream import Stream
from .values import Record, TypedValues, Value, now_ms
from .zset import ZSet


class WrongType(Exception):
    """The key holds another type than the command works on."""


WRONGTYPE = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"


def unrecorded(rec: Record) -> None:
    """The record hook before a log is attached (a keyspace of its own, in tests)."""


def type_name(value: Value | None) -> str:
    if value is None:
        return "none"
    if isinstance(value, deque):
        return "list"
    if isinstance(value, bytes):
        return "string"
    if isinstance(value, set):
        return "set"
    if isinstance(value, Stream):
        return "stream"
    return "zset" if isinstance(value, ZSet) else "hash"


class Keyspace(TypedValues, GroupValues):
    """The keys of one database: lookups with lazy expiry, the typed values' changes
    (values.py), keys, expiry, the log's hook, replay and snapshot."""

    def __init__(self) -> None:
        self.data: dict[bytes, Value] = {}
        self.expires: dict[bytes, int] = {}  # key -> unix ms
        self._heap: list[tuple[int, bytes]] = []  # (when, key); stale entries skipped
        # hooks, set by the front-end
        self.record: Callable[[Record], None] = unrecorded  # the write log
        self.on_expired: Callable[[bytes, Value], None] | None = None
        self.deadline_moved: Callable[[], None] | None = None  # wake the expiry task
        self.watched: dict[bytes, object] = {}  # keys with blocked clients (blocking.py)
        # watched keys that got elements since the last serve, with their database: one list
        # shared by the 16 databases (databases.py), so that one look tells the reactor
        self.ready: list[tuple[Keyspace, bytes]] = []
        self.loading = False  # replaying the log: nothing expires, nothing is recorded
        self.watchers: dict[bytes, set] = {}  # WATCHed key -> sessions (transactions.py)
        self.order: NoOrder | ScanOrder = NO_ORDER  # SCAN's, from the first SCAN on

    def _log(self, rec: Record) -> None:
        if self.loading:
            return
        if self.watchers:
            watch.touch(self, rec)
        self.record(rec)

    def touched(self, key: bytes) -> None:
        """Redis's signalModifiedKey where nothing changed (an LTRIM that keeps the whole
        list): the key's WATCHers' EXEC fails; nothing is logged."""
        if self.watchers:
            watch.touch(self, (b"TOUCHED", key))

    # -- lookups (lazy expiry) -----------------------------------------------------------

    def get(self, key: bytes) -> Value | None:
        expires = self.expires
        if expires and key in expires and expires[key] <= now_ms() and not self.loading:
            self._expire(key)
            return None
        return self.data.get(key)

    def get_list(self, key: bytes) -> deque | None:
        value = self.get(key)
        if value is not None and not isinstance(value, deque):
            raise WrongType
        return value

    def get_string(self, key: bytes) -> bytes | None:
        value = self.get(key)
        if value is not None and not isinstance(value, bytes):
            raise WrongType
        return value

    def get_hash(self, key: bytes) -> dict | None:
        value = self.get(key)
        if value is not None and not isinstance(value, dict):
            raise WrongType
        return value

    def get_set(self, key: bytes) -> set | None:
        value = self.get(key)
        if value is not None and not isinstance(value, set):
            raise WrongType
        return value

    def get_stream(self, key: bytes) -> Stream | None:
        value = self.get(key)
        if value is not None and not isinstance(value, Stream):
            raise WrongType
        return value

    def get_zset(self, key: bytes) -> ZSet | None:
        value = self.get(key)
        if value is not None and not isinstance(value, ZSet):
            raise WrongType
        return value

    # -- keys and expiry -----------------------------------------------------------------

    def rename(self, src: bytes, dst: bytes) -> None:
        """RENAME of an existing key: dst's old value goes, src's expiry comes along."""
        value = self.data.pop(src)
        self.lost(src)
        when = self.expires.pop(src, None)
        self.data.pop(dst, None)
        self.expires.pop(dst, None)
        self.data[dst] = value
        self.order.add(dst)
        if when is not None:
            self.expires[dst] = when
            heapq.heappush(self._heap, (when, dst))
        self._log((b"RENAME", src, dst))
        if dst in self.watched:  # a list moved into place serves clients blocked on dst
            self.ready.append((self, dst))

    def copy(self, key: bytes, value: Value, when: int | None) -> None:
        """COPY to `key`, missing here, of `value` (a key's of this database or another) and
        its expiry `when` (unix ms, or None): the records that rebuild the value after a
        restart (records.key_records) are applied here as this keyspace's own changes, each
        logged, its WATCHers and blocked clients told, so that the copy is its replay."""
        for rec in records.key_records(key, value, when):
            records.apply(self, rec)

    def delete(self, keys: Iterable[bytes]) -> int:
        gone = [k for k in keys if self.get(k) is not None and self._remove(k) is None]
        if gone:
            self._log((b"DEL", *gone))
            if self.watched:
                for key in gone:
                    self.lost(key)
        return len(gone)

    def lost(self, key: bytes) -> None:
        """A key deleted or given another value: its blocked stream consumers are answered
        (XREADGROUP's -UNBLOCKED, blocking.py), as Redis signals a deleted key."""
        if key in self.watched:
            self.ready.append((self, key))

    def scan_order(self) -> ScanOrder:
        """SCAN's order of the keys (made at the first SCAN; made again once the deleted keys
        it still holds could outnumber the live ones)."""
        order = self.order
        if not isinstance(order, ScanOrder) or len(order) > 2 * len(self.data) + 1024:
            self.order = order = ScanOrder(self.data)
        return order

    def _remove(self, key: bytes) -> None:
        del self.data[key]
        self.expires.pop(key, None)

    def flush(self) -> None:
        if self.watchers and not self.loading:  # only watched keys that existed are spoiled
            watch.touch(self, (b"DEL", *(k for k in self.watchers if k in self.data)))
        for key in [k for k in self.watched if k in self.data]:
            self.lost(key)  # a blocked group consumer's stream is gone, as by DEL
        self.data.clear()
        self.order = NO_ORDER
        self.expires.clear()
        self._heap.clear()
        self._log((b"FLUSHALL",))

    def set_expire(self, key: bytes, when: int) -> None:
        """Expire an existing key at unix ms `when` (already past: deleted now, no event, as
        Redis deletes it when EXPIRE is given a past time)."""
        if when <= now_ms() and not self.loading:
            self.delete([key])
            return
        self._expire_at(key, when)
        self._log((b"PEXPIREAT", key, b"%d" % when))

    def _expire_at(self, key: bytes, when: int) -> None:
        self.expires[key] = when
        if (not self._heap or when < self._heap[0][0]) and self.deadline_moved is not None:
            self.deadline_moved()
        heapq.heappush(self._heap, (when, key))
        if len(self._heap) > 64 + 2 * len(self.expires):
            self._compact()

    def persist(self, key: bytes) -> bool:
        if self.expires.pop(key, None) is None:
            return False
        self._log((b"PERSIST", key))
        return True

    def _compact(self) -> None:
        self._heap = [(w, k) for k, w in self.expires.items()]
        heapq.heapify(self._heap)

    def next_deadline(self) -> int | None:
        """Unix ms of the earliest expiry (maybe a stale one: expire_due skips those)."""
        return self._heap[0][0] if self._heap else None

    def expire_due(self, now: int, limit: int = 1000) -> int:
        """Active expiry: expire up to `limit` keys due at `now`; how many."""
        heap, expires = self._heap, self.expires
        done = 0
        while heap and heap[0][0] <= now and done < limit:
            when, key = heapq.heappop(heap)
            if expires.get(key) == when:
                self._expire(key)
                done += 1
        return done

    def _expire(self, key: bytes) -> None:
        value = self.data.pop(key)
        del self.expires[key]
        self._log((b"DEL", key))
        self.lost(key)
        if self.on_expired is not None:
            self.on_expired(key, value)

    # -- replay and snapshot -------------------------------------------------------------

    def apply(self, rec: Record) -> None:
        """Redo one logged change (storage/resp_log.py's replay; self.loading is set)."""
        records.apply(self, rec)

    def snapshot(self, chunk: int = 512) -> Iterable[Record]:
        """Records that rebuild the keyspace as it is (the log's compaction)."""
        return records.snapshot(self, chunk)

    def reselect(self) -> None:
        """(A keyspace alone logs no SELECT: nothing to do.)"""

    def list_lengths(self) -> dict[str, int]:
        """Every list key (decoded as UTF-8, invalid bytes replaced) -> its length."""
        return {
            k.decode("utf-8", "replace"): len(v)
            for k, v in self.data.items()
            if isinstance(v, deque)
        }
