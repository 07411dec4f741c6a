"""The disk behind a topic's or channel's memory queue: a go-diskqueue file queue holding
messages in nsqd's own record layout ([int64 ts][uint16 attempts][16-byte id][body])."""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain
from typing import Final

from protocol.v2.bodies import uniform_heads
from protocol.v2.message import MESSAGE_HEADER, MESSAGE_HEADER_SIZE

from ..engine.message import Message, records
from ..engine.policies.policy import ExpiringMessage
from ..engine.ports import UNBOUNDED
from .commit import GroupCommit
from .diskqueue import DiskQueue, DiskQueueError
from .expiries import ExpiryFile
from .health import Health, wrote

log = logging.getLogger("nsqd")

RECORD_SIZE: Final = struct.Struct(">i")  # go-diskqueue's frame: the record's size, then it
RECORD: Final = struct.Struct(">iqH")  # the frame's size and nsqd's header (timestamp, attempts)
PUT_MANY_CHUNK: Final = 1 << 20  # bytes framed into one write by put_many
_NO_EXPIRIES: Final[dict[bytes, int]] = {}  # a queue no message of which has its own TTL


def encode(msg: Message) -> bytes:
    return MESSAGE_HEADER.pack(msg.timestamp, msg.attempts) + msg.id + msg.body


def decode(data: bytes) -> Message:
    timestamp, attempts = MESSAGE_HEADER.unpack_from(data, 0)
    return Message(data[10:26], data[26:], timestamp, attempts)


def _fields(buf: bytes) -> Iterator[tuple[int, int, bytes, bytes]]:
    """(timestamp, attempts, id, body) of each record of a blob of whole framed records
    whose sizes the queue checked (each holds at least nsqd's header). Records of one size
    (most publishers') are cut by struct in C, a third of the Python loop's cost."""
    size = RECORD_SIZE.unpack_from(buf, 0)[0]
    stride = size + 4
    n, rest = divmod(len(buf), stride)
    if not rest and n > 1 and uniform_heads(buf, 0, len(buf), stride, 4):
        body = size - MESSAGE_HEADER_SIZE
        return struct.Struct(f">4xqH16s{body}s").iter_unpack(buf)
    return _each(buf)


def _each(buf: bytes) -> Iterator[tuple[int, int, bytes, bytes]]:
    unpack = RECORD.unpack_from
    p, end = 0, len(buf)
    while p < end:
        size, timestamp, attempts = unpack(buf, p)
        q = p + 4 + size
        yield timestamp, attempts, buf[p + 14 : p + 30], buf[p + 30 : q]
        p = q


class DiskOverflow:
    """Overflow store on disk. A record leaves the queue (its read position moves, and a sync
    persists that) only when get() hands it out, as in go-diskqueue: nothing is read ahead, so a
    crash or a clean restart loses or reorders nothing."""

    __slots__ = ("_count", "_expiries", "_health", "_max_body", "_sync_wanted", "closed", "queue")

    def __init__(
        self,
        name: str,
        data_path: str,
        max_bytes_per_file: int,
        max_msg_size: int,
        sync_every: int,
        sync_timeout: float,
        health: Health,
        sync_wanted: Callable[[], None],
        commit: GroupCommit | None = None,
    ) -> None:
        self._health = health
        self._sync_wanted = sync_wanted
        self._max_body = max_msg_size  # what put_run frames without the queue's check
        self.queue = DiskQueue(
            name,
            data_path,
            max_bytes_per_file,
            min_msg_size=MESSAGE_HEADER_SIZE,
            max_msg_size=max_msg_size + MESSAGE_HEADER_SIZE,
            sync_every=sync_every,
            sync_timeout=sync_timeout,
            logger=log,
            commit=commit,
            on_lost=self._lost,
        )
        self._count = max(self.queue.depth(), 0)
        self.closed = False
        ttl_path = os.path.join(data_path, f"{name}.diskqueue.ttl")
        # per-message TTLs of queued messages (ours): only while some message has one
        self._expiries = ExpiryFile(ttl_path) if os.path.exists(ttl_path) else None

    def put(self, msg: Message) -> None:
        try:
            self.queue.put(encode(msg))
        except DiskQueueError as exc:
            self._health.last_error = str(exc)
            raise
        wrote(self._health)
        expires = msg.expires
        if expires:
            if self._expiries is None:
                self._expiries = ExpiryFile(self.queue.name_path("ttl"))
            try:
                self._expiries.add(msg.id, expires)
            except OSError as exc:
                # the message is in its queue: refused now, its retry was stored twice (and
                # raised from a requeue, into the scanner, it stopped the daemon). Its TTL is
                # kept for this run; after a restart only its topic's or channel's applies.
                reason = f"DISKQUEUE({self.queue.name}) TTL write failed - {exc}"
                log.error("%s", reason)
                self._health.last_error = reason
        self._count += 1
        if self.queue.needs_sync():
            self._sync_wanted()  # --sync-every reached: fsync now, not at the next poll

    def put_run(self, ids: Sequence[bytes], bodies: Sequence[bytes], ts: int) -> None:
        """put() for the messages of one publish past memory, each record made from its id
        and body (one header for all: the same timestamp, attempts 0; no TTL) straight into
        one framed blob for the queue: no Message object and one copy per message."""
        if not ids:
            return
        if max(map(len, bodies)) > self._max_body:
            self._put_each(ids, bodies, ts)  # refused at the long one, as put() would
            return
        head = MESSAGE_HEADER.pack(ts, 0)
        size = RECORD_SIZE.pack
        parts: list[bytes] = []
        add = parts.extend
        for msg_id, body in zip(ids, bodies, strict=True):
            add((size(MESSAGE_HEADER_SIZE + len(body)), head, msg_id, body))
        self._put_framed(parts, len(ids))

    def put_many(self, msgs: Iterable[Message]) -> None:
        """put() for each of `msgs` in order (a clean stop's memory and in-flight messages):
        framed into one write per PUT_MANY_CHUNK bytes, not one a message (1M messages in
        memory took 5.8 s to stop, as long as the Go nsqd's one write each). A message with
        its own TTL, or a body past the queue's limit, goes through put() after what came
        before it; a refusal leaves the messages before its chunk stored."""
        frame, limit = RECORD.pack, self._max_body
        parts: list[bytes] = []
        size = count = 0
        for msg in msgs:
            body = msg.body
            if msg.expires or len(body) > limit:
                self._put_framed(parts, count)
                parts, size, count = [], 0, 0
                self.put(msg)
                continue
            parts += (frame(MESSAGE_HEADER_SIZE + len(body), msg.timestamp, msg.attempts),
                      msg.id, body)  # fmt: skip
            size += 30 + len(body)
            count += 1
            if size >= PUT_MANY_CHUNK:
                self._put_framed(parts, count)
                parts, size, count = [], 0, 0
        self._put_framed(parts, count)

    def _put_framed(self, parts: list[bytes], count: int) -> None:
        """`count` framed records (their parts) as one write to the queue, counted."""
        if not count:
            return
        try:
            self.queue.put_framed(b"".join(parts), count)
        except DiskQueueError as exc:
            self._health.last_error = str(exc)
            raise
        self._count += count
        self._stored()

    def _put_each(self, ids: Sequence[bytes], bodies: Sequence[bytes], ts: int) -> None:
        head = MESSAGE_HEADER.pack(ts, 0)
        put = self.queue.put
        for msg_id, body in zip(ids, bodies, strict=True):
            try:
                put(head + msg_id + body)
            except DiskQueueError as exc:
                self._health.last_error = str(exc)
                raise
            self._count += 1
        self._stored()

    def _stored(self) -> None:
        wrote(self._health)
        if self.queue.needs_sync():
            self._sync_wanted()

    def _lost(self, n: int, reason: str) -> None:
        """A group commit's write failed: its `n` buffered records are not in the queue."""
        self._count = max(self._count - n, 0)
        self._health.last_error = reason

    def get(self) -> Message | None:
        while True:
            data = self.queue.read()
            if data is None:
                self._count = 0  # a depth counter that was off after a crash ends here
                return None
            try:
                msg = decode(data)
            except Exception as exc:  # a record nsqd could not have written: skip it
                log.error("DISKQUEUE(%s): failed to decode message - %s", self.queue.name, exc)
                continue
            self._count = max(self._count - 1, 0)
            if self._expiries is not None:
                expires = self._expiries.pop(msg.id)
                if expires:
                    return ExpiringMessage(msg.id, msg.body, msg.timestamp, msg.attempts, expires)
            return msg

    def get_many(self, n: int, max_bytes: int = UNBOUNDED) -> list[Message]:
        """Up to n messages, read ahead in one go, none more once they hold `max_bytes` (at
        least one); fewer only then or when the queue ran dry."""
        if self._expiries is not None:
            return self._get_each(n, max_bytes)
        blobs = self.queue.read_framed(n, max_bytes)
        out = records(chain.from_iterable(map(_fields, blobs)))
        # fewer than n and not cut by bytes: the reader caught up, and a count that was off
        # after a crash ends here
        k = len(out)
        dry = k < n and sum(map(len, blobs)) - 4 * k < max_bytes
        self._count = 0 if dry else max(self._count - k, 0)
        return out

    def _get_each(self, n: int, max_bytes: int) -> list[Message]:
        out: list[Message] = []
        while len(out) < n and max_bytes > 0 and (msg := self.get()) is not None:
            out.append(msg)
            max_bytes -= len(msg.body)
        return out

    @property
    def has_expiries(self) -> bool:
        """Some message of this queue has its own TTL (the engine must check expiry)."""
        return self._expiries is not None and bool(self._expiries.expires)

    def sync_extra(self) -> None:
        """fsync what this queue keeps beside go-diskqueue's files (when the queue syncs)."""
        if self._expiries is not None:
            self._expiries.sync()

    def peek(self, n: int) -> list[Message]:
        """The next n messages get() would give, without taking them (HTTP peek, and the
        scan that takes expired messages off the head: each with its own TTL, as get() gives
        it, or neither would see that it expired)."""
        return self._decoded(self.queue.peek(n))

    def peek_chunks(self, n: int, chunk: int) -> Iterator[list[Message]]:
        """peek(n) in parts of up to `chunk`, each read from the disk when it is asked for
        (the read goes on from where the last part ended, or from the queue's head once reads
        have passed that); it ends early when the queue closes in between."""
        at: tuple[int, int] | None = None
        while n > 0:
            asked = min(n, chunk)
            try:
                records, at = self.queue.peek_at(asked, at)
            except DiskQueueError:  # closed meanwhile (its channel deleted, the daemon stopping)
                return
            if records:
                yield self._decoded(records)
            if len(records) < asked:
                return
            n -= asked

    def _decoded(self, records: list[bytes]) -> list[Message]:
        expiries = self._expiries.expires if self._expiries is not None else _NO_EXPIRIES
        msgs: list[Message] = []
        for data in records:
            try:
                msg = decode(data)
            except Exception:  # get() logs and skips it
                continue
            expires = expiries.get(msg.id)
            if expires:
                msg = ExpiringMessage(msg.id, msg.body, msg.timestamp, msg.attempts, expires)
            msgs.append(msg)
        return msgs

    def __len__(self) -> int:
        return self._count

    def clear(self) -> None:
        self.queue.empty()
        self._count = 0
        if self._expiries is not None:
            self._expiries.remove()
            self._expiries = None

    def close(self) -> None:
        self.closed = True
        self.queue.close()
        if self._expiries is not None:
            self._expiries.close()

    def delete(self) -> None:
        self._count = 0
        self.closed = True
        self.queue.delete()
        if self._expiries is not None:
            self._expiries.remove()
