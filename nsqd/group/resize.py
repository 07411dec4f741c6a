"""What a change of --workers does to --data-path: run once, before anything else starts, by
the process the user started (a group's supervisor, or one nsqd).

A group keeps worker K's partition in `worker-K/`; one nsqd keeps its files at the top of
--data-path. Before this, one nsqd started on a group's folder began empty beside the group's
messages without a word (they waited there, unread, until a group of that size came back),
and a group refused a folder with more partitions than workers, so a `--workers=auto` whose
cores changed (a container given fewer CPUs) did not start. Now:

- A partition beyond the count is merged into worker K mod count's (one nsqd's, for a count of
  1) and removed: first the deletes and empties it missed while down (`worker-K.missed`), then
  its messages (merge.py: queues and journals, renamed whole where the target has none of
  them, else appended), then its topics and channels, paused or not, into the target's
  nsqd.dat where that lacks them. One log line each.
- One nsqd (count 1) takes worker-0/'s files up into --data-path once no other partition is
  left, and a group takes one nsqd's files down into worker-0/. Moved by rename (the same
  files, the same node id: worker 0's is --node-id), nsqd.dat last: a start killed midway
  finds the rest still to move, and moves it.

Refused, each with one line, before anything changes: a daemon running on the folder or any
partition of it (nsqd's own lock, storage/dirlock.py), a partition beyond the count holding a
Redis keyspace (worker 0 alone keeps one); and, when it comes to them, a move where both
folders hold a file of the same name (two different partitions), and one nsqd taking worker
0's files up while `worker-0.missed` holds changes worker 0 has not made yet."""

from __future__ import annotations

import os
import shutil
import time
from typing import TYPE_CHECKING

from ..log import log
from ..storage import atomic, dirlock, journal, metadata, resp_log
from ..storage.diskqueue_files import queue_of
from ..version import VERSION
from . import merge

if TYPE_CHECKING:
    from ..config.options import Options

LONE = "nsqd.dat"  # one nsqd's metadata at the top: its files are there
REMOVED = ".removed"  # worker-K.removed/: a partition being removed (no longer read as one)


def worker_dirs(group_path: str) -> list[int]:
    """The partitions in --data-path, `worker-K/`, by index."""
    try:
        names = os.listdir(group_path)
    except OSError:
        return []
    found = (n[7:] for n in names if n.startswith("worker-"))
    return sorted(int(k) for k in found if k.isdigit() and os.path.isdir(_part(group_path, k)))


def _part(group_path: str, index: int | str) -> str:
    return os.path.join(group_path, f"worker-{index}")


def settle(opts: Options) -> str:
    """Make --data-path hold what `opts.workers` workers (one nsqd for 1) read; "" or why the
    start is refused."""
    group_path = os.path.abspath(opts.data_path or os.getcwd())
    count = opts.workers
    if not os.path.isdir(group_path):  # a new one: nothing to settle
        return ""
    try:
        parts = worker_dirs(group_path)
        _unused(group_path, parts)
        beyond = [k for k in parts if k >= count]
        for k in beyond:  # checked before anything changes
            keys = os.path.join(_part(group_path, k), resp_log.FILE)
            if os.path.exists(keys) and os.path.getsize(keys):
                return (
                    f"--workers={count}: {keys} holds a Redis keyspace, which only worker 0 "
                    "keeps; start with the --workers that wrote it"
                )
        for k in beyond:
            _retire(group_path, k, k % count, opts.max_bytes_per_file)
        for name in os.listdir(group_path):  # what a start killed while removing one left
            if name.startswith("worker-") and name.endswith(REMOVED):
                shutil.rmtree(os.path.join(group_path, name), ignore_errors=True)
        refused = _move_up(group_path) if count == 1 else _move_down(group_path)
        return f"--workers={count}: {refused}" if refused else ""
    except OSError as exc:  # a daemon holds it (dirlock's words), or the disk refused
        where = f"{exc.filename}: " if exc.filename else ""
        return f"--workers={count}: {where}{exc.strerror or exc}"
    except metadata.MetadataError as exc:  # a partition's nsqd.dat, in nsqd's words
        return f"--workers={count}: {exc}"


def _unused(group_path: str, parts: list[int]) -> None:
    """OSError, in nsqd's words, where a daemon holds --data-path (one nsqd) or a partition
    of it (a group's worker): nothing is moved under a running daemon. Each lock is let go at
    once (the daemon started next takes its own)."""
    for path in [group_path, *(_part(group_path, k) for k in parts)]:
        os.close(dirlock.lock(path))


def _retire(group_path: str, index: int, into: int, max_bytes_per_file: int) -> None:
    """Merge partition `index` into partition `into` and remove it: first the changes it
    missed while down (`worker-K.missed`: a deleted or emptied queue's messages go), then its
    messages (merge.py), then its topics and channels into `into`'s nsqd.dat where that lacks
    them."""
    path = _part(group_path, index)
    records = metadata.load(path)
    missed_file = os.path.join(group_path, f"worker-{index}.missed")
    if os.path.exists(missed_file):
        from . import missed  # its lines: trio's module with it, only here

        changes = missed.read(missed_file)
        records = _after(records, changes)
        _dropped(path, changes)
    target = _part(group_path, into)
    os.makedirs(target, exist_ok=True)
    moved = merge.merge(path, target, max_bytes_per_file)
    have = metadata.load(target)
    merged = _merged(have, records)
    if merged != have:
        metadata.write(target, metadata.encode(merged, VERSION), time.time_ns())
    gone = f"{path}{REMOVED}"
    shutil.rmtree(gone, ignore_errors=True)  # one a start killed while removing it left
    os.rename(path, gone)  # no longer a partition, whatever the removal leaves
    atomic.fsync_dir(group_path)
    shutil.rmtree(gone)
    for stale in (missed_file, os.path.join(group_path, f"worker-{index}.link")):
        if os.path.exists(stale):
            os.unlink(stale)
    log.info(
        "group: worker-%d/ merged into worker-%d/ (%d messages added to its queues, the rest "
        "moved whole) and removed",
        index,
        into,
        moved,
    )


def _dropped(path: str, changes: list[tuple[str, str, str | None]]) -> None:
    """The files of the queues a missed delete or empty emptied (a topic's delete: its
    channels' too; a channel's: its journal of in-flight and deferred messages too)."""
    for action, topic, channel in changes:
        if action not in ("delete", "empty"):
            continue
        queue = topic if channel is None else f"{topic}:{channel}"
        whole_topic = action == "delete" and channel is None
        for entry in os.listdir(path):
            name = queue_of(entry) or entry.removesuffix(journal.SUFFIX)
            if name == entry:  # neither a queue's file nor a journal
                continue
            if name == queue or (whole_topic and name.startswith(f"{topic}:")):
                os.unlink(os.path.join(path, entry))


def _after(
    records: list[metadata.TopicRecord], changes: list[tuple[str, str, str | None]]
) -> list[metadata.TopicRecord]:
    """nsqd.dat's records once the missed changes are made (an empty leaves them as they are)."""
    for action, topic, channel in changes:
        for rec in records:
            if rec.name != topic:
                continue
            if action == "delete" and channel is None:
                records = [r for r in records if r.name != topic]
            elif action == "delete":
                rec.channels = [(c, p) for c, p in rec.channels if c != channel]
            elif action in ("pause", "unpause") and channel is None:
                rec.paused = action == "pause"
            elif action in ("pause", "unpause"):
                paused = action == "pause"
                rec.channels = [(c, paused if c == channel else p) for c, p in rec.channels]
            break
    return records


def _merged(
    have: list[metadata.TopicRecord], extra: list[metadata.TopicRecord]
) -> list[metadata.TopicRecord]:
    """`have` with the topics and channels of `extra` it lacks (its own flags stay)."""
    out = [metadata.TopicRecord(r.name, r.paused, list(r.channels)) for r in have]
    by_name = {r.name: r for r in out}
    for rec in extra:
        mine = by_name.get(rec.name)
        if mine is None:
            mine = by_name[rec.name] = metadata.TopicRecord(rec.name, rec.paused, [])
            out.append(mine)
        known = {c for c, _ in mine.channels}
        mine.channels += [(c, p) for c, p in rec.channels if c not in known]
    return out


def _lone_files(path: str) -> list[str]:
    """One nsqd's files at the top of --data-path: nsqd.dat, its disk queues, and ours."""
    return [
        n
        for n in os.listdir(path)
        if n == LONE
        or ".diskqueue." in n
        or n.startswith("trio-nsqd.")
        or n == resp_log.FILE
        or n.endswith(journal.SUFFIX)
    ]


def _move_up(group_path: str) -> str:
    """One nsqd on a folder whose only partition is worker-0/: its files taken up."""
    source = _part(group_path, 0)
    if not os.path.isdir(source):
        return ""
    missed_file = os.path.join(group_path, "worker-0.missed")
    if os.path.exists(missed_file):
        return (
            f"{missed_file} holds changes worker 0 has not made yet; start the "
            "group once more to make them"
        )
    refused = _move(source, group_path, os.listdir(source))
    if refused:
        return refused
    os.rmdir(source)
    atomic.fsync_dir(group_path)
    link = os.path.join(group_path, "worker-0.link")
    if os.path.exists(link):
        os.unlink(link)
    log.info("group: worker-0/'s files moved up into %s: one nsqd goes on with them", group_path)
    return ""


def _move_down(group_path: str) -> str:
    """A group on a folder where one nsqd ran: its files taken down into worker-0/."""
    names = _lone_files(group_path)
    if not names:
        return ""
    target = _part(group_path, 0)
    os.makedirs(target, exist_ok=True)
    refused = _move(group_path, target, names)
    if not refused:
        log.info("group: one nsqd's files in %s moved into worker-0/", group_path)
    return refused


def _move(source: str, target: str, names: list[str]) -> str:
    """Rename `names` from `source` into `target`, nsqd.dat last; "" or why not (a name both
    hold: two partitions, which no rename joins)."""
    both = sorted(n for n in names if os.path.lexists(os.path.join(target, n)))
    if both:
        return (
            f"{source} and {target} both hold {both[0]}: the data of two nsqds; "
            "move one away, or start with the --workers that wrote it"
        )
    for name in sorted(names, key=lambda n: n == LONE):  # nsqd.dat last: what marks them moved
        if name == LONE:
            atomic.fsync_dir(target)
            atomic.fsync_dir(source)
        os.rename(os.path.join(source, name), os.path.join(target, name))
    atomic.fsync_dir(target)
    atomic.fsync_dir(source)
    return ""
