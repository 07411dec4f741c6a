"""Admin changes a worker missed: a topic or channel deleted or emptied in the group while a
worker was down (killed, not yet started again) is written to that worker's `worker-K.missed`
in the group's --data-path, and the worker makes it at its next start, once its partition is
loaded and before it reports its state to the supervisor. Without it the worker's nsqd.dat,
written before a deletion, brought the topic or channel back (with its disk queue's messages)
and registered it again with nsqlookupd, and an emptied queue kept that worker's messages,
where one nsqd's deletion or empty holds.

Who gets a line: for a deletion, each peer that did not answer it (one that served it late
wrote nsqd.dat since, below); for an empty, each peer that was surely not running when it was
asked (no link file, or its private HTTP refused the connection), whose messages were then all
on its disk: one that was slow to answer may have taken a publish since, which an empty at its
next start would drop.

A line is one record of the record log all our files use (storage/records.py: checksummed; a
damaged record is skipped with a log line); its payload is the JSON [time_ns, action, topic,
channel-or-null], the time taken before the change was made anywhere. A line older than the
partition's nsqd.dat as the worker found it (the file's time is its snapshot's,
storage/metadata.py; each start writes it at its load) is one an earlier start of the worker
already made, or that reached a worker that served it or started after it: it is skipped. A
start that finds no line to make removes the file."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..engine.api import Refused
from ..log import log
from ..storage import metadata, records

if TYPE_CHECKING:
    from ..engine.broker import Broker

Change = tuple[int, str, str, str | None]  # when (time.time_ns()), action, topic, channel
Peer = tuple[str, int]  # a peer's private HTTP address


def _delete(broker: Broker, topic: str, channel: str | None) -> None:
    if channel is None:
        broker.delete_topic(topic)
    else:
        broker.remove_channel(topic, channel)


# action -> (what it makes at the start, who gets the line: (did not answer, unreachable) ->
# the peers)
ACTIONS: dict[str, tuple[Callable[[Broker, str, str | None], None], bool]] = {
    "delete": (_delete, True),  # every peer that did not answer
    "empty": (lambda broker, topic, channel: broker.empty(topic, channel), False),  # unreachable
}


def written_ns(data_path: str) -> int:
    """When the partition's nsqd.dat was last written: asked before the worker loads it."""
    return metadata.written_ns(data_path)


def file_of(group_path: str, index: int) -> str:
    return os.path.join(group_path, f"worker-{index}.missed")


def missed_by(
    action: str, address: Peer | None, answered: set[Peer], unreachable: set[Peer]
) -> bool:
    """Whether the peer at `address` (None: no link file) gets a line for `action`."""
    if address is None or address in unreachable:
        return True
    return ACTIONS[action][1] and address not in answered


def record(path: str, change: Change) -> None:
    """Add one to a worker's file, synced: the change's answer says it holds."""
    payload = json.dumps(list(change), separators=(",", ":")).encode()
    flags = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC
    try:  # the file's header, once: by the peer that makes the file
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600)
        head = records.FILE_MAGIC
    except FileExistsError:
        fd, head = os.open(path, flags), b""
    try:
        # one write with O_APPEND: peers' records do not interleave
        os.write(fd, head + records.frame(payload))
        os.fsync(fd)
    finally:
        os.close(fd)


def read(path: str) -> list[Change]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    found: list[Change] = []
    for payload in records.read(data, path).payloads:  # damaged ones skipped, logged there
        try:
            when, action, topic, channel = json.loads(payload)
            ACTIONS[action]
            found.append((int(when), action, str(topic), None if channel is None else str(channel)))
        except (ValueError, TypeError, KeyError):  # intact but not ours to read: logged, left
            log.warning("group: %s: a record that is not a change: %r", path, payload[:100])
    return found


def make(path: str, written: int, broker: Broker) -> None:
    """At a worker's start, after its partition is loaded: the changes newer than its nsqd.dat
    as it found it (`written`, taken before the load, which writes the file again), made here
    in their order; they are older than the nsqd.dat written at this load, and skipped at the
    next start."""
    due = [change for change in read(path) if change[0] > written]
    for _, action, topic, channel in due:
        name = topic if channel is None else f"{topic}:{channel}"
        log.info("group: %s: %s made while this worker was down", name, action)
        try:
            ACTIONS[action][0](broker, topic, channel)
        except Refused as exc:  # not here (deleted since, or never published here)
            log.info("group: %s: %s not made - %s", name, action, exc)
    if not due:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
