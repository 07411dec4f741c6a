"""The driver-side consumer behind the stream reader: one subscribed connection per nsqd, a
buffer of received messages, and the sequence numbers Spark's offsets count.

Messages stay un-FINed (in flight on nsqd) until Spark says the batch holding them is durably
committed; a maintenance thread TOUCHes them before nsqd's msg_timeout runs out, reconnects
lost nsqds and polls nsqlookupd for new producers."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from protocol.v2 import ErrorCode, FrameType, NSQError, decode_message
from protocol.v2 import encoders as commands
from protocol.v2.frames import HEARTBEAT
from protocol.v2.message import DecodedMessage

from .addresses import Address
from .conn import USER_AGENT, Connection, ConnectionClosed, parse_error
from .http import Producer, lookup
from .options import SourceOptions

log = logging.getLogger("pyspark_nsq")
_RECONNECT_EVERY = 2.0


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


class Link:
    """One subscribed connection to one nsqd, read by its own thread."""

    def __init__(self, consumer: Consumer, producer: Producer) -> None:
        self.consumer = consumer
        self.producer = producer
        self.address = producer.tcp
        self.conn: Connection | None = None
        self.alive = False
        self.rdy = 0
        self.msg_timeout = consumer.opts.msg_timeout_ms / 1000
        self.thread: threading.Thread | None = None
        self.closing = False

    def open(self, rdy_open: bool) -> None:
        opts = self.consumer.opts
        conn, negotiated = self._connect(opts.msg_timeout_ms)
        try:
            max_rdy = int(negotiated.get("max_rdy_count") or opts.rdy)
            self.rdy = min(opts.rdy, max_rdy)
            self.msg_timeout = int(negotiated.get("msg_timeout") or opts.msg_timeout_ms) / 1000
            conn.request(commands.sub(opts.topic, opts.channel))
        except BaseException:
            conn.close()
            raise
        self.conn = conn
        self.alive = True
        self.thread = threading.Thread(target=self._run, name=f"nsq-{self.address}", daemon=True)
        self.thread.start()
        if rdy_open:
            self.send(commands.rdy(self.rdy))

    def _connect(self, msg_timeout_ms: int | None) -> tuple[Connection, dict]:
        """Connect and IDENTIFY; a msg_timeout above nsqd's --max-msg-timeout is lowered to
        that maximum (asked for on a second connection)."""
        settings: dict[str, object] = {
            "client_id": f"pyspark_nsq-{os.getpid()}",
            "hostname": socket.gethostname(),
            "user_agent": USER_AGENT,
            "feature_negotiation": True,
        }
        if msg_timeout_ms is not None:
            settings["msg_timeout"] = msg_timeout_ms
        conn = Connection(self.address, timeout=self.consumer.opts.connect_timeout_ms / 1000)
        try:
            return conn, conn.connect(settings)
        except NSQError as exc:
            if msg_timeout_ms is None or exc.code != ErrorCode.E_BAD_BODY:
                raise
        probe, negotiated = self._connect(None)
        probe.close()
        limit = int(negotiated.get("max_msg_timeout") or 0)
        if not limit or limit >= msg_timeout_ms:
            raise NSQError(ErrorCode.E_BAD_BODY, f"msgTimeoutMs {msg_timeout_ms} refused")
        log.warning(
            "%s: msgTimeoutMs %d is above nsqd's --max-msg-timeout, using %d ms",
            self.address,
            msg_timeout_ms,
            limit,
        )
        return self._connect(limit)

    def send(self, data: bytes) -> bool:
        conn = self.conn
        if conn is None or not self.alive:
            return False
        try:
            conn.send(data)
            return True
        except ConnectionClosed as exc:
            log.warning("%s: %s", self.address, exc)
            self.close()
            return False

    def _run(self) -> None:
        conn = self.conn
        assert conn is not None
        try:
            while self.alive:
                messages: list[DecodedMessage] = []
                for frame in conn.recv_frames():
                    if frame.frame_type == FrameType.MESSAGE:
                        messages.append(decode_message(frame.data))
                    elif frame.frame_type == FrameType.ERROR:
                        err = parse_error(frame.data)
                        log.log(
                            logging.DEBUG if not err.fatal else logging.WARNING,
                            "%s: %s",
                            self.address,
                            err,
                        )
                    elif frame.data == HEARTBEAT:
                        conn.send(commands.NOP)
                if messages:
                    self.consumer.on_messages(self, messages)
        except (ConnectionClosed, OSError, ValueError) as exc:
            if self.alive and not self.closing:
                log.warning("%s: connection lost: %s", self.address, exc)
        finally:
            self.close()

    def finish(self, timeout: float = 2.0) -> None:
        """Close gracefully: end our side, let nsqd read every command sent so far (a reset
        could drop them) and close its side, reading what it still sends meanwhile."""
        if self.conn is not None and self.alive:
            self.closing = True
            self.conn.shutdown_write()
            if self.thread is not None and self.thread is not threading.current_thread():
                self.thread.join(timeout)
        self.close()

    def close(self) -> None:
        was_alive, self.alive = self.alive, False
        if self.conn is not None:
            self.conn.close()
        if was_alive:
            self.consumer.on_link_closed(self)


class Consumer:
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._cond = threading.Condition()
        self._links: dict[Address, Link] = {}
        self._wanted: dict[Address, Producer] = {}
        self._buffer: deque[Held] = deque()
        self._assigned: dict[int, Held] = {}  # seq -> message, in seq order
        self._held: dict[tuple[Address, bytes], Held] = {}
        self._next_seq = 1
        self._rdy_open = True
        self._accept_limit: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # counters (this process only)
        self.accepted = 0  # distinct messages taken into the buffer
        self.redelivered = 0  # re-deliveries of a message still held (not emitted twice)
        self.finished = 0
        self.touched = 0
        self.requeued = 0

    # -- lifecycle ----------------------------------------------------------------------

    def start(self, *, rdy_open: bool = True) -> None:
        self._rdy_open = rdy_open
        producers = [
            Producer(t, h) for t, h in zip(self.opts.nsqd, self.opts.nsqd_http, strict=True)
        ]
        if self.opts.lookupd:
            producers += lookup(self.opts.lookupd, self.opts.topic, self._http_timeout)
        errors = []
        for producer in producers:
            try:
                self._open(producer)
            except (OSError, NSQError) as exc:
                errors.append(f"{producer.tcp}: {exc}")
                log.warning("nsqd %s: %s", producer.tcp, exc)
        if self.opts.nsqd and not self.opts.lookupd and len(errors) == len(producers):
            raise ConnectionError("could not subscribe to any nsqd: " + "; ".join(errors))
        self._thread = threading.Thread(target=self._maintain, name="nsq-maint", daemon=True)
        self._thread.start()

    @property
    def _http_timeout(self) -> float:
        return self.opts.connect_timeout_ms / 1000

    def _open(self, producer: Producer) -> None:
        self._wanted[producer.tcp] = producer
        link = Link(self, producer)
        link.open(self._rdy_open)
        with self._cond:
            if link.alive:
                self._links[producer.tcp] = link

    def close(self) -> None:
        """Requeue what no offset range holds yet, and disconnect. Messages in ranges Spark
        may not have committed stay in flight: nsqd redelivers them after msg_timeout."""
        self._stop.set()
        self.set_rdy_open(False)  # else nsqd refills the window the REQs free
        with self._cond:
            pending = list(self._buffer)
            self._buffer.clear()
            for held in pending:
                self._held.pop((held.link.address, held.id), None)
            links = list(self._links.values())
        self._send_grouped(pending, lambda h: commands.req(h.id, 0))
        self.requeued += len(pending)
        for link in links:
            link.finish()

    # -- called by the link threads -----------------------------------------------------

    def on_messages(self, link: Link, messages: list[DecodedMessage]) -> None:
        now = time.monotonic()
        requeue: list[bytes] = []
        with self._cond:
            for msg in messages:
                key = (link.address, msg.id)
                held = self._held.get(key)
                if held is not None:  # timed out on nsqd and came back: keep one copy
                    held.link, held.touched, held.attempts = link, now, msg.attempts
                    self.redelivered += 1
                    continue
                if self._stop.is_set() or (
                    self._accept_limit is not None and self.accepted >= self._accept_limit
                ):
                    requeue.append(msg.id)
                    continue
                held = Held(link, msg.id, msg.body, msg.timestamp, msg.attempts, now)
                self._held[key] = held
                self._buffer.append(held)
                self.accepted += 1
            self._cond.notify_all()
            links: list[Link] = []
            limit = self._accept_limit
            if self._rdy_open and limit is not None and self.accepted >= limit:
                self._rdy_open = False  # the run's quota is in: stop the flow
                links = list(self._links.values())
        for other in links:  # RDY 0 before the REQs, or nsqd would send them straight back
            other.send(commands.rdy(0))
        if requeue:
            self.requeued += len(requeue)
            link.send(b"".join(commands.req(i, 0) for i in requeue))

    def on_link_closed(self, link: Link) -> None:
        """Messages buffered from a lost connection come back after msg_timeout: forget them
        (ones already in an offset range are kept; their FIN will simply not be sent)."""
        with self._cond:
            kept = deque(h for h in self._buffer if h.link is not link)
            dropped = len(self._buffer) - len(kept)
            if dropped:
                for h in self._buffer:
                    if h.link is link:
                        self._held.pop((link.address, h.id), None)
                self._buffer = kept
                self.accepted -= dropped
            if self._links.get(link.address) is link:
                del self._links[link.address]
            self._cond.notify_all()

    # -- called by the stream reader ----------------------------------------------------

    def note_offset(self, seq: int) -> None:
        """Sequence numbers keep rising across restarts: never reuse one Spark has seen."""
        with self._cond:
            if self._next_seq <= seq:
                self._next_seq = seq + 1

    def take(self, start: int, max_rows: int | None) -> int:
        """The end of the range after `start`: held ranges first, then buffered messages."""
        with self._cond:
            self.note_offset(start)
            available = (self._next_seq - 1 - start) + len(self._buffer)
            end = start + (available if max_rows is None else min(available, max_rows))
            while self._next_seq <= end:
                held = self._buffer.popleft()
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
                self._held.pop((held.link.address, held.id), None)
        self._send_grouped(done, lambda h: commands.fin(h.id))
        self.finished += len(done)
        return len(done)

    def wait_for_data(self, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: bool(self._buffer), timeout)

    def window_full(self) -> bool:
        """Every connection's RDY window is used up by messages not yet FINed."""
        with self._cond:
            window = sum(link.rdy for link in self._links.values())
            return bool(window) and len(self._held) >= window

    def wait_for_refill(self, want: int, quiet: float = 0.03, limit: float = 0.5) -> None:
        """After FINs freed a full window, nsqd refills it: wait until `want` messages are
        buffered, or none arrived for `quiet` seconds, or `limit` passed (bigger batches)."""
        deadline = time.monotonic() + limit
        with self._cond:
            while len(self._buffer) < want:
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
            links = list(self._links.values())
        for link in links:
            link.send(commands.rdy(link.rdy if rdy_open else 0))

    def limit_accepted(self, limit: int | None) -> None:
        """Accept at most `limit` distinct messages in this run (Trigger.AvailableNow); later
        deliveries are requeued at once."""
        with self._cond:
            self._accept_limit = limit

    def links(self) -> list[Link]:
        with self._cond:
            return list(self._links.values())

    # -- maintenance --------------------------------------------------------------------

    def _send_grouped(self, held: Iterable[Held], encode) -> None:  # type: ignore[no-untyped-def]
        groups: dict[Link, list[bytes]] = {}
        for h in held:
            groups.setdefault(h.link, []).append(encode(h))
        for link, lines in groups.items():
            link.send(b"".join(lines))

    def _touch_due(self) -> None:
        now = time.monotonic()
        due: list[Held] = []
        with self._cond:
            for held in self._held.values():
                if now - held.touched >= held.link.msg_timeout * 0.5:
                    held.touched = now
                    due.append(held)
        if due:
            self._send_grouped(due, lambda h: commands.touch(h.id))
            self.touched += len(due)

    def _maintain(self) -> None:
        tick = max(0.05, min(1.0, self.opts.msg_timeout_ms / 1000 / 10))
        next_reconnect = next_lookup = time.monotonic()
        while not self._stop.wait(tick):
            self._touch_due()
            now = time.monotonic()
            if self.opts.lookupd and now >= next_lookup:
                next_lookup = now + self.opts.lookupd_poll_interval_ms / 1000
                try:
                    for producer in lookup(self.opts.lookupd, self.opts.topic, self._http_timeout):
                        self._wanted.setdefault(producer.tcp, producer)
                except ConnectionError as exc:
                    log.warning("%s", exc)
            if now >= next_reconnect:
                next_reconnect = now + _RECONNECT_EVERY
                with self._cond:
                    missing = [p for a, p in self._wanted.items() if a not in self._links]
                for producer in missing:
                    if self._stop.is_set():
                        return
                    try:
                        self._open(producer)
                        log.info("subscribed to nsqd %s", producer.tcp)
                    except (OSError, NSQError) as exc:
                        log.debug("nsqd %s: %s", producer.tcp, exc)
