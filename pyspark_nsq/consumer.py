"""The driver-side consumer behind the stream reader: a buffer of received messages, the
sequence numbers Spark's offsets count, and FIN after commit.

Messages stay un-FINed (in flight on nsqd) until Spark says the batch holding them is durably
committed. A message is identified by (nsqd, id): a redelivery of one still held is not
emitted twice, and one whose connection died keeps its place and goes into a batch (the nsqd
may have crashed and forgotten it). A message whose FIN could not be sent (its connection
died) is remembered for a while, so its redelivery is FINed and dropped, not emitted again.
Which nsqds and how many connections to each: `subscriptions.Subscriptions`."""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from protocol.v2 import encoders as commands
from protocol.v2.message import DecodedMessage

from .addresses import Address
from .link import Link
from .options import SourceOptions
from .subscriptions import Subscriptions

log = logging.getLogger("pyspark_nsq")
_ORPHANS_MAX = 200_000  # ids committed whose FIN could not be sent, remembered (oldest go)
_ORPHAN_TTL = 3600.0


@dataclass(slots=True, eq=False)
class Held:
    """A message received and not yet FINed. seq 0: buffered, not in any offset range yet."""

    link: Link
    id: bytes
    body: bytes
    timestamp_ns: int
    attempts: int
    touched: float
    seq: int = 0

    @property
    def nsqd(self) -> Address:
        return self.link.nsqd


class Consumer:
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._cond = threading.Condition()
        self.subs = Subscriptions(self)
        self._buffer: deque[Held] = deque()
        self._buffer_bytes = 0
        self._assigned: dict[int, Held] = {}  # seq -> message, in seq order
        self._held: dict[tuple[Address, bytes], Held] = {}
        self._held_bytes = 0
        self._orphans: OrderedDict[tuple[Address, bytes], float] = OrderedDict()
        self._next_seq = 1
        self._rdy_open = True
        self._paused = False  # held bytes above max_held_bytes: RDY 0 until FINs free room
        self._accept_limit: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # counters (this process only)
        self.accepted = 0  # distinct messages taken into the buffer
        self.redelivered = 0  # re-deliveries of a message still held (not emitted twice)
        self.late_fins = 0  # re-deliveries of a committed message whose FIN was lost
        self.kept_from_lost = 0  # messages kept when their connection died
        self.finished = 0
        self.touched = 0
        self.requeued = 0

    # -- lifecycle ----------------------------------------------------------------------

    def start(self, *, rdy_open: bool = True) -> None:
        self._rdy_open = rdy_open
        self.subs.start()
        self._thread = threading.Thread(target=self._maintain, name="nsq-maint", daemon=True)
        self._thread.start()

    @property
    def max_held_bytes(self) -> int:
        return 2 * self.opts.max_bytes_per_trigger

    def rdy_for(self, link: Link) -> int:
        return link.rdy if self._rdy_open and not self._paused else 0

    def close(self) -> None:
        """Requeue what no offset range holds yet, and disconnect. Messages in ranges Spark
        may not have committed stay in flight: nsqd redelivers them after msg_timeout."""
        self._stop.set()
        self.set_rdy_open(False)  # else nsqd refills the window the REQs free
        with self._cond:
            pending = [h for h in self._buffer if h.link.alive]
            self._buffer.clear()
            self._buffer_bytes = 0
            for held in pending:
                self._forget(held)
        self._send_grouped(pending, lambda h: commands.req(h.id, 0))
        self.requeued += len(pending)
        for link in self.subs.all_links():
            link.finish()

    # -- called by the link threads -----------------------------------------------------

    def on_messages(self, link: Link, messages: list[DecodedMessage]) -> None:
        now = time.monotonic()
        requeue: list[bytes] = []
        fin: list[bytes] = []
        with self._cond:
            for msg in messages:
                key = (link.nsqd, msg.id)
                held = self._held.get(key)
                if held is not None:  # timed out on nsqd (or nsqd restarted): keep one copy
                    held.link, held.touched, held.attempts = link, now, msg.attempts
                    self.redelivered += 1
                    continue
                if self._orphans.pop(key, None) is not None:  # committed; its FIN was lost
                    fin.append(msg.id)
                    self.late_fins += 1
                    continue
                if self._stop.is_set() or (
                    self._accept_limit is not None and self.accepted >= self._accept_limit
                ):
                    requeue.append(msg.id)
                    continue
                held = Held(link, msg.id, msg.body, msg.timestamp, msg.attempts, now)
                self._held[key] = held
                self._held_bytes += len(msg.body)
                self._buffer.append(held)
                self._buffer_bytes += len(msg.body)
                self.accepted += 1
            self._cond.notify_all()
            stop_flow = False
            limit = self._accept_limit
            if self._rdy_open and limit is not None and self.accepted >= limit:
                self._rdy_open = False  # the run's quota is in: stop the flow
                stop_flow = True
            if not self._paused and self._held_bytes >= self.max_held_bytes:
                self._paused = stop_flow = True
        if stop_flow:  # RDY 0 before the REQs, or nsqd would send them straight back
            self._send_rdy()
        if fin:
            link.send(b"".join(commands.fin(i) for i in fin))
        if requeue:
            self.requeued += len(requeue)
            link.send(b"".join(commands.req(i, 0) for i in requeue))

    def on_link_closed(self, link: Link) -> None:
        """The messages of a lost connection stay held and go into batches: an nsqd killed
        with SIGKILL forgets its in-flight messages, so nobody else has them. If the nsqd
        lives (or kept them), its redelivery is recognized by (nsqd, id)."""
        with self._cond:
            kept = sum(1 for h in self._held.values() if h.link is link)
            self.kept_from_lost += kept
            self.subs.drop(link)
            self._cond.notify_all()
        if kept and not link.closing:
            log.warning(
                "%s: connection lost holding %d messages; they stay in the stream "
                "(a redelivery of one is not emitted twice)",
                link.nsqd,
                kept,
            )

    # -- called by the stream reader ----------------------------------------------------

    def note_offset(self, seq: int) -> None:
        """Sequence numbers keep rising across restarts: never reuse one Spark has seen."""
        with self._cond:
            if self._next_seq <= seq:
                self._next_seq = seq + 1

    def take(self, start: int, max_rows: int | None) -> int:
        """The end of the range after `start`: held ranges first, then buffered messages, at
        most `max_rows` and maxBytesPerTrigger (at least one message)."""
        with self._cond:
            self.note_offset(start)
            end = self._next_seq - 1
            if max_rows is not None:
                end = min(end, start + max_rows)
            budget = self.opts.max_bytes_per_trigger
            while self._buffer and (max_rows is None or end - start < max_rows):
                size = len(self._buffer[0].body)
                if budget < size and end > start:
                    break
                budget -= size
                held = self._buffer.popleft()
                self._buffer_bytes -= size
                end += 1
                held.seq = self._next_seq
                self._assigned[held.seq] = held
                self._next_seq += 1
            return end

    def rows(self, start: int, end: int) -> list[Held]:
        """The messages of (start, end] still held; none for a range a previous run planned."""
        with self._cond:
            self.note_offset(end)
            return [h for s in range(start + 1, end + 1) if (h := self._assigned.get(s))]

    def fin_through(self, seq: int) -> int:
        with self._cond:
            done: list[Held] = []
            for s, held in self._assigned.items():
                if s > seq:
                    break
                done.append(held)
            for held in done:
                del self._assigned[held.seq]
                self._forget(held)
            resume = self._paused and self._held_bytes < self.max_held_bytes // 2
            if resume:
                self._paused = False
        self._send_grouped(done, lambda h: commands.fin(h.id), on_failure=self._orphan)
        if resume:
            self._send_rdy()
        self.finished += len(done)
        return len(done)

    def _forget(self, held: Held) -> None:
        if self._held.pop((held.nsqd, held.id), None) is not None:
            self._held_bytes -= len(held.body)

    def _orphan(self, unsent: list[Held]) -> None:
        """FINs that could not be sent: a redelivery of these is FINed and dropped."""
        now = time.monotonic()
        with self._cond:
            for held in unsent:
                self._orphans[(held.nsqd, held.id)] = now
            while self._orphans and (
                len(self._orphans) > _ORPHANS_MAX
                or now - next(iter(self._orphans.values())) > _ORPHAN_TTL
            ):
                self._orphans.popitem(last=False)

    def wait_for_data(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: bool(self._buffer), timeout)

    def window_full(self) -> bool:
        """Every connection's RDY window is used up by messages not yet FINed, or the held
        bytes paused the flow."""
        with self._cond:
            window = sum(link.rdy for link in self.subs.live_links())
            return self._paused or (bool(window) and len(self._held) >= window)

    def wait_for_refill(self, want: int, quiet: float = 0.1, limit: float = 1.0) -> None:
        """After FINs freed a full window, nsqd refills it: wait until `want` messages (or
        maxBytesPerTrigger) are buffered, or none arrived for `quiet` seconds, or `limit`
        passed: else batches alternate between big and small (the FINs of one batch free the
        window the next is made of). `quiet` is generous: on a busy machine the refill
        pauses."""
        deadline = time.monotonic() + limit
        with self._cond:
            while len(self._buffer) < want and self._buffer_bytes < self.opts.max_bytes_per_trigger:
                before = len(self._buffer)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self._cond.wait(min(quiet, remaining))
                if len(self._buffer) == before:
                    return

    def buffered(self) -> int:
        with self._cond:
            return len(self._buffer)

    def latest(self) -> int:
        with self._cond:
            return self._next_seq - 1 + len(self._buffer)

    def set_rdy_open(self, rdy_open: bool) -> None:
        with self._cond:
            self._rdy_open = rdy_open
        self._send_rdy()

    def _send_rdy(self) -> None:
        for link in self.subs.live_links():
            link.send(commands.rdy(self.rdy_for(link)))

    def limit_accepted(self, limit: int | None) -> None:
        """Accept at most `limit` distinct messages in this run (Trigger.AvailableNow); later
        deliveries are requeued at once."""
        with self._cond:
            self._accept_limit = limit

    def links(self) -> list[Link]:
        return self.subs.live_links()

    # -- maintenance --------------------------------------------------------------------

    def _send_grouped(
        self,
        held: Iterable[Held],
        encode: Callable[[Held], bytes],
        on_failure: Callable[[list[Held]], None] | None = None,
    ) -> None:
        groups: dict[Link, list[Held]] = {}
        for h in held:
            groups.setdefault(h.link, []).append(h)
        for link, items in groups.items():
            if not link.send(b"".join(encode(h) for h in items)) and on_failure is not None:
                on_failure(items)

    def _touch_due(self) -> None:
        now = time.monotonic()
        due: list[Held] = []
        with self._cond:
            for held in self._held.values():
                if held.link.alive and now - held.touched >= held.link.msg_timeout * 0.5:
                    held.touched = now
                    due.append(held)
        if due:
            self._send_grouped(due, lambda h: commands.touch(h.id))
            self.touched += len(due)

    def _maintain(self) -> None:
        tick = max(0.05, min(1.0, self.opts.msg_timeout_ms / 1000 / 10))
        while not self._stop.wait(tick):
            self._touch_due()
            self.subs.maintain(self._stop)
