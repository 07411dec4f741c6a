"""What a worker's partition holds, as its next start loads it (--workers): the topics and
channels its nsqd.dat lists, and every disk queue in it that nsqd.dat does not list.

nsqd.dat is written by the metadata writer a moment after a topic or channel is made (its
PUB, or SUB, is answered first, as in nsqd): a worker killed in between left the queue's files
(its messages, with --mem-queue-size=0 or past memory) and an nsqd.dat without it. One nsqd
loads nsqd.dat alone, and those files waited for something to make the name again, then gave
their messages back. In a group that was a topic the group had answered for but did not hold:
a delete of it while that worker was down answered 404, and the topic came back, messages and
all, when a PUB or a channel's creation (made in every worker) made its name there again. So a
worker's start makes them (`adopt`, before the lines its peers wrote for it are made:
missed.py), and a peer asking whether a down worker holds a queue reads the same (`held`). A
queue whose messages were in memory alone left no file: a kill -9 loses it with them, as it
loses one nsqd's. No clock decides: a deleted queue's files go with it, so any left are a
queue's the worker held."""

from __future__ import annotations

import os
import re
from collections.abc import Collection
from typing import TYPE_CHECKING

from protocol.v2 import is_ephemeral, is_valid_name

from ..log import log
from ..storage import metadata

if TYPE_CHECKING:
    from ..engine.broker import Broker

Queue = tuple[str, str | None]  # topic, channel (None: the topic)
# go-diskqueue's files: data files and the metadata, named after the queue (topic[:channel])
_QUEUE_FILE = re.compile(r"(.+)\.diskqueue\.(?:\d{6,}|meta)\.dat")


def unlisted(data_path: str, known: Collection[Queue]) -> list[Queue]:
    """The queues that have disk queue files in `data_path` and that `known` lacks, each
    topic before its channels; a file no queue of ours can have is skipped."""
    found: set[Queue] = set()
    try:
        entries = os.scandir(data_path)
    except FileNotFoundError:
        return []
    with entries:
        for entry in entries:
            match = _QUEUE_FILE.fullmatch(entry.name)
            if match is None:
                continue
            topic, _, channel = match.group(1).partition(":")
            names = (topic, channel) if channel else (topic,)
            if not all(is_valid_name(n.encode()) and not is_ephemeral(n) for n in names):
                continue
            queue = (topic, channel or None)
            if queue not in known:
                found.add(queue)
    return sorted(found, key=lambda queue: (queue[0], queue[1] or ""))


def held(data_path: str) -> set[Queue]:
    """What a worker's next start loads from its partition: nsqd.dat's topics and channels
    and the disk queues it does not list (a channel's topic with it). MetadataError when
    nsqd.dat cannot be read: its start refuses it too."""
    listed: set[Queue] = set()
    for topic in metadata.load(data_path):
        listed.add((topic.name, None))
        listed.update((topic.name, channel) for channel, _ in topic.channels)
    found = listed.union(unlisted(data_path, listed))
    return found | {(topic, None) for topic, _ in found}


def adopt(broker: Broker, data_path: str) -> bool:
    """At a worker's start, once nsqd.dat is loaded: the disk queues it does not list made
    again (their queues reopen their files); whether there was any."""
    known = {(name, None) for name in broker.topics}
    known.update((t.name, c) for t in broker.topics.values() for c in t.channels)
    found = unlisted(data_path, known)
    with broker.restoring():  # restored state, not new: no peer is asked to make it
        for topic, channel in found:
            name = topic if channel is None else f"{topic}:{channel}"
            log.info("group: %s: in its disk queue's files, not in nsqd.dat - made again", name)
            made = broker.topic(topic)
            if channel is not None:
                made.get_channel(channel)
    return bool(found)
