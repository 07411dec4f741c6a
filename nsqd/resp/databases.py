"""Redis's 16 numbered databases (SELECT 0-15): a keyspace each, seen by the log and the
expiry task as one. Each database's changes reach the log with a `SELECT n` record before
them whenever the database differs from the last one logged (as Redis's AOF does), so a log
of database 0 alone is what it was before databases existed; replay follows those records.

Blocked clients and WATCHed keys live in their own database's keyspace; the `ready` list of
keys that got elements is one list shared by all, so the reactor looks at one place."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

from . import watch
from .keyspace import Keyspace, Record, Value, unrecorded

COUNT = 16  # Redis's default `databases`


class Databases:
    def __init__(self, count: int = COUNT) -> None:
        self.dbs = [Keyspace() for _ in range(count)]
        self.ready: list[tuple[Keyspace, bytes]] = []
        for ks in self.dbs:
            ks.ready = self.ready
        self._record: Callable[[Record], None] | None = None
        self._logged_db = 0  # the database the last logged record was about
        self._replay_db = 0
        self._on_expired: Callable[..., None] | None = None

    # -- the hooks, set on every database --------------------------------------------------

    @property
    def loading(self) -> bool:
        return self.dbs[0].loading

    @loading.setter
    def loading(self, value: bool) -> None:
        if value:
            self._replay_db = 0
        for ks in self.dbs:
            ks.loading = value

    @property
    def record(self) -> Callable[[Record], None] | None:
        return self._record

    @record.setter
    def record(self, hook: Callable[[Record], None] | None) -> None:
        self._record = hook
        self._logged_db = self._replay_db  # where the replayed log left off
        self._arm()

    def _arm(self) -> None:
        """The database the log is in records straight into it; every other one through a
        hook that first logs `SELECT n` and then makes its database the direct one."""
        hook = self._record
        for i, ks in enumerate(self.dbs):
            if hook is None:
                ks.record = unrecorded
            else:
                ks.record = hook if i == self._logged_db else self._selecting(i, hook)

    def _selecting(self, db: int, hook: Callable[[Record], None]) -> Callable[[Record], None]:
        def record(rec: Record) -> None:
            hook((b"SELECT", b"%d" % db))
            was, self._logged_db = self._logged_db, db
            if was >= 0:
                self.dbs[was].record = self._selecting(was, hook)
            self.dbs[db].record = hook
            hook(rec)

        return record

    def reselect(self) -> None:
        """The next record names its database (the log's may not be the last one logged)."""
        self._logged_db = -1
        self._arm()

    @property
    def on_expired(self) -> Callable[..., None] | None:
        return self._on_expired

    @on_expired.setter
    def on_expired(self, hook: Callable[..., None] | None) -> None:
        """`hook(key, value, db=index)`: each database's expired keys, told with its index."""
        self._on_expired = hook
        for i, ks in enumerate(self.dbs):
            ks.on_expired = None if hook is None else functools.partial(hook, db=i)

    @property
    def deadline_moved(self) -> Callable[[], None] | None:
        return self.dbs[0].deadline_moved

    @deadline_moved.setter
    def deadline_moved(self, hook: Callable[[], None] | None) -> None:
        for ks in self.dbs:
            ks.deadline_moved = hook

    # -- what the commands, the expiry task and the log call -------------------------------

    def unwatch(self, session: object) -> None:
        watch.unwatch(session)  # each watched key knows its own database

    def flush_all(self) -> None:
        """FLUSHALL: every database that holds keys (each logs its own flush)."""
        for ks in self.dbs:
            if ks.data or ks is self.dbs[0]:
                ks.flush()

    def next_deadline(self) -> int | None:
        deadlines = [d for d in (ks.next_deadline() for ks in self.dbs) if d is not None]
        return min(deadlines) if deadlines else None

    def expire_due(self, now: int, limit: int = 1000) -> int:
        done = 0
        for ks in self.dbs:
            if done < limit:
                done += ks.expire_due(now, limit - done)
        return done

    def apply(self, rec: Record) -> None:
        """Redo one logged change in the database the last SELECT record named."""
        if rec[0] == b"SELECT":
            db = int(rec[1])
            if not 0 <= db < len(self.dbs):
                raise ValueError(f"database {db} out of range")
            self._replay_db = db
            return
        self.dbs[self._replay_db].apply(rec)

    def snapshot(self, chunk: int = 512) -> Iterable[Record]:
        """Records that rebuild every database; the log goes on in database 0 after them."""
        current = 0
        for i, ks in enumerate(self.dbs):
            if not ks.data:
                continue
            if i != current:
                yield (b"SELECT", b"%d" % i)
                current = i
            yield from ks.snapshot(chunk)
        if current:
            yield (b"SELECT", b"0")
        self._logged_db = 0
        self._arm()

    @property
    def data(self) -> dict[bytes, Value]:
        """Database 0's keys (the log's restore count, the metrics' list lengths)."""
        return self.dbs[0].data

    def key_count(self) -> int:
        return sum(len(ks.data) for ks in self.dbs)

    def list_lengths(self) -> dict[str, int]:
        return self.dbs[0].list_lengths()
