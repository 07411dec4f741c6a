"""The workers' /stats topics (snapshot's dicts) merged into one nsqd's: topics and channels
by name, depths, in-flight, deferred and counters summed, clients listed together. A peer's
pulling link is not a client: it is left out, and what it moved is counted once (in the
channel its topic put it in; the worker that took it over counts it not)."""

from __future__ import annotations

from typing import Any

from .identity import LINK_AGENT

_TOPIC_SUMS = ("depth", "backend_depth", "message_count", "message_bytes")
_CHANNEL_SUMS = (
    "depth",
    "backend_depth",
    "in_flight_count",
    "deferred_count",
    "message_count",
    "requeue_count",
    "timeout_count",
    "client_count",
)


def merge(docs: list[list[dict[str, Any]] | None]) -> list[dict[str, Any]] | None:
    """Topics (snapshot's dicts) of every worker as one nsqd's: None (nsqd's null) when no
    worker has the topic a filter names, [] when one has it but not the channel named."""
    if all(doc is None for doc in docs):
        return None
    topics: dict[str, dict[str, Any]] = {}
    for doc in docs:
        for topic in doc or ():
            _drop_links(topic)
            into = topics.get(topic["topic_name"])
            if into is None:
                topics[topic["topic_name"]] = topic
                continue
            _fold(into, topic, _TOPIC_SUMS)
            channels = {c["channel_name"]: c for c in into["channels"]}
            for channel in topic["channels"]:
                have = channels.get(channel["channel_name"])
                if have is None:
                    channels[channel["channel_name"]] = channel
                    continue
                _fold(have, channel, _CHANNEL_SUMS)
                if channel["clients"] is not None:
                    have["clients"] = (have["clients"] or []) + channel["clients"]
            into["channels"] = [channels[name] for name in sorted(channels)]
    return [topics[name] for name in sorted(topics)]


def _fold(into: dict[str, Any], part: dict[str, Any], sums: tuple[str, ...]) -> None:
    """One worker's topic or channel added into the group's: its counts summed, paused if
    paused in any worker."""
    for key in sums:
        into[key] += part[key]
    into["paused"] = into["paused"] or part["paused"]


def _drop_links(topic: dict[str, Any]) -> None:
    """A peer's link is no client. (What it moved on is counted where it was taken: the
    receiving worker leaves it out of its channel's message_count, pull.Pull.move.)"""
    for channel in topic["channels"]:
        links = [c for c in channel["clients"] or () if c.get("user_agent") == LINK_AGENT]
        if not links:
            continue
        channel["clients"] = [c for c in channel["clients"] if c.get("user_agent") != LINK_AGENT]
        channel["client_count"] -= len(links)
