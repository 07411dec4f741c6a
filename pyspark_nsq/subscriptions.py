"""Which nsqds the consumer subscribes to, and how many connections to each.

Listed nsqds (option `nsqd`) and the topic's producers found by nsqlookupd are merged into one
subscription per nsqd: a lookupd producer is skipped when it is a listed nsqd, under its own
address or the broadcast address that nsqd reports on /info. A listed nsqd without the topic
is not subscribed (SUB would create the topic): it is checked again every few seconds and
counted in `unknown_topic()`, as is an nsqlookupd that knows no producer of the topic.

Each nsqd gets ceil(maxInFlight / min(rdy, --max-rdy-count)) connections, sharing maxInFlight
(go-nsq's max_in_flight): nsqd's per-connection RDY cap is no ceiling on the batch size.

An nsqd that is ours (it answers `GET /channel/config`; the Go nsqd has no such route) gets no
connection at all unless option executorReads is off: the channel is created over HTTP (once
the topic exists) and the nsqd goes to `executor_side()`, read by the executors (leased.py)."""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from protocol.v2 import NSQError

from .addresses import Address
from .http import Producer, broadcast_address, leases_supported, lookup, post, topic_exists
from .link import Link

if TYPE_CHECKING:
    from .consumer import Consumer

log = logging.getLogger("pyspark_nsq")
_RECONNECT_EVERY = 2.0


def shares(budget: int, per_connection: int, connections: int | None) -> list[int]:
    """The RDY of each connection: `budget` spread evenly, none above `per_connection`."""
    n = connections or max(1, -(-budget // per_connection))
    base, extra = divmod(budget, n)
    return [max(1, min(per_connection, base + (i < extra))) for i in range(n)]


class Subscriptions:
    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.opts = consumer.opts
        self._lock = consumer._cond
        self._wanted: dict[Address, Producer] = {}
        self._listed: set[Address] = set()
        self._aliases: set[Address] = set()  # listed nsqds' broadcast addresses
        self._plans: dict[Address, list[int]] = {}  # nsqd -> RDY per connection index
        self._links: dict[Address, dict[int, Link]] = {}
        self._unknown: set[Address] = set()  # listed nsqds without the topic
        self.lookupd_unknown = False
        self.unknown_errors = 0  # times checked and found missing (for the trace)
        self._ours: dict[Address, bool] = {}  # answered the probe: ours (True) or Go's
        self._executor_side: dict[Address, Producer] = {}  # read by executors, no connection

    @property
    def _timeout(self) -> float:
        return self.opts.connect_timeout_ms / 1000

    # -- start --------------------------------------------------------------------------

    def start(self) -> None:
        for tcp, http in zip(self.opts.nsqd, self.opts.nsqd_http, strict=True):
            self._wanted[tcp] = Producer(tcp, http)
            self._listed.add(tcp)
            alias = broadcast_address(http, self._timeout)
            if alias is not None:
                self._aliases.add(alias)
        if self.opts.lookupd:
            self._discover(raise_errors=True)
        errors = []
        for producer in list(self._wanted.values()):
            try:
                self._subscribe(producer)
            except (OSError, NSQError) as exc:
                errors.append(f"{producer.tcp}: {exc}")
                log.warning("nsqd %s: %s", producer.tcp, exc)
        if self.opts.nsqd and not self.opts.lookupd and len(errors) == len(self._wanted):
            raise ConnectionError("could not subscribe to any nsqd: " + "; ".join(errors))

    def _discover(self, *, raise_errors: bool = False) -> None:
        try:
            producers = lookup(self.opts.lookupd, self.opts.topic, self._timeout)
        except ConnectionError as exc:
            if raise_errors:
                raise
            log.warning("%s", exc)
            return
        self.lookupd_unknown = not producers
        for producer in producers:
            if producer.tcp in self._aliases or producer.tcp in self._listed:
                continue  # a listed nsqd: one subscription, not two
            with self._lock:
                self._wanted.setdefault(producer.tcp, producer)

    def _subscribe(self, producer: Producer) -> None:
        """Open the nsqd's missing connections (all of them the first time)."""
        nsqd = producer.tcp
        if nsqd in self._executor_side:
            return
        if nsqd in self._listed and not self._topic_present(producer):
            return
        if self.opts.executor_reads and self._to_executors(producer):
            return
        with self._lock:
            plan = self._plans.get(nsqd)
            have = set(self._links.get(nsqd, {}))
        if plan is None:
            first = Link(self.consumer, producer, 0)
            first.connect()
            per = min(self.opts.rdy, first.max_rdy)
            plan = shares(self.opts.max_in_flight, per, self.opts.connections_per_nsqd)
            with self._lock:
                self._plans[nsqd] = plan
            self._start(first, plan[0])
            have.add(0)
        for index in range(len(plan)):
            if index in have or self.consumer._stop.is_set():
                continue
            link = Link(self.consumer, producer, index)
            link.connect()
            self._start(link, plan[index])

    def _to_executors(self, producer: Producer) -> bool:
        """True if the nsqd is ours (probed once; no answer: as before, driver-side): its
        channel is created (as SUB would) and it is read by the executors from now on."""
        ours = self._ours.get(producer.tcp)
        if ours is None:
            ours = leases_supported(producer.http, self._timeout)
            if ours is None:
                return False
            self._ours[producer.tcp] = ours
        if not ours:
            return False
        params = {"topic": self.opts.topic, "channel": self.opts.channel}
        try:
            post(producer.http, "/channel/create", params, self._timeout)
        except (OSError, ValueError) as exc:
            log.warning("nsqd %s: could not create the channel: %s", producer.http, exc)
            return True  # asked again on the next round
        with self._lock:
            self._executor_side[producer.tcp] = producer
        log.info("nsqd %s is ours: executors read from it over HTTP", producer.tcp)
        return True

    def executor_side(self) -> list[Producer]:
        """The nsqds the executors read from (ours, channel in place), in a stable order."""
        with self._lock:
            return sorted(self._executor_side.values(), key=lambda p: p.tcp)

    def _start(self, link: Link, rdy: int) -> None:
        with self._lock:
            self._links.setdefault(link.nsqd, {})[link.index] = link
            rdy_open = self.consumer._rdy_open and not self.consumer._paused
        link.start(rdy, rdy_open)

    def _topic_present(self, producer: Producer) -> bool:
        try:
            present = topic_exists(producer.http, self.opts.topic, self._timeout)
        except (OSError, ValueError) as exc:  # no HTTP API: subscribe (and create it)
            log.debug("nsqd %s: /stats: %s", producer.http, exc)
            present = True
        with self._lock:
            if present:
                self._unknown.discard(producer.tcp)
            else:
                self._unknown.add(producer.tcp)
                self.unknown_errors += 1
        return present

    # -- state --------------------------------------------------------------------------

    def drop(self, link: Link) -> None:
        """A connection closed (called with the consumer's lock held)."""
        links = self._links.get(link.nsqd)
        if links is not None and links.get(link.index) is link:
            del links[link.index]

    def live_links(self) -> list[Link]:
        with self._lock:
            return [link for links in self._links.values() for link in links.values()]

    def subscribed(self) -> list[Producer]:
        """The nsqds with at least one live connection, once each."""
        with self._lock:
            return [self._wanted[a] for a, links in self._links.items() if links]

    def all_links(self) -> list[Link]:
        return self.live_links()

    def unknown_topic(self) -> list[str]:
        """Where the topic is missing: listed nsqds, and 'nsqlookupd' if it knows no
        producer of the topic (and no listed nsqd has it)."""
        with self._lock:
            missing = sorted(str(a) for a in self._unknown)
            subscribed = any(self._links.values()) or bool(self._executor_side)
        if self.opts.lookupd and self.lookupd_unknown and not subscribed:
            missing.append("nsqlookupd " + ",".join(str(a) for a in self.opts.lookupd))
        return missing

    # -- maintenance --------------------------------------------------------------------

    _next_reconnect = 0.0
    _next_lookup = 0.0

    def maintain(self, stop: threading.Event) -> None:
        now = time.monotonic()
        if self.opts.lookupd and now >= self._next_lookup:
            self._next_lookup = now + self.opts.lookupd_poll_interval_ms / 1000
            self._discover()
        if now < self._next_reconnect:
            return
        self._next_reconnect = now + _RECONNECT_EVERY
        with self._lock:
            missing = [
                p
                for a, p in self._wanted.items()
                if a not in self._plans or len(self._links.get(a, {})) < len(self._plans[a])
            ]
        for producer in missing:
            if stop.is_set():
                return
            try:
                self._subscribe(producer)
            except (OSError, NSQError) as exc:
                log.debug("nsqd %s: %s", producer.tcp, exc)
