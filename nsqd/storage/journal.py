"""--durable-inflight: one journal file per channel, `<topic>:<channel>.inflight.journal` in
--data-path, holding the channel's in-flight and deferred messages so that a kill -9 or a
restart does not forget them (nsqd keeps them only in memory). Implements engine.ports.Journal.

The file is a record log (records.py: framed, checksummed, a damaged record skipped alone),
each record a type byte and its payload (big-endian):

    H  held:     count, then per message id(16) timestamp(i64) attempts(u16) body(u32 + bytes)
    D  deferred: due (unix ms, i64), count, then messages as in H
    R  released: count, then ids

Replaying it in order gives the live set: an id is in flight after H, deferred after D, gone
after R. Writes: inside a reactor's pass (a held group commit, storage/commit.py) a delivered
batch (H) and a deferral (D) are buffered and written with the pass's one write per file; the
deliveries leave after it (Consumer.send) and a DPUB is answered after it. Outside one, and for
a lease answered at once, each is written at once, one write(). The releases before them go in
the same write; releases (FIN runs) are gathered and written once per scheduler pass by the
store's flusher (at once with --sync-every=1), or, inside a held pass, with its records. A held
pass writes the journals after every queue file (a REQ's message is in its queue's file before
its release is here). fsync follows --sync-every (counted in writes)
and --sync-timeout, through the store's syncer. The file is rewritten from the live set at
start, at a clean stop, and when it has grown to twice its live size (past 32 MiB), so it stays
bounded. go-diskqueue's files and nsqd.dat are never touched: the Go nsqd ignores these.

nsqd.dat is written a moment after a channel is made (as nsqd writes it), so a kill -9 in that
moment leaves a journal whose channel nsqd.dat does not list: `written_after` finds those (a
journal written after nsqd.dat was), and the store makes their channels again at start."""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

from protocol.v2 import is_ephemeral, is_valid_name

from ..engine.message import Message
from ..engine.ports import StoreError
from ..log import log
from .commit import GroupCommit
from .health import wrote
from .records import RecordLog, legacy_framing, read

if TYPE_CHECKING:
    from .health import Health

SUFFIX = ".inflight.journal"
_LEGACY_HEAD = struct.Struct(">II")  # the framing before records.py: length, crc32 of the body
_MSG = struct.Struct(">16sqHI")  # id, timestamp, attempts, body length
_COUNT = struct.Struct(">I")
_DUE = struct.Struct(">q")
_COMPACT_FLOOR = 32 << 20
# a file's time is the kernel's coarse clock (up to a tick behind time.time_ns, which stamps
# nsqd.dat): a journal written just after nsqd.dat's snapshot may look older by that much
_CLOCK_TICK_NS = 20_000_000


def _messages(msgs: list[Message]) -> bytes:
    pack = _MSG.pack
    parts = [_COUNT.pack(len(msgs))]
    for m in msgs:
        parts.append(pack(m.id, m.timestamp, m.attempts, len(m.body)))
        parts.append(m.body)
    return b"".join(parts)


def _held(msgs: list[Message]) -> bytes:
    return b"H" + _messages(msgs)


def _deferred(msgs: list[Message], due_ms: int) -> bytes:
    return b"D" + _DUE.pack(due_ms) + _messages(msgs)


def _read_messages(buf: bytes, pos: int) -> tuple[list[Message], int]:
    (count,) = _COUNT.unpack_from(buf, pos)
    pos += 4
    out = []
    for _ in range(count):
        msg_id, ts, attempts, size = _MSG.unpack_from(buf, pos)
        pos += _MSG.size
        body = buf[pos : pos + size]
        if len(body) != size:
            raise ValueError("message body past the record")
        pos += size
        out.append(Message(msg_id, body, ts, attempts))
    return out, pos


def replay(records: list[bytes], name: str) -> dict[bytes, tuple[Message, int | None]]:
    """id -> (message, due unix ms for a deferred one, None for one in flight)."""
    live: dict[bytes, tuple[Message, int | None]] = {}
    for record in records:
        kind, payload = record[:1], record[1:]
        try:
            if kind == b"H":
                msgs, _ = _read_messages(payload, 0)
                for m in msgs:
                    live[m.id] = (m, None)
            elif kind == b"D":
                (due,) = _DUE.unpack_from(payload, 0)
                msgs, _ = _read_messages(payload, _DUE.size)
                for m in msgs:
                    live[m.id] = (m, due)
            elif kind == b"R":
                (count,) = _COUNT.unpack_from(payload, 0)
                for i in range(count):
                    live.pop(payload[4 + 16 * i : 20 + 16 * i], None)
            else:
                log.error("JOURNAL(%s): unknown record type %r - skipped", name, kind)
        except (struct.error, ValueError) as exc:
            log.error("JOURNAL(%s): malformed record - skipped (%s)", name, exc)
    return live


def _live_in(path: str) -> dict[bytes, tuple[Message, int | None]]:
    with open(path, "rb") as f:
        data = f.read()
    scan = read(data, path, legacy_framing(_LEGACY_HEAD))
    return replay(scan.payloads, os.path.basename(path)[: -len(SUFFIX)])


def merge_into(source: str, target: str) -> int:
    """Add the live messages of the journal at `source` to the one at `target` (a partition
    merged into another, group/merge.py): `target` rewritten atomically with both live sets.
    Ids are the group's own, never in two partitions, so a merge made again after a crash adds
    nothing twice. How many came from `source`."""
    name = os.path.basename(target)[: -len(SUFFIX)]
    came = _live_in(source)
    log = RecordLog(target, f"JOURNAL({name})", 1, 0.0, legacy=legacy_framing(_LEGACY_HEAD))
    live = replay(log.load().payloads, name)
    live.update(came)
    in_flight = [m for m, due in live.values() if due is None]
    records = [_held(in_flight)] if in_flight else []
    records.extend(_deferred([m], due) for m, due in live.values() if due is not None)
    log.replace(records)
    log.close()
    return len(came)


def written_after(data_path: str, since_ns: int) -> list[tuple[str, str]]:
    """(topic, channel) of each journal in `data_path` last written at or after `since_ns`
    (st_mtime_ns; nsqd.dat's). One written before it belongs to a channel nsqd.dat has listed
    or a run since has deleted (a run without --durable-inflight leaves the file behind), so
    only these may be adopted. A name that is no channel's is skipped with a log line."""
    found = []
    with os.scandir(data_path) as entries:
        for entry in entries:
            if not entry.name.endswith(SUFFIX) or not entry.is_file():
                continue
            topic, _, channel = entry.name[: -len(SUFFIX)].partition(":")
            if not all(is_valid_name(n.encode()) and not is_ephemeral(n) for n in (topic, channel)):
                log.error("JOURNAL: %s is no channel's journal - skipped", entry.name)
                continue
            if entry.stat().st_mtime_ns >= since_ns - _CLOCK_TICK_NS:
                found.append((topic, channel))
    return sorted(found)


class ChannelJournal:
    """One channel's journal file."""

    durable = True  # engine.ports.Journal: deferred messages stay here across a clean stop

    def __init__(
        self,
        path: str,
        sync_every: int,
        sync_timeout: float,
        want_flush: Callable[[ChannelJournal], None],
        want_sync: Callable[[], None],
        commit: GroupCommit,
        health: Health,
    ) -> None:
        self.path = path
        self.name = os.path.basename(path)[: -len(SUFFIX)]
        self._log = RecordLog(
            path,
            f"JOURNAL({self.name})",
            sync_every,
            sync_timeout,
            legacy=legacy_framing(_LEGACY_HEAD),
            sync_due=want_sync,
        )
        self._release_at_once = sync_every <= 1
        self._want_flush = want_flush
        self._commit = commit
        self._health = health  # a failed write turns /ping NOK, as a disk queue's does
        self._compact_at = _COMPACT_FLOOR
        self._live_source: Callable[[], tuple[list[Message], list[tuple[Message, int]]]] | None
        self._live_source = None
        self.closed = False

    # -- engine.ports.Journal ----------------------------------------------------------------

    def held(self, msgs: list[Message], at_once: bool = False) -> None:
        if at_once:
            self._write(_held(msgs))
        else:
            self._put(_held(msgs), answered=False)

    def deferred(self, msgs: list[Message], due_ms: int) -> None:
        self._put(_deferred(msgs, due_ms), answered=True)

    def released(self, ids: list[bytes]) -> None:
        if self.closed:
            return
        record = b"R" + _COUNT.pack(len(ids)) + b"".join(ids)
        if self._commit.depth:
            # in a held pass: with its records, after the queues' write (a REQ's message is in
            # its queue's file before its release is in this one; written at once, a kill -9
            # before the pass's write lost it)
            self._log.append(record)
            self._commit.add_after(self, False)
            if self._release_at_once:
                # every op synced: on file before the command's answer (and a later command's)
                # leaves (the reactor flushes first); left to the pass's write, a barrier
                # answered in the same pass beat it and a kill -9 gave the FIN'd batch back
                self._commit.urgent = True
            return
        if self._release_at_once:  # every op synced: a FIN is written before the next command
            self._write(record)
            return
        was_empty = not self._log.pending
        self._log.append(record)
        if was_empty:
            self._want_flush(self)

    def attach(self, live: Callable[[], tuple[list[Message], list[tuple[Message, int]]]]) -> None:
        self._live_source = live

    def recover(self) -> tuple[list[Message], list[tuple[Message, int]]]:
        scan = self._log.load()
        live = replay(scan.payloads, self.name)
        in_flight = [m for m, due in live.values() if due is None]
        deferred = [(m, due) for m, due in live.values() if due is not None]
        if scan.payloads or scan.damaged or scan.legacy:
            log.info(
                "JOURNAL(%s): recovered %d in flight, %d deferred",
                self.name,
                len(in_flight),
                len(deferred),
            )
            try:
                self._rewrite(in_flight, deferred)  # compacted: only the live set from here on
            except OSError as exc:
                # no room for the copy (a nearly full disk): appended to as it is, which
                # replays to the same live set; raised, the daemon could not start at all
                self._failed(exc)
        return in_flight, deferred

    def clear(self) -> None:
        self._rewrite([], [])

    def close(self, deferred: list[tuple[Message, int]]) -> None:
        """A clean stop: the file keeps only `deferred` (or goes). The in-flight messages go
        to the channel's disk queue, which a held group commit (the store's close) writes at
        its release: the file is changed only after that write, so a kill -9 in between finds
        each message in one or the other (in both: a duplicate, never a loss). Changed at
        once, a SIGTERM then a kill -9 a few ms later lost them (found by fuzzing a group,
        whose workers a dying supervisor stops)."""
        self.closed = True
        self._live_source = None  # see delete()
        if self._commit.depth:
            self._commit.later(lambda error: self._closed(deferred, error))
        else:
            self._closed(deferred, None)

    def _closed(self, deferred: list[tuple[Message, int]], error: str | None) -> None:
        if error is not None:  # the queues' write failed: the in-flight messages stay here
            log.error("JOURNAL(%s): kept whole - the queues' write failed: %s", self.name, error)
            self._log.close()
        elif deferred:
            self._rewrite([], deferred)
            self._log.close()
        else:
            self._log.remove()

    def delete(self) -> None:
        self._log.remove()
        self.closed = True
        # the channel's bound method: a reference cycle (channel -> journal -> channel) that
        # kept every deleted channel, its queues and files' objects, until a full collection,
        # which the daemon's thresholds (cli.py) make rare; a closed journal compacts nothing
        self._live_source = None

    # -- the store's flusher and syncer ------------------------------------------------------

    def flush(self) -> None:
        """What is gathered, in one write (the group commit's release, the store's flusher);
        StoreError when it fails (the release refuses the pass's DPUBs)."""
        if self.closed:
            return
        pending = self._log.pending
        try:
            self._log.flush()
            self._maybe_compact()
        except OSError as exc:
            raise StoreError(self._failed(exc)) from exc
        if pending:
            wrote(self._health)

    def needs_sync(self) -> bool:
        return self._log.needs_sync()

    def sync(self) -> None:
        try:
            self._log.sync()
        except OSError as exc:  # closed meanwhile (a delete): nothing left to keep
            log.debug("JOURNAL(%s): fsync - %s", self.name, exc)

    # -- the file -----------------------------------------------------------------------------

    def _put(self, record: bytes, answered: bool) -> None:
        """Buffered for the held group commit's write (`answered`: a publisher's answer
        waits for it, as for a PUB's record), or written at once when none is held."""
        commit = self._commit
        if not commit.depth or self.closed:
            self._write(record)
            return
        self._log.append(record)
        commit.add_after(self, answered)

    def _write(self, record: bytes) -> None:
        """One write(): the gathered releases first (the file stays in call order), then this.
        A failure is logged and turns /ping NOK, and the channel goes on without the record,
        as nsqd's memory-only state does: no publisher waits here (a DPUB's record is written
        by its held group commit, whose failure refuses it); raised, the failure went up
        through the channel into the scanner, the pump or the reactor and stopped the daemon."""
        if self.closed:
            return
        try:
            self._log.write(record)
            self._maybe_compact()
        except OSError as exc:
            self._failed(exc)
            return
        wrote(self._health)

    def _failed(self, exc: OSError) -> str:
        reason = f"journal {self.name} write failed - {exc}"
        log.error("JOURNAL(%s): write failed - %s", self.name, exc)
        self._health.last_error = reason
        return reason

    def _maybe_compact(self) -> None:
        if self._log.size >= self._compact_at and self._live_source is not None:
            self._rewrite(*self._live_source())

    def _rewrite(self, in_flight: list[Message], deferred: list[tuple[Message, int]]) -> None:
        """Replace the file by one holding just this live set."""
        records = [_held(in_flight)] if in_flight else []
        records.extend(_deferred([m], due) for m, due in deferred)
        size = self._log.replace(records)
        self._compact_at = max(_COMPACT_FLOOR, 2 * size)
