"""Topic and channel attributes on disk (policies nsqd does not have), in a file of our own
beside nsqd.dat: `trio-nsqd.attributes`, one JSON line and a line with its CRC-32.

Written whole (atomic.py: temporary file, fsync, rename, fsync of the directory) before the
HTTP answer that changed an attribute: a set attribute survives a kill -9 and a power loss.
Absent while no queue has attributes, so a data path that never used them is nsqd's own. A
damaged file is logged and skipped: the daemon starts with no attributes rather than not at
all."""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..engine.policies.attributes import ChannelAttributes, TopicAttributes, from_json
from ..log import log
from .atomic import replace_file

if TYPE_CHECKING:
    from ..engine.broker import Broker
    from ..engine.topic import Topic

FILENAME = "trio-nsqd.attributes"


def snapshot(topics: Iterable[Topic]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for topic in topics:
        if topic.ephemeral:
            continue
        channels = {
            name: c.attributes.to_json()
            for name, c in topic.channels.items()
            if not c.ephemeral and not c.attributes.off
        }
        if channels or not topic.attributes.off:
            out[topic.name] = {"attributes": topic.attributes.to_json(), "channels": channels}
    return {"version": 1, "topics": out}


def write(data_path: str, doc: dict[str, Any]) -> None:
    path = os.path.join(data_path, FILENAME)
    if not doc["topics"]:
        if os.path.exists(path):
            os.unlink(path)
        return
    line = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
    replace_file(path, line + b"\n" + b"%08x\n" % zlib.crc32(line))


def read(data_path: str) -> dict[str, Any]:
    """The stored document, or an empty one when there is none or it is damaged."""
    path = os.path.join(data_path, FILENAME)
    empty: dict[str, Any] = {"version": 1, "topics": {}}
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return empty
    except OSError as exc:  # unreadable: started without, as when damaged (not refused)
        log.error("ATTRIBUTES: cannot read %s, starting without attributes - %s", path, exc)
        return empty
    try:
        line, crc, _ = raw.split(b"\n")
        if int(crc, 16) != zlib.crc32(line):
            raise ValueError("checksum mismatch")
        doc = json.loads(line)
        if not isinstance(doc.get("topics"), dict):
            raise ValueError("no topics")
        return doc
    except (ValueError, UnicodeDecodeError) as exc:
        log.error("ATTRIBUTES: %s is damaged, starting without attributes - %s", path, exc)
        return empty


def restore(broker: Broker, doc: dict[str, Any]) -> None:
    for name, entry in doc["topics"].items():
        try:
            topic_attrs = from_json(TopicAttributes, entry.get("attributes", {}))
            channels = {
                c: from_json(ChannelAttributes, a) for c, a in entry.get("channels", {}).items()
            }
            broker.restore_attributes(name, topic_attrs, channels)
        except (AttributeError, TypeError, ValueError) as exc:
            log.error("ATTRIBUTES: topic %r skipped, damaged record - %s", name, exc)
