"""GET /metrics: the numbers of /stats in Prometheus' text exposition format (version 0.0.4).

Reads the snapshot /stats is built from (metrics.snapshot), so both report the same state; the
counters that /stats does not show (dead-lettered, expired, dropped: queue policies) are read
from the topic and channel objects with a default of 0, as they exist only with policies.

Every metric is prefixed `nsq_`; cumulative counts are `_total` counters, levels are gauges, the
end-to-end latency quantiles a summary in seconds. Labels: `topic`, `channel`, and for clients
`client_id`, `hostname` and `remote_address` (unique per connection). Label values are escaped
as the format says (backslash, double quote, newline)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ..version import VERSION

if TYPE_CHECKING:
    from ..engine.broker import Broker

CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"

# name -> (type, help); the order here is the order of the families in the output
FAMILIES: dict[str, tuple[str, str]] = {
    "nsq_build_info": ("gauge", "Always 1; the label version is nsqd's version."),
    "nsq_healthy": ("gauge", "1 when /ping answers OK, 0 after a store error (NOK)."),
    "nsq_start_time_seconds": ("gauge", "When the daemon started, in unix seconds."),
    "nsq_uptime_seconds": ("gauge", "Seconds since the daemon started."),
    "nsq_client_connections": ("gauge", "TCP clients connected (producers and consumers)."),
    "nsq_memory_heap_objects": ("gauge", "Allocated memory blocks (Python's heap objects)."),
    "nsq_memory_heap_in_use_bytes": ("gauge", "Resident memory of the process."),
    "nsq_memory_gc_pause_usec_100": ("gauge", "Longest of the last 256 collector pauses."),
    "nsq_memory_gc_pause_usec_99": ("gauge", "99th percentile of the last 256 collector pauses."),
    "nsq_memory_gc_pause_usec_95": ("gauge", "95th percentile of the last 256 collector pauses."),
    "nsq_memory_gc_runs_total": ("counter", "Collector runs."),
    "nsq_topic_depth": ("gauge", "Messages queued in the topic (memory and disk)."),
    "nsq_topic_backend_depth": ("gauge", "Messages queued in the topic's disk queue."),
    "nsq_topic_channels": ("gauge", "Channels of the topic."),
    "nsq_topic_paused": ("gauge", "1 when the topic is paused."),
    "nsq_topic_messages_total": ("counter", "Messages published to the topic."),
    "nsq_topic_message_bytes_total": ("counter", "Bytes of message bodies published."),
    "nsq_topic_expired_total": ("counter", "Messages dropped from the topic by their TTL."),
    "nsq_topic_dropped_total": ("counter", "Messages dropped from the topic by max_depth."),
    "nsq_topic_duplicates_total": (
        "counter",
        "Publishes acknowledged and not stored: their dedupe_key was seen in --dedupe-window.",
    ),
    "nsq_topic_e2e_processing_latency_seconds": (
        "summary",
        "Publish to FIN over the latency window, all channels (_count: samples in the window).",
    ),
    "nsq_channel_depth": ("gauge", "Messages queued in the channel (memory and disk)."),
    "nsq_channel_backend_depth": ("gauge", "Messages queued in the channel's disk queue."),
    "nsq_channel_in_flight": ("gauge", "Messages sent and not yet finished or requeued."),
    "nsq_channel_deferred": ("gauge", "Messages deferred (DPUB, REQ with a delay)."),
    "nsq_channel_clients": ("gauge", "Consumers subscribed to the channel."),
    "nsq_channel_paused": ("gauge", "1 when the channel is paused."),
    "nsq_channel_messages_total": ("counter", "Messages put into the channel."),
    "nsq_channel_requeued_total": ("counter", "Messages requeued (REQ)."),
    "nsq_channel_timed_out_total": ("counter", "In-flight messages that timed out."),
    "nsq_channel_dead_lettered_total": ("counter", "Messages moved to the dead-letter topic."),
    "nsq_channel_expired_total": ("counter", "Messages dropped from the channel by their TTL."),
    "nsq_channel_dropped_total": ("counter", "Messages dropped from the channel by max_depth."),
    "nsq_channel_e2e_processing_latency_seconds": (
        "summary",
        "Publish to FIN over the latency window (_count: samples in the window).",
    ),
    "nsq_client_ready": ("gauge", "The consumer's RDY count."),
    "nsq_client_in_flight": ("gauge", "Messages in flight to the consumer."),
    "nsq_client_messages_total": ("counter", "Messages sent to the consumer."),
    "nsq_client_finished_total": ("counter", "Messages the consumer finished."),
    "nsq_client_requeued_total": ("counter", "Messages the consumer requeued."),
    "nsq_client_published_total": ("counter", "Messages the producer published to the topic."),
    "nsq_resp_list_length": ("gauge", "Elements of a Redis list key (--resp-address; ours)."),
}

MEMORY = {
    "heap_objects": "nsq_memory_heap_objects",
    "heap_in_use_bytes": "nsq_memory_heap_in_use_bytes",
    "gc_pause_usec_100": "nsq_memory_gc_pause_usec_100",
    "gc_pause_usec_99": "nsq_memory_gc_pause_usec_99",
    "gc_pause_usec_95": "nsq_memory_gc_pause_usec_95",
    "gc_total_runs": "nsq_memory_gc_runs_total",
}
TOPIC_KEYS = {
    "depth": "nsq_topic_depth",
    "backend_depth": "nsq_topic_backend_depth",
    "paused": "nsq_topic_paused",
    "message_count": "nsq_topic_messages_total",
    "message_bytes": "nsq_topic_message_bytes_total",
}
TOPIC_EXTRA = {
    "expired_count": "nsq_topic_expired_total",
    "dropped_count": "nsq_topic_dropped_total",
}
CHANNEL_KEYS = {
    "depth": "nsq_channel_depth",
    "backend_depth": "nsq_channel_backend_depth",
    "in_flight_count": "nsq_channel_in_flight",
    "deferred_count": "nsq_channel_deferred",
    "client_count": "nsq_channel_clients",
    "paused": "nsq_channel_paused",
    "message_count": "nsq_channel_messages_total",
    "requeue_count": "nsq_channel_requeued_total",
    "timeout_count": "nsq_channel_timed_out_total",
}
CHANNEL_EXTRA = {
    "dead_letter_count": "nsq_channel_dead_lettered_total",
    "expired_count": "nsq_channel_expired_total",
    "dropped_count": "nsq_channel_dropped_total",
}
CLIENT_KEYS = {
    "ready_count": "nsq_client_ready",
    "in_flight_count": "nsq_client_in_flight",
    "message_count": "nsq_client_messages_total",
    "finish_count": "nsq_client_finished_total",
    "requeue_count": "nsq_client_requeued_total",
}

Labels = tuple[tuple[str, str], ...]


def escape_label(value: str) -> str:
    """A label value as the format wants it: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def format_value(value: float | int | bool) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def label_text(labels: Labels) -> str:
    """`{k="v",...}`, or nothing without labels."""
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{escape_label(v)}"' for k, v in labels) + "}"


class Exposition:
    """Samples gathered per family, written out family by family (the format wants each
    family's samples together, after its # HELP and # TYPE lines)."""

    def __init__(self) -> None:
        self.samples: dict[str, list[str]] = {name: [] for name in FAMILIES}

    def add(
        self, family: str, value: float | int | bool, labels: str = "", suffix: str = ""
    ) -> None:
        """One sample; `labels` as label_text renders them (once per topic, channel...)."""
        self.samples[family].append(f"{family}{suffix}{labels} {format_value(value)}")

    def render(self) -> bytes:
        out: list[str] = []
        for name, lines in self.samples.items():
            if not lines:
                continue
            kind, text = FAMILIES[name]
            out.append(f"# HELP {name} {text}")
            out.append(f"# TYPE {name} {kind}")
            out.extend(lines)
        out.append("")
        # names from a client's IDENTIFY may hold undecodable bytes: the format wants UTF-8
        return "\n".join(out).encode("utf-8", "replace")


def _summary(expo: Exposition, family: str, e2e: dict[str, Any], labels: Labels) -> None:
    """nsqd's e2e_processing_latency (ns) as a summary in seconds; nothing when the daemon
    keeps no latency stream (no --e2e-processing-latency-percentile)."""
    percentiles = e2e.get("percentiles")
    if percentiles is None:
        return
    for p in percentiles:
        quantile = ("quantile", format_value(float(p["quantile"])))
        expo.add(family, p["value"] / 1e9, label_text((*labels, quantile)))
    expo.add(family, e2e["count"], label_text(labels), "_count")


def _node(
    expo: Exposition, broker: Broker, memory: dict[str, int] | None, counted: dict[str, Any]
) -> None:
    expo.add("nsq_build_info", 1, label_text((("version", VERSION),)))
    expo.add("nsq_healthy", counted["health"] == "OK")
    expo.add("nsq_start_time_seconds", broker.start_time)
    expo.add("nsq_uptime_seconds", max(0.0, round(time.time() - broker.start_time, 3)))
    expo.add("nsq_client_connections", counted["clients"])
    for key, family in MEMORY.items():
        if memory is not None and key in memory:
            expo.add(family, memory[key])


def _who(client: dict[str, Any]) -> Labels:
    """A client's labels: remote_address makes them unique per connection."""
    return tuple(
        (key, str(client.get(key, ""))) for key in ("client_id", "hostname", "remote_address")
    )


def _clients(expo: Exposition, clients: list[dict[str, Any]] | None, labels: Labels) -> None:
    for c in clients or ():
        who = label_text((*labels, *_who(c)))
        for key, family in CLIENT_KEYS.items():
            if key in c:
                expo.add(family, c[key], who)


def _producers(expo: Exposition, producers: list[dict[str, Any]] | None) -> None:
    for p in producers or ():
        who = _who(p)
        for count in p.get("pub_counts") or ():
            labels = label_text((("topic", count["topic"]), *who))
            expo.add("nsq_client_published_total", count["count"], labels)


def _topics(
    expo: Exposition, broker: Broker, topics: list[dict[str, Any]] | None, counts: dict[str, Any]
) -> None:
    dedupe = broker.deduper is not None  # every worker of a group has the same options
    for t in topics or ():
        name = t["topic_name"]
        extra = counts["topics"].get(name) or {"channels": {}}
        labels: Labels = (("topic", name),)
        text = label_text(labels)
        for key, family in TOPIC_KEYS.items():
            expo.add(family, t[key], text)
        # every channel, whatever the channel filter, as the topic's latency merges them all
        expo.add("nsq_topic_channels", len(extra.get("channel_names", ())), text)
        for key, family in TOPIC_EXTRA.items():
            expo.add(family, extra.get(key, 0), text)
        if dedupe:  # only with --dedupe-window
            expo.add("nsq_topic_duplicates_total", extra.get("duplicates", 0), text)
        _summary(
            expo, "nsq_topic_e2e_processing_latency_seconds", t["e2e_processing_latency"], labels
        )
        for c in t["channels"]:
            cextra = extra["channels"].get(c["channel_name"]) or {}
            clabels = (*labels, ("channel", c["channel_name"]))
            ctext = label_text(clabels)
            for key, family in CHANNEL_KEYS.items():
                expo.add(family, c[key], ctext)
            for key, family in CHANNEL_EXTRA.items():
                expo.add(family, cextra.get(key, 0), ctext)
            _summary(
                expo,
                "nsq_channel_e2e_processing_latency_seconds",
                c["e2e_processing_latency"],
                clabels,
            )
            _clients(expo, c["clients"], clabels)


def counts(
    broker: Broker,
    topics: list[dict[str, Any]] | None,
    lists: dict[str, int] | None,
    clients: int | None = None,
) -> dict[str, Any]:
    """What /metrics gives beside the snapshot, of this process: the counters /stats does not
    show (policies' dead-lettered, expired, dropped; --dedupe-window's duplicates), each
    snapshot topic's channels, the client connections (`clients`, else every client)
    and the Redis front-end's list lengths (None: it is off). Plain data, so that a group's
    workers can add theirs up (add_counts)."""
    deduper = broker.deduper
    duplicates = deduper.duplicates_by_topic if deduper is not None else {}
    found: dict[str, Any] = {}
    for t in topics or ():
        name = t["topic_name"]
        topic = broker.topics.get(name)
        extra: dict[str, Any] = {key: getattr(topic, key, 0) for key in TOPIC_EXTRA}
        extra["channel_names"] = list(topic.channels) if topic is not None else []
        extra["duplicates"] = duplicates.get(name, 0)
        extra["channels"] = {
            c["channel_name"]: {
                key: getattr(topic.channels.get(c["channel_name"]), key, 0) for key in CHANNEL_EXTRA
            }
            for c in t["channels"]
            if topic is not None
        }
        found[name] = extra
    return {
        "health": broker.health,
        "clients": len(broker.clients) if clients is None else clients,
        "topics": found,
        "lists": lists,
    }


def add_counts(into: dict[str, Any], other: dict[str, Any]) -> None:
    """Another process's counts (a group's peer) added to `into`: counters summed, channels
    by name (a durable channel is made in every worker), health the worst."""
    if other["health"] != "OK":
        into["health"] = other["health"]
    into["clients"] += other["clients"]
    if other["lists"] is not None:
        into["lists"] = {**(into["lists"] or {}), **other["lists"]}
    for name, extra in other["topics"].items():
        have = into["topics"].setdefault(name, {"channels": {}})
        for key in (*TOPIC_EXTRA, "duplicates"):
            have[key] = have.get(key, 0) + extra.get(key, 0)
        names = have.setdefault("channel_names", [])
        names += [n for n in extra["channel_names"] if n not in names]
        for cname, cextra in extra["channels"].items():
            chave = have["channels"].setdefault(cname, {})
            for key in CHANNEL_EXTRA:
                chave[key] = chave.get(key, 0) + cextra.get(key, 0)


def metrics_text(
    broker: Broker,
    topics: list[dict[str, Any]] | None,
    producers: list[dict[str, Any]] | None,
    memory: dict[str, int] | None,
    counted: dict[str, Any],
) -> bytes:
    """The exposition of one snapshot (metrics.snapshot.snapshot's topics and producers), the
    memory figures (None: left out) and what `counts` gives beside them."""
    expo = Exposition()
    _node(expo, broker, memory, counted)
    _topics(expo, broker, topics, counted)
    _producers(expo, producers)
    for key, length in sorted((counted["lists"] or {}).items()):
        expo.add("nsq_resp_list_length", length, label_text((("key", key),)))
    return expo.render()
