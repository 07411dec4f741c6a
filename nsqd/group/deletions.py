"""Deletions a worker missed: a topic or channel deleted in the group while a worker was down
(killed, not yet started again) or gave no answer is written to that worker's
`worker-K.deleted` in the group's --data-path, and the worker makes it at its next start,
once its partition is loaded and before it reports its state to the supervisor. Without it
the worker's nsqd.dat, written before the deletion, brought the topic or channel back (with
the messages of its disk queue) and registered it again with nsqlookupd, where one nsqd's
deletion holds.

A line is [time_ns, topic, channel-or-null], the time taken before the deletion was asked of
anyone. A line older than the partition's nsqd.dat (its time is its snapshot's,
storage/metadata.py) is one the worker had already made, or served itself and written since:
it is skipped, so a topic created again after its deletion stays. A start that finds no line
newer than its nsqd.dat removes the file."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from ..log import log
from ..storage import metadata

if TYPE_CHECKING:
    from ..engine.broker import Broker

Deletion = tuple[int, str, str | None]  # when (time.time_ns()), topic, channel


def written_ns(data_path: str) -> int:
    """When the partition's nsqd.dat was last written: asked before the worker loads it."""
    return metadata.written_ns(data_path)


def file_of(group_path: str, index: int) -> str:
    return os.path.join(group_path, f"worker-{index}.deleted")


def record(path: str, deletion: Deletion) -> None:
    """Add one to a worker's file, synced: the deletion's answer says it holds."""
    line = json.dumps(list(deletion), separators=(",", ":")).encode() + b"\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, line)  # one write of a line with O_APPEND: peers' lines do not interleave
        os.fsync(fd)
    finally:
        os.close(fd)


def read(path: str) -> list[Deletion]:
    try:
        with open(path, "rb") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    found: list[Deletion] = []
    for line in lines:
        try:
            when, topic, channel = json.loads(line)
            found.append((int(when), str(topic), None if channel is None else str(channel)))
        except (ValueError, TypeError):  # a line cut by a crash mid-write: nothing was answered
            log.warning("group: %s: a line that is not a deletion: %r", path, line[:100])
    return found


def make(path: str, written: int, broker: Broker) -> None:
    """At a worker's start, after its partition is loaded: the deletions newer than its
    nsqd.dat as it found it (`written`, taken before the load, which writes the file again),
    made here; they are older than the nsqd.dat written next, and skipped then."""
    due = [d for d in read(path) if d[0] > written]
    for _, topic, channel in due:
        found = broker.topics.get(topic)
        if found is None:
            continue
        name = topic if channel is None else f"{topic}:{channel}"
        log.info("group: %s was deleted while this worker was down", name)
        if channel is None:
            broker.delete_topic(topic)
        else:
            found.delete_channel(channel)
    if not due:
        _remove(path)


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
