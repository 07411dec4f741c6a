"""The consumer fuzz's traffic (tests/group/test_consumer_fuzz.py): seeded steps against a
running group, and the invariants every delivery and every answer must keep.

A step publishes (PUB, MPUB, DPUB) into a seeded worker, lets a consumer act on what it holds
(FIN, REQ with or without a delay, TOUCH), changes a consumer's RDY (0, 1, n), closes a consumer
and connects another in a seeded worker, pauses or unpauses the channel or the topic, or only
reads. A consumer decides on each message as it comes: FIN at once, REQ, TOUCH and keep, keep,
or hold it past its msg_timeout (then FIN it late or never).

What NSQ does by design is allowed and is not a defect: a message not FIN'd within its timeout
comes again (attempts + 1, in any worker), a late FIN of it may be refused, a REQ'd message
comes before older ones (docs/workers.md, Differences), and what was in flight to a consumer
that left comes back at its timeout."""

from __future__ import annotations

import os
import random
import select
import time
from collections import Counter
from dataclasses import dataclass

from protocol.v2 import FrameType, decode_message
from protocol.v2.message import DecodedMessage
from tests.durability import helpers
from tests.ops.conftest import http_post

from .conftest import Group
from .fuzz_consumer import LAT, Consumer, Copy, Sent

TOPIC, CHANNEL = "fz", "c"
MSG_TIMEOUT = 2.0  # the group's --msg-timeout, s
MPUB_MAX = int(os.environ.get("NSQD_CONSUMER_FUZZ_MPUB", "20"))  # more: a heavier hunt
RDYS = (0, 0, 1, 1, 2, 5, 20, MPUB_MAX)  # a RDY step's counts
DEFERS = (20, 100, 300, 800)  # DPUB's and a REQ's delays, ms
STEPS = {  # a step's kind: its weight
    "publish": 30,
    "act": 22,
    "rdy": 12,
    "reconnect": 4,
    "pause_channel": 3,
    "pause_topic": 2,
    "read": 27,
}


@dataclass
class Published:
    sent: float  # when its publish was sent
    defer: float  # DPUB's delay, s
    closes: int  # consumers closed before it: a delivery to one of them may have gone unread


class Fuzz:
    def __init__(self, group: Group, seed: int, workers: int, disk_only: bool = False) -> None:
        self.group, self.rng, self.workers = group, random.Random(seed), workers
        self.seed, self.seq, self.closes = seed, 0, 0
        self.published: dict[bytes, Published] = {}
        self.ids: dict[bytes, bytes] = {}  # body -> its id
        self.last: dict[bytes, Copy] = {}  # id -> its latest delivery seen
        self.fins: dict[bytes, tuple[Consumer, float]] = {}  # id -> whose FIN succeeded, when
        self.consumers: list[Consumer] = []
        self.pubs = [self._client(k) for k in range(workers)]
        self.paused = {"channel": False, "topic": False}
        self.pause_epoch = 0
        self.topic_pauses: list[tuple[float, float]] = []  # (from, to) the topic was paused
        self.disk_only = disk_only  # --mem-queue-size=0
        self.draining = False
        self.counts: Counter[str] = Counter()  # what was exercised, for the test's summary
        self.node = 0  # worker 0's node id: worker k's message ids carry node + k
        self.errors: list[str] = []
        self._trace: list[str] = []  # a run's events (a few thousand)
        self.start = time.monotonic()

    def _client(self, k: int) -> helpers.Client:
        return helpers.Client((helpers.HOST, self.group.link(k)))

    def trace(self, line: str) -> None:
        self._trace.append(f"{time.monotonic() - self.start:7.3f} {line}")

    def violation(self, what: str) -> None:
        self.trace(f"VIOLATION {what}")
        self.errors.append(f"seed {self.seed} at {time.monotonic() - self.start:.3f}s: {what}")

    def report(self) -> str:
        """The first violations, the events before the first, and the last events."""
        first = next(i for i, line in enumerate(self._trace) if "VIOLATION" in line)
        before = "\n".join(self._trace[max(0, first - 80) : first + 1])
        last = "\n".join(self._trace[-40:])
        return "\n".join(self.errors[:10]) + f"\n-- before:\n{before}\n-- last:\n{last}"

    # -- consumers ------------------------------------------------------------------------

    def connect(self, k: int) -> Consumer:
        client = self._client(k)
        timeout = MSG_TIMEOUT
        if self.rng.random() < 0.3:
            timeout = self.rng.choice((1.5, 3.0))
            client.identify(msg_timeout=int(timeout * 1000))
        consumer = Consumer(self, k, timeout, client)
        client.sub(TOPIC, CHANNEL)
        self.consumers.append(consumer)
        consumer.rdy(self.rng.choice((1, 3, 10, 30)))
        return consumer

    def pump(self, seconds: float) -> None:
        """Read every consumer's frames for `seconds` (at least once), then mark what each
        sent since its last marker."""
        end = time.monotonic() + seconds
        while True:
            for consumer in list(self.consumers):
                consumer.mark()
            ready = [c for c in self.consumers if c.client.pending]
            wait = 0 if ready else max(0.0, end - time.monotonic())
            socks = {c.client.sock: c for c in self.consumers}
            for sock in select.select(list(socks), [], [], wait)[0]:
                self._fill(socks[sock])
            for consumer in list(self.consumers):
                self._frames(consumer)
            if time.monotonic() >= end:
                return

    def _fill(self, consumer: Consumer) -> None:
        try:
            consumer.client._fill(time.monotonic() + 1.0)
        except (helpers.ConnectionClosed, TimeoutError) as exc:
            self.violation(f"{consumer}: connection ended: {exc!r}")
            self.consumers.remove(consumer)

    def _frames(self, consumer: Consumer) -> None:
        pending = consumer.client.pending
        while pending:
            frame = pending.popleft()
            now = time.monotonic()
            if frame.frame_type == FrameType.MESSAGE:
                self.delivered(consumer, decode_message(frame.data), now)
            elif frame.frame_type == FrameType.ERROR:
                consumer.refused(frame.data.decode("utf-8", "replace"), now)
            else:
                self.violation(f"{consumer}: unexpected frame {frame}")

    def settle(self, consumer: Consumer, limit: float = 5.0) -> None:
        """Until every command `consumer` sent is answered for."""
        consumer.mark()
        end = time.monotonic() + limit
        while consumer.pending and consumer in self.consumers and time.monotonic() < end:
            self.pump(0.02)
        if consumer.pending and consumer in self.consumers:
            self.violation(f"{consumer}: its marker was not answered in {limit}s")

    # -- deliveries -----------------------------------------------------------------------

    def delivered(self, consumer: Consumer, msg: DecodedMessage, now: float) -> None:
        msg_id = msg.id
        self.counts["delivered"] += 1
        self.counts["crossed"] += (int(msg_id, 16) >> 12) & 0x3FF != self.node + consumer.worker
        self.counts["again"] += msg_id in self.last
        self.trace(f"{consumer} got {msg_id.decode()} a{msg.attempts} {msg.body.decode()}")
        published = self.published.get(msg.body)
        if published is None:
            self.violation(f"{consumer}: a message never published: {msg.body!r}")
            return
        if self.ids.setdefault(msg.body, msg_id) != msg_id:
            self.violation(f"{msg.body!r} came under two ids: {self.ids[msg.body]!r}, {msg_id!r}")
        self._check_again(consumer, msg, now, published)
        self._check_credit(consumer, msg_id, now)
        copy = Copy(msg_id, msg.attempts, now, consumer, consumer.timeout)
        self.last[msg_id] = copy
        consumer.held[msg_id] = copy
        if not consumer.closing:
            self.decide(consumer, copy, now)

    def _check_again(
        self, consumer: Consumer, msg: DecodedMessage, now: float, published: Published
    ) -> None:
        """Attempts only grow; a message comes again only after its REQ's delay or its
        timeout, never after its FIN; a deferred one not before its delay."""
        msg_id, prev = msg.id, self.last.get(msg.id)
        if prev is None:
            if now < published.sent + published.defer and self.defer_kept(published):
                self.violation(f"{msg_id!r} came before its DPUB delay")
            if msg.attempts != 1 and self.closes == published.closes:
                self.violation(f"{msg_id!r}: first delivery with attempts {msg.attempts}")
        elif msg.attempts <= prev.attempts:
            self.violation(f"{msg_id!r}: attempts {prev.attempts} then {msg.attempts}")
        elif prev.acted == "REQ" and now < prev.req_due:
            self.violation(f"{msg_id!r} came again {prev.req_due - now:.3f}s before its REQ delay")
        elif not prev.acted and now < prev.deadline_lo():
            where = f"{prev.owner} then {consumer}"
            self.violation(f"{msg_id!r} came again before its timeout ({where})")
        fin = self.fins.get(msg_id)
        if fin is not None and (fin[0] is consumer or now > fin[1] + LAT):
            self.violation(f"{msg_id!r} came again after its FIN ({fin[0]} then {consumer})")

    def _check_credit(self, consumer: Consumer, msg_id: bytes, now: float) -> None:
        held, rdy = consumer.held_in_flight(now), consumer.rdy_max()
        if held >= rdy:
            self.violation(f"{consumer}: got {msg_id!r} holding {held} in flight at RDY {rdy}")
        if self.paused["channel"] and consumer.stalled:
            self.violation(f"{consumer}: got {msg_id!r} while the channel is paused")

    def decide(self, consumer: Consumer, copy: Copy, now: float) -> None:
        """What a consumer does with a message as it comes."""
        if self.draining:
            consumer.act("FIN", copy, now)
            return
        r = self.rng.random()
        if r < 0.55:
            consumer.act("FIN", copy, now)
        elif r < 0.65:
            consumer.act("REQ", copy, now, self.rng.choice((0, 0, *DEFERS[:3])))
        elif r < 0.72:
            consumer.act("TOUCH", copy, now)
        elif r > 0.93:
            copy.late = True

    # -- answers --------------------------------------------------------------------------

    def succeeded(self, consumer: Consumer, sent: Sent, now: float) -> None:
        assert sent.copy is not None
        if sent.copy is not self.last.get(sent.key):  # a stale command took a later copy
            consumer.stale_ok.add(sent.key)
        self.counts[sent.verb] += 1
        if sent.verb != "FIN":
            return
        if sent.key in self.fins:
            first = self.fins[sent.key][0]
            self.violation(f"{sent.key!r} FIN'd twice: by {first} and by {consumer}")
        self.fins[sent.key] = (consumer, now)

    def refused(self, consumer: Consumer, sent: Sent, text: str, now: float) -> None:
        """A FIN, REQ or TOUCH refused: allowed for a copy that may have timed out, or one a
        stale command of this consumer took (a late FIN served after it came again)."""
        self.trace(f"{consumer} refused: {text}")
        self.counts[f"{sent.verb} refused"] += 1
        if sent.safe and sent.key not in consumer.stale_ok:
            self.violation(f"{consumer}: {text} (it held the message)")

    # -- steps ----------------------------------------------------------------------------

    def run(self, seconds: float, max_steps: int) -> None:
        """Seeded steps for `seconds` (`max_steps` at most), each followed by a short read."""
        kinds, weights = list(STEPS), list(STEPS.values())
        end = time.monotonic() + seconds
        for _ in range(max_steps):
            if time.monotonic() >= end:
                return
            kind = self.rng.choices(kinds, weights)[0]
            getattr(self, f"_{kind}")()
            self.pump(0.01)

    def publish(self, k: int, bodies: list[bytes], defer_ms: int = 0) -> None:
        now = time.monotonic()
        for body in bodies:
            self.published[body] = Published(now, defer_ms / 1000, self.closes)
        pub = self.pubs[k]
        if defer_ms:
            pub.send(helpers.command(f"DPUB {TOPIC} {defer_ms}", bodies[0]))
        elif len(bodies) > 1:
            pub.send(helpers.mpub_command(TOPIC, bodies))
        else:
            pub.send(helpers.command(f"PUB {TOPIC}", bodies[0]))
        pub.expect_ok()
        self.trace(f"w{k} published {len(bodies)} {bodies[0].decode()} defer {defer_ms}")

    def _publish(self) -> None:
        rng = self.rng
        kind = rng.choices(("PUB", "MPUB", "DPUB"), (4, 3, 2))[0]
        n = rng.randint(2, MPUB_MAX) if kind == "MPUB" else 1
        bodies = [b"%d-%06d" % (self.seed, self.seq + i) for i in range(n)]
        self.seq += n
        self.publish(rng.randrange(self.workers), bodies, rng.choice(DEFERS) * (kind == "DPUB"))

    def _act(self) -> None:
        """A consumer acts on some of what it kept: FIN, REQ or TOUCH what is surely still
        in flight to it; FIN late, or forget, what it held past its timeout."""
        consumer, now = self.rng.choice(self.consumers), time.monotonic()
        for copy in list(consumer.held.values()):
            if self.rng.random() < 0.5:
                continue
            if copy.late:
                if now > copy.recv + copy.timeout + LAT:
                    del consumer.held[copy.id]
                    if self.rng.random() < 0.5:
                        consumer.act("FIN", copy, now)  # refused or not: either is NSQ's
            elif copy.safe(now):
                verb = self.rng.choices(("FIN", "REQ", "TOUCH"), (6, 2, 2))[0]
                delay = self.rng.choice((0, *DEFERS[:3])) if verb == "REQ" else 0
                consumer.act(verb, copy, now, delay)
            else:
                consumer.act("FIN", copy, now)  # kept too long by a slow step: late

    def _rdy(self) -> None:
        self.rng.choice(self.consumers).rdy(self.rng.choice(RDYS))

    def _reconnect(self) -> None:
        """A consumer closes (what it sent answered first) with what it holds, and another
        connects to a seeded worker: what the first held comes back at its timeout."""
        if len(self.consumers) > 1 or self.rng.random() < 0.5:
            consumer = self.rng.choice(self.consumers)
            consumer.closing = True
            self.settle(consumer)
            if consumer in self.consumers:
                self.consumers.remove(consumer)
            consumer.client.close()
            self.closes += 1
            self.trace(f"{consumer} closed holding {len(consumer.held)}")
        if len(self.consumers) < 4:
            self.trace(f"{self.connect(self.rng.randrange(self.workers))} connected")

    def _pause_channel(self) -> None:
        self._pause("channel", f"topic={TOPIC}&channel={CHANNEL}")

    def _pause_topic(self) -> None:
        self._pause("topic", f"topic={TOPIC}")

    def _pause(self, what: str, query: str, to: bool | None = None) -> None:
        """Pause or unpause the channel or topic over the group's HTTP port; a channel's pause
        is confirmed in each consumer by its next marker, after which nothing may come."""
        pause = not self.paused[what] if to is None else to
        if pause == self.paused[what]:
            return
        verb = "pause" if pause else "unpause"
        if not pause:
            self.paused[what] = False
        asked = time.monotonic()
        status, body = http_post(f"http://127.0.0.1:{self.group.http}/{what}/{verb}?{query}")
        if what == "topic":
            self._topic_paused(pause, asked)
        self.trace(f"{what} {verb}: {status}")
        if status != 200:
            self.violation(f"{what} {verb}: {status} {body!r}")
            return
        if pause:
            self.paused[what] = True
        if what == "channel":
            self.pause_epoch += 1
            for consumer in self.consumers:
                consumer.stalled = False
                if pause:
                    consumer.note_pause(self.pause_epoch)

    def _topic_paused(self, pause: bool, asked: float) -> None:
        """Keep the topic's paused spans (from the pause's request to the unpause's answer)."""
        if pause:
            self.topic_pauses.append((asked, float("inf")))
        elif self.topic_pauses:
            self.topic_pauses[-1] = (self.topic_pauses[-1][0], time.monotonic())

    def defer_kept(self, published: Published) -> bool:
        """Whether a DPUB'd message must wait out its delay: with --mem-queue-size=0 one that
        met a paused topic goes to the topic's disk queue, which keeps no delay (Go nsqd
        1.3.0's topic.put does the same: the message comes at the unpause)."""
        if not self.disk_only:
            return True
        end = published.sent + published.defer
        return not any(start < end and published.sent < stop for start, stop in self.topic_pauses)

    def _read(self) -> None:
        self.pump(self.rng.choice((0.02, 0.05, 0.15)))

    # -- the end --------------------------------------------------------------------------

    def drain(self, limit: float) -> None:
        """Every consumer FINs what it holds and what comes, at RDY 50, until every published
        message was FIN'd (what timed out comes again within its timeout)."""
        self.draining = True
        self._pause("channel", f"topic={TOPIC}&channel={CHANNEL}", to=False)
        self._pause("topic", f"topic={TOPIC}", to=False)
        if not self.consumers:
            self.connect(self.rng.randrange(self.workers))
        now = time.monotonic()
        for consumer in self.consumers:
            for copy in list(consumer.held.values()):
                consumer.act("FIN", copy, now)
            consumer.rdy(50)
        end = time.monotonic() + limit
        while time.monotonic() < end and not self.finished():
            self.pump(0.05)
        for consumer in list(self.consumers):
            self.settle(consumer)
        self.pump(0.3)  # anything more that comes is a message FIN'd already

    def finished(self) -> bool:
        return len(self.fins) == len(self.published) and len(self.ids) == len(self.published)

    def unfinished(self) -> list[bytes]:
        """The published messages never delivered, or never FIN'd."""
        return [b for b in self.published if self.ids.get(b) not in self.fins]

    def close(self) -> None:
        for client in (*self.pubs, *(c.client for c in self.consumers)):
            client.close()
