"""One partition's messages moved into another's, offline (group/resize.py: a partition beyond
a smaller --workers count, merged into worker K mod N before any worker starts).

Per queue (a topic's or a channel's disk queue, named as go-diskqueue names them): where the
target has no file of that queue, the source's files are renamed into it, whole (exact, and
the per-message TTLs of `<queue>.diskqueue.ttl` with them); otherwise the source's unread
records are appended to the target's queue through the queue itself (storage/diskqueue.py:
its files roll as at run time), their TTLs added to the target's, and the target closed
(fsynced) before the source's files go. A --durable-inflight journal (in-flight and deferred
messages) is renamed where the target has none, else its live set is added to the target's
(storage/journal.py: one atomic rewrite). Message ids are the group's own (each worker's node
id differs), so nothing collides; order across the two is not kept (NSQ promises none).

A crash midway: what was renamed is in the target; a queue appended to and not yet removed
from the source is appended again at the next start (its messages twice: at least once, as
nsqd promises, never lost); a journal merged again adds nothing twice."""

from __future__ import annotations

import os

from ..log import log
from ..storage import atomic, journal
from ..storage.diskqueue import DiskQueue
from ..storage.diskqueue_files import queue_of
from ..storage.expiries import ExpiryFile

_CHUNK = 1024  # records moved at a time
_CHUNK_BYTES = 1 << 20
_ANY_SIZE = (1 << 31) - 1  # a record's size is the target's start's to judge, as the source's


def queue_names(path: str) -> set[str]:
    """The disk queues with files in a partition (data, metadata or TTLs)."""
    return {name for entry in os.listdir(path) if (name := queue_of(entry)) is not None}


def merge(source: str, target: str, max_bytes_per_file: int) -> int:
    """Every queue and journal of the partition at `source` into the one at `target`; how
    many messages were appended (renamed ones not counted: their files moved whole)."""
    moved = 0
    mine = queue_names(target)
    for name in sorted(queue_names(source)):
        if name in mine:
            moved += _append(source, target, name, max_bytes_per_file)
        else:
            _rename(source, target, [e for e in os.listdir(source) if queue_of(e) == name])
    for entry in sorted(os.listdir(source)):
        if entry.endswith(journal.SUFFIX):
            there = os.path.join(target, entry)
            if os.path.exists(there):
                moved += journal.merge_into(os.path.join(source, entry), there)
                os.unlink(os.path.join(source, entry))
            else:
                _rename(source, target, [entry])
    return moved


def _rename(source: str, target: str, entries: list[str]) -> None:
    for entry in entries:
        os.rename(os.path.join(source, entry), os.path.join(target, entry))
    atomic.fsync_dir(target)


def _append(source: str, target: str, name: str, max_bytes_per_file: int) -> int:
    """The source queue's unread records after the target's; how many."""
    src, dst = (
        DiskQueue(name, path, max_bytes_per_file, 0, _ANY_SIZE, 1 << 30, 1e9, log)
        for path in (source, target)
    )
    ttl = os.path.join(source, f"{name}.diskqueue.ttl")
    expires = ExpiryFile(ttl).expires if os.path.exists(ttl) else {}
    kept = ExpiryFile(os.path.join(target, f"{name}.diskqueue.ttl")) if expires else None
    count = 0
    try:
        while records := src.read_many(_CHUNK, _CHUNK_BYTES):
            for record in records:
                dst.put(record)
                if kept is not None and (when := expires.get(record[10:26])):
                    kept.add(record[10:26], when)  # a record: ts(8) attempts(2) id(16) body
            count += len(records)
    finally:
        if kept is not None:
            kept.sync()
            kept.close()
        dst.close()  # flushed and fsynced, its metadata too, before the source goes
    src.delete()
    for entry in os.listdir(source):
        if queue_of(entry) == name:
            os.unlink(os.path.join(source, entry))
    log.info("group: %s: %d messages from %s added to %s", name, count, source, target)
    return count
