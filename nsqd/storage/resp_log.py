"""The Redis front-end's keyspace on disk (--resp-address): `resp.log` in --data-path, a record
log (records.py) of every change as a replayable record, replayed on start and rewritten from a
snapshot of the keyspace when it has grown to twice its last rewritten size (at least
REWRITE_MIN). A record's payload: u32 argc, then per argument u32 length + bytes
(little-endian). A damaged record is skipped alone with a log line; a torn tail is cut off.

The records of one command that makes several changes (a *STORE's DEL and refill, XADD's
entry and trim), of one EXEC, one script, and those of the blocked clients its change served,
are one `MULTI` record (`seal`) whose arguments are their payloads: replay applies all of them
or, torn or damaged, none (Redis wraps a transaction in MULTI ... EXEC in its AOF and reverts
an incomplete one on load). A command's single record is written as is: the queue's and the
cache's hot paths (LMOVE, SET ... EX) log one record each (the keyspace's MOVE.. and SETPX).

Changes are gathered during a scheduler pass and written with one write() before their replies
are sent (the front-end calls `flush`), so kill -9 loses nothing acknowledged; fsync follows
--sync-every (writes) / --sync-timeout through the storage's syncer. The keyspace is reached
through `Replayable` only: storage imports no front-end."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterable
from typing import Protocol

from ..log import log
from .records import RecordLog, legacy_framing, read

FILE = "resp.log"
REWRITE_MIN = 64 * 1024 * 1024
_LEGACY_HEAD = struct.Struct("<II")  # the framing before records.py
_U32 = struct.Struct("<I")
_pack_u32 = _U32.pack
_THREE = _pack_u32(3)
_FOUR = _pack_u32(4)
GROUP = b"MULTI"  # a record whose arguments are the payloads of one command's records
_GROUP_ARG = _pack_u32(len(GROUP)) + GROUP
_SELECT = _pack_u32(2) + _pack_u32(6) + b"SELECT"  # how a SELECT record's payload starts

Record = tuple[bytes, ...]


class Replayable(Protocol):
    """What the log needs of the keyspace (nsqd.resp.keyspace.Keyspace)."""

    loading: bool  # set while the log is replayed: nothing expires, nothing is recorded
    record: Callable[[Record], None] | None  # where the keyspace sends each change

    def apply(self, rec: Record) -> None: ...

    def snapshot(self) -> Iterable[Record]: ...

    def reselect(self) -> None:
        """The log's position may differ from what the keyspace last wrote (a rewrite's
        snapshot ends in database 0): name the database in the next record."""


def encode(rec: Record) -> bytes:
    """A record's payload."""
    parts = [_U32.pack(len(rec))]
    for arg in rec:
        parts.append(_U32.pack(len(arg)))
        parts.append(arg)
    return b"".join(parts)


def decode(payload: bytes) -> Record:
    (argc,) = _U32.unpack_from(payload, 0)
    pos, out = 4, []
    for _ in range(argc):
        (n,) = _U32.unpack_from(payload, pos)
        pos += 4
        if pos + n > len(payload):
            raise ValueError("argument past the record")
        out.append(payload[pos : pos + n])
        pos += n
    if pos != len(payload) or not out:
        raise ValueError("bad argument count")
    return tuple(out)


class RespLog:
    def __init__(
        self, data_path: str, sync_every: int, sync_timeout: float, sync_due: Callable[[], None]
    ) -> None:
        self.path = os.path.join(data_path, FILE)
        self.rewrite_min = REWRITE_MIN
        self._log = RecordLog(
            self.path,
            f"RESP: {FILE}",
            sync_every,
            sync_timeout,
            legacy=legacy_framing(_LEGACY_HEAD),
            sync_due=sync_due,
        )
        self._log.keep_unwritten = True  # a failed write's records are written again later
        self._append = self._log.append
        self.appended = 0  # records since the start: the reactor sees which commands changed
        self._base = 0  # size after the last rewrite
        # told by the storage's syncer, on the event loop, how each fsync went: the front-end
        # refuses writes after a failed one until one succeeds (Redis's aof_bio_fsync_status)
        self.synced: Callable[[OSError | None], None] = _ignore
        self.keyspace: Replayable | None = None

    def load(self, keyspace: Replayable) -> int:
        """Replay the log into `keyspace` and record its changes from now on; how many
        records were applied. A file in the old framing is rewritten at once."""
        self.keyspace = keyspace
        scan = self._log.load()
        _apply(keyspace, scan.payloads)
        self._base = scan.end
        if scan.legacy:
            self.rewrite()
        keyspace.record = self.record
        return len(scan.payloads)

    def replay(self, keyspace: Replayable) -> int:
        """The log as it is on disk applied again to `keyspace` (emptied by the caller; Redis's
        DEBUG RELOAD / LOADAOF: what a restart would rebuild); how many records."""
        self._log.flush()
        with open(self.path, "rb") as f:
            payloads = read(f.read(), FILE).payloads
        _apply(keyspace, payloads)
        return len(payloads)

    # -- writing -------------------------------------------------------------------------

    def record(self, rec: Record) -> None:
        # encode() written out, this runs once per write command; most have three arguments
        # (a push of one, a pop, a SET, a move), a SET with its expiry four
        self.appended += 1
        n = len(rec)
        pack = _pack_u32
        if n == 3:
            a, b, c = rec
            self._append(b"".join((_THREE, pack(len(a)), a, pack(len(b)), b, pack(len(c)), c)))
        elif n == 4:
            a, b, c, d = rec
            parts = (_FOUR, pack(len(a)), a, pack(len(b)), b, pack(len(c)), c, pack(len(d)), d)
            self._append(b"".join(parts))
        else:
            self._append(encode(rec))

    def seal(self, before: int) -> None:
        """The records appended since `appended` was `before` are one command's (one EXEC's,
        one script's): two or more go out as one GROUP record, replayed all or none (the
        reactor calls this only then: a single record costs nothing). A SELECT that leads
        them stays a record of its own (it names their database, it changes nothing); one
        inside the group is followed by a fresh SELECT before the next record, so that a
        damaged group leaves no later record in the wrong database."""
        # encode((GROUP, *payloads)) written out (a push that serves a blocked BLMOVE)
        payloads = self._log.take_back(self.appended - before)
        if payloads and payloads[0].startswith(_SELECT):
            self._append(payloads.pop(0))
        if len(payloads) < 2:
            for payload in payloads:
                self._append(payload)
            return
        pack = _pack_u32
        parts = [pack(len(payloads) + 1), _GROUP_ARG]
        for payload in payloads:
            parts += (pack(len(payload)), payload)
        group = b"".join(parts)
        self._append(group)
        # (a match inside an argument only costs one SELECT record more)
        if _SELECT in group and self.keyspace is not None:
            self.keyspace.reselect()

    def flush(self) -> bool:
        """Write what the last commands changed (one write()); rewrite when grown, in a child
        process (as Redis's auto-aof-rewrite), so that the loop never stops for it. True when
        something was written (a good write: /ping may turn OK again). A write that fails
        raises, and what it did not write is kept and written first by the next flush
        (records.py): the changes are in memory, the log catches up with them in order."""
        wrote = self._log.pending
        self._log.flush()
        if self._log.size > max(self.rewrite_min, 2 * self._base) and not self._log.replacing:
            self.rewrite_in_background()
        return wrote

    def rewrite_in_background(self) -> None:
        """BGREWRITEAOF: the snapshot is taken and written by a forked child; the records
        that come meanwhile follow it in the new file (records.py)."""
        assert self.keyspace is not None
        snapshot = (encode(rec) for rec in self.keyspace.snapshot())  # run in the child
        self._log.replace_in_child(snapshot, self._rewritten)
        self.keyspace.reselect()  # the new file's snapshot ends in database 0

    def _rewritten(self, size: int) -> None:
        self._base = size

    def rewrite(self) -> None:
        """Replace the log with the records that rebuild the keyspace as it is now (what is
        gathered is already applied to the keyspace: the snapshot covers it)."""
        assert self.keyspace is not None
        before = self._log.size
        self._base = self._log.replace(encode(rec) for rec in self.keyspace.snapshot())
        log.info("RESP: %s rewritten: %d -> %d bytes", FILE, before, self._base)

    # -- the storage's syncer --------------------------------------------------------------

    def needs_sync(self) -> bool:
        return self._log.needs_sync()

    def sync(self) -> None:
        self._log.sync()

    def close(self) -> None:
        """Clean stop: everything written and fsynced."""
        self._log.close()


def _ignore(error: OSError | None) -> None:
    """No front-end listens (yet)."""


def _apply(keyspace: Replayable, payloads: list[bytes]) -> None:
    """Replay records into `keyspace` (nothing recorded, nothing expires meanwhile); a record
    that does not apply is skipped with a log line. A GROUP's records are all decoded before
    any is applied: one that does not decode skips the group whole."""
    keyspace.loading = True
    try:
        for payload in payloads:
            try:
                rec = decode(payload)
                recs = (rec,) if rec[0] != GROUP else [decode(sub) for sub in rec[1:]]
            except (ValueError, struct.error) as exc:
                log.error("RESP: %s: skipping a record that does not decode - %s", FILE, exc)
                continue
            for rec in recs:
                try:
                    keyspace.apply(rec)
                except (ValueError, IndexError, KeyError, TypeError, struct.error) as exc:
                    log.error("RESP: %s: skipping a record that does not apply - %s", FILE, exc)
    finally:
        keyspace.loading = False
