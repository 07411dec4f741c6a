"""What a change of --workers does to --data-path: run once, before anything else starts, by
the process the user started (a group's supervisor, or one nsqd).

A group keeps worker K's partition in `worker-K/`; one nsqd keeps its files at the top of
--data-path. Before this, one nsqd started on a group's folder began empty beside the group's
messages without a word (they waited there, unread, until a group of that size came back),
and a group refused a folder with more partitions than workers even when they held nothing,
so a `--workers=auto` whose cores changed (a container given fewer CPUs) did not start. Now:

- A partition beyond the count that holds no message (each disk queue read to its end, no
  message in flight or deferred in a --durable-inflight journal, no Redis keyspace) is
  removed. Its topics and channels, paused or not, go to the nsqd.dat of worker K mod count
  (of one nsqd, for a count of 1) where that lacks them, after the admin changes that worker
  missed while down (its `worker-K.missed`).
- One that holds messages refuses the start with one line that names the queue, and the
  count that reads it: its consumers, connected to any worker of such a group, drain it.
  `--workers=auto` is raised to that count instead (logged): auto is the cores this process
  may use, but never fewer workers than partitions holding messages.
- One nsqd (count 1) takes worker-0/'s files up into --data-path once no other partition is
  left, and a group takes one nsqd's files down into worker-0/. Moved by rename (the same
  files, the same node id: worker 0's is --node-id), nsqd.dat last: a start killed midway
  finds the rest still to move, and moves it.

Refused, each with one line: a move where both folders hold a file of the same name (two
different partitions), and one nsqd taking worker 0's files up while `worker-0.missed` holds
changes worker 0 has not made yet (a group's start makes them)."""

from __future__ import annotations

import logging
import os
import shutil
import time
from typing import TYPE_CHECKING

from ..log import log
from ..storage import atomic, dirlock, diskqueue_files, journal, metadata, resp_log
from ..version import VERSION

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
    """Make --data-path hold what `opts.workers` workers (one nsqd for 1) read, raising an
    auto count where it must (opts.workers changes); "" or why the start is refused."""
    group_path = os.path.abspath(opts.data_path or os.getcwd())
    count = opts.workers
    if not os.path.isdir(group_path):  # a new one: nothing to settle
        return ""
    try:
        _unused(group_path)
        holding = {
            k: why
            for k in worker_dirs(group_path)
            if k >= count and (why := held(_part(group_path, k)))
        }
        if holding and opts.auto_workers:
            raised = max(holding) + 1
            log.info(
                "--workers=auto: %d, the cores this process may use, but worker-%d/ holds "
                "messages (%s): %d workers",
                count,
                max(holding),
                holding[max(holding)],
                raised,
            )
            opts.values["workers"] = count = raised
        elif holding:
            k = max(holding)
            return (
                f"--workers={count}: {_part(group_path, k)} holds messages ({holding[k]}); "
                f"start it with --workers={k + 1} until its consumers have read them"
            )
        for k in worker_dirs(group_path):
            if k >= count:
                _retire(group_path, k, k % count)
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


def _unused(group_path: str) -> None:
    """OSError, in nsqd's words, where a daemon holds --data-path (one nsqd) or a partition
    of it (a group's worker): nothing is moved under a running daemon. Each lock is let go at
    once (the daemon started next takes its own)."""
    for path in [group_path, *(_part(group_path, k) for k in worker_dirs(group_path))]:
        os.close(dirlock.lock(path))


def held(path: str) -> str:
    """What messages a partition holds, as its next start would find them ("" for none): the
    first disk queue with records past its read position, journal with live messages, or
    Redis keyspace."""
    quiet = _quiet
    names = set()
    for entry in os.listdir(path):
        name, dot, rest = entry.rpartition(".diskqueue.")  # a topic's name may hold dots
        if dot and (rest == "meta.dat" or (rest.endswith(".dat") and rest[:-4].isdigit())):
            names.add(name)
        elif entry.endswith(journal.SUFFIX):
            live = journal.live_count(os.path.join(path, entry))
            if live:
                return f"{entry[: -len(journal.SUFFIX)]}: {live} in flight or deferred"
        elif entry == resp_log.FILE and os.path.getsize(os.path.join(path, entry)):
            return "the Redis keyspace, resp.log"
    reach = diskqueue_files.extents(path, names, quiet)
    for name in sorted(names):
        meta = diskqueue_files.load_meta(diskqueue_files.meta_file(path, name), quiet)
        read_at = (meta[1], meta[2]) if meta is not None else (-1, -1)
        if reach[name] > read_at:
            depth = meta[0] if meta is not None else 0
            return f"{name}: {depth} messages" if depth > 0 else f"{name}: unread records"
    return ""


def _quiet(level: int, msg: str, *args: object) -> None:
    if level >= logging.ERROR:
        log.warning("group: " + msg, *args)


def _retire(group_path: str, index: int, into: int) -> None:
    """Remove partition `index`, which holds no message; its topics and channels (after the
    changes it missed) join partition `into`'s nsqd.dat where that lacks them."""
    path = _part(group_path, index)
    records = metadata.load(path)
    missed_file = os.path.join(group_path, f"worker-{index}.missed")
    if os.path.exists(missed_file):
        from . import missed  # its lines: trio's module with it, only here

        records = _after(records, missed.read(missed_file))
    target = _part(group_path, into)
    os.makedirs(target, exist_ok=True)
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
        "group: worker-%d/ held no message: removed, its topics and channels kept by %s",
        index,
        f"worker-{into}/",
    )


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
