"""nsqd.dat: the topics and channels (and their paused flags) that survive a restart.

Same file and JSON as nsqd, so the Go nsqd and this one can take turns on one --data-path.
Written atomically: temp file, fsync, rename."""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from protocol.v2 import is_valid_name

from ..log import log

if TYPE_CHECKING:
    from ..engine.topic import Topic

FILE_NAME = "nsqd.dat"


class MetadataError(Exception):
    pass


@dataclass(slots=True)
class TopicRecord:
    name: str
    paused: bool = False
    channels: list[tuple[str, bool]] = field(default_factory=list)


def snapshot(all_topics: Iterable[Topic], version: str) -> bytes:
    """The file's bytes for the daemon's current state (ephemeral ones left out)."""
    topics: list[dict[str, Any]] = []
    for topic in all_topics:
        if topic.ephemeral:
            continue
        channels = [
            {"name": c.name, "paused": c.paused} for c in topic.channels.values() if not c.ephemeral
        ]
        topics.append({"name": topic.name, "paused": topic.paused, "channels": channels or None})
    doc = {"topics": topics or None, "version": version}
    return json.dumps(doc, separators=(",", ":")).encode()


def write(data_path: str, data: bytes) -> None:
    path = os.path.join(data_path, FILE_NAME)
    tmp = f"{path}.{random.getrandbits(63)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def load(data_path: str) -> list[TopicRecord]:
    path = os.path.join(data_path, FILE_NAME)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return []
    try:
        doc = json.loads(raw)
        topics = doc.get("topics") or []
        records = []
        for t in topics:
            name = t["name"]
            if not is_valid_name(name.encode()):
                log.warning("skipping creation of invalid topic %s", name)
                continue
            rec = TopicRecord(name, bool(t.get("paused", False)))
            for ch in t.get("channels") or []:
                if not is_valid_name(ch["name"].encode()):
                    log.warning("skipping creation of invalid channel %s", ch["name"])
                    continue
                rec.channels.append((ch["name"], bool(ch.get("paused", False))))
            records.append(rec)
        return records
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise MetadataError(f"failed to parse metadata in {path} - {exc}") from exc
