"""nsqlookupd discovery (`/lookup`, `/nodes`) and nsqd channel counts (`/stats`) over HTTP.

Both daemons answer plain JSON in v1.x; older ones wrapped it as {"status_code", "data"}, which
is unwrapped too."""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .addresses import Address

log = logging.getLogger("pyspark_nsq")


@dataclass(frozen=True, slots=True)
class Producer:
    tcp: Address
    http: Address


def _unwrap(doc: Any) -> Any:
    if isinstance(doc, dict) and "status_code" in doc and "data" in doc:
        return doc["data"]
    return doc


def get_json(address: Address, path: str, params: dict[str, str], timeout: float) -> Any:
    """GET http://address/path?params as JSON; None on 404 (unknown topic or channel)."""
    url = f"http://{address}{path}?{urllib.parse.urlencode(params)}"
    request = urllib.request.Request(url, headers={"Accept": "application/vnd.nsq; version=1.0"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return _unwrap(json.loads(response.read()))
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def parse_producers(doc: Any) -> list[Producer]:
    """The `producers` of nsqlookupd's /lookup or /nodes answer: broadcast_address, tcp_port and
    http_port name where a client connects."""
    doc = _unwrap(doc)
    if not isinstance(doc, dict):
        return []
    found: list[Producer] = []
    for item in doc.get("producers") or []:
        host = item.get("broadcast_address") or item.get("hostname")
        tcp_port, http_port = item.get("tcp_port"), item.get("http_port")
        if not host or not isinstance(tcp_port, int) or not isinstance(http_port, int):
            continue
        found.append(Producer(Address(host, tcp_port), Address(host, http_port)))
    return found


def lookup(lookupds: Iterable[Address], topic: str | None, timeout: float) -> list[Producer]:
    """Producers of `topic` (or every nsqd node when topic is None) known to any nsqlookupd,
    deduplicated; an nsqlookupd that fails is logged and skipped."""
    lookupds = list(lookupds)
    seen: dict[Address, Producer] = {}
    errors: list[str] = []
    for lookupd in lookupds:
        try:
            if topic is None:
                doc = get_json(lookupd, "/nodes", {}, timeout)
            else:
                doc = get_json(lookupd, "/lookup", {"topic": topic}, timeout)
        except (OSError, ValueError) as exc:
            errors.append(f"{lookupd}: {exc}")
            log.warning("nsqlookupd %s: %s", lookupd, exc)
            continue
        for producer in parse_producers(doc):
            seen.setdefault(producer.tcp, producer)
    if errors and len(errors) == len(lookupds):
        raise ConnectionError("no nsqlookupd answered: " + "; ".join(errors))
    return list(seen.values())


@dataclass(frozen=True, slots=True)
class ChannelCounts:
    topic_depth: int  # not yet copied into the channels (a new channel's backlog, at first)
    depth: int
    in_flight: int
    deferred: int
    clients: int


def parse_channel_counts(doc: Any, topic: str, channel: str) -> ChannelCounts | None:
    """One channel's counts from nsqd's /stats?format=json (None if the channel is absent)."""
    doc = _unwrap(doc)
    for t in (doc or {}).get("topics") or []:
        if t.get("topic_name") != topic:
            continue
        for c in t.get("channels") or []:
            if c.get("channel_name") == channel:
                return ChannelCounts(
                    int(t.get("depth", 0)),
                    int(c.get("depth", 0)),
                    int(c.get("in_flight_count", 0)),
                    int(c.get("deferred_count", 0)),
                    int(c.get("client_count", 0)),
                )
    return None


def channel_counts(
    address: Address, topic: str, channel: str, timeout: float
) -> ChannelCounts | None:
    params = {"format": "json", "topic": topic, "channel": channel}
    return parse_channel_counts(get_json(address, "/stats", params, timeout), topic, channel)


def topic_exists(address: Address, topic: str, timeout: float) -> bool:
    """Whether nsqd (its HTTP address) has `topic`, from /stats (which lists topics, never
    creates one). Raises OSError/ValueError when nsqd's HTTP API does not answer."""
    doc = _unwrap(get_json(address, "/stats", {"format": "json", "topic": topic}, timeout))
    return any(t.get("topic_name") == topic for t in (doc or {}).get("topics") or [])


def broadcast_address(address: Address, timeout: float) -> Address | None:
    """The TCP address nsqd registers with nsqlookupd (broadcast_address:tcp_port from /info),
    or None when its HTTP API does not answer."""
    try:
        doc = _unwrap(get_json(address, "/info", {}, timeout))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    host, port = doc.get("broadcast_address"), doc.get("tcp_port")
    if not host or not isinstance(port, int):
        return None
    return Address(host, port)


def post(address: Address, path: str, params: dict[str, str], timeout: float) -> Any:
    """POST http://address/path?params with an empty body; the answer as JSON (or text)."""
    url = f"http://{address}{path}?{urllib.parse.urlencode(params)}"
    request = urllib.request.Request(url, data=b"", method="POST")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        raw = response.read()
    try:
        return _unwrap(json.loads(raw))
    except ValueError:
        return raw.decode("utf-8", "replace")


def leases_supported(address: Address, timeout: float) -> bool | None:
    """Whether the nsqd at this HTTP address is ours (it has `/channel/config`, `/channel/receive`
    and named leases: the executor-side reader), from `GET /channel/config` without arguments:
    ours answers 400 MISSING_ARG_TOPIC, the Go nsqd 404 (no such route). None: no answer."""
    request = urllib.request.Request(f"http://{address}/channel/config")
    try:
        with urllib.request.urlopen(request, timeout=timeout):
            return True
    except urllib.error.HTTPError as exc:
        return exc.code != 404
    except (OSError, ValueError) as exc:
        log.debug("nsqd %s: /channel/config: %s", address, exc)
        return None


def finish_lease(address: Address, topic: str, channel: str, lease: str, timeout: float) -> int:
    """FIN everything the named lease holds (`POST /message/fin?lease=`, no ids); how many."""
    doc = post(
        address, "/message/fin", {"topic": topic, "channel": channel, "lease": lease}, timeout
    )
    return int(doc.get("ok", 0)) if isinstance(doc, dict) else 0
