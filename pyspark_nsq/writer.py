"""The sink: batch and streaming writers that MPUB each partition's rows from the executors.

Every task publishes its rows (the `body` column, binary or UTF-8 string; the topic from the
`topic` option, else the row's `topic` column) in MPUB commands of at most `batchSize`
messages and `maxBodyBytes` bytes, waiting for nsqd's OK on each. Spark calls commit or abort
on the driver once per write (per micro-batch when streaming) with what every task reported.
NSQ cannot take messages back, so the sink is at-least-once: a failed and retried task or
micro-batch publishes again what it had already published."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from protocol.v2 import NSQError, is_valid_name

from .addresses import Address
from .conn import Publisher
from .http import lookup
from .options import SinkOptions
from .schema import check_sink_schema

log = logging.getLogger("pyspark_nsq")


class SinkError(RuntimeError):
    """A row the sink cannot publish, or nsqd refused a publish."""


@dataclass
class NsqCommitMessage(WriterCommitMessage):
    partition_id: int
    nsqd: str
    published: int
    topics: dict[str, int] = field(default_factory=dict)


def _partition_id() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else 0


def _pick_nsqd(opts: SinkOptions, partition_id: int, topic_hint: str | None) -> Address:
    """Spread tasks over the nsqds: the listed ones, else the topic's producers known to
    nsqlookupd, else every nsqd node it knows."""
    candidates = list(opts.nsqd)
    if not candidates:
        timeout = opts.connect_timeout_ms / 1000
        producers = lookup(opts.lookupd, topic_hint, timeout) if topic_hint else []
        producers = producers or lookup(opts.lookupd, None, timeout)
        candidates = sorted(p.tcp for p in producers)
        if not candidates:
            raise SinkError(f"nsq sink: no nsqd registered with nsqlookupd {opts.lookupd}")
    return candidates[partition_id % len(candidates)]


class _Batcher:
    """Per-topic MPUB buffers flushed at batchSize messages or maxBodyBytes."""

    def __init__(self, publisher: Publisher, opts: SinkOptions) -> None:
        self.publisher = publisher
        self.opts = opts
        self.pending: dict[str, tuple[list[bytes], int]] = {}
        self.published: dict[str, int] = {}

    def add(self, topic: str, body: bytes) -> None:
        bodies, size = self.pending.get(topic) or ([], 4)
        if bodies and (
            len(bodies) >= self.opts.batch_size or size + 4 + len(body) > self.opts.max_body_bytes
        ):
            self._flush(topic, bodies)
            bodies, size = [], 4
        bodies.append(body)
        self.pending[topic] = (bodies, size + 4 + len(body))

    def _flush(self, topic: str, bodies: list[bytes]) -> None:
        self.publisher.mpub(topic, bodies)
        self.published[topic] = self.published.get(topic, 0) + len(bodies)

    def flush(self) -> None:
        for topic, (bodies, _) in list(self.pending.items()):
            if bodies:
                self._flush(topic, bodies)
        self.pending.clear()

    @property
    def total(self) -> int:
        return sum(self.published.values())


def _rows(batch: Any, topic_option: str | None) -> Iterator[tuple[str, bytes]]:
    bodies = batch.column("body").to_pylist()
    if topic_option is not None:
        topics: list[Any] = [topic_option] * len(bodies)
    else:
        topics = batch.column("topic").to_pylist()
    for topic, body in zip(topics, bodies, strict=True):
        if body is None:
            raise SinkError("nsq sink: a row has a null body")
        if isinstance(body, str):
            body = body.encode("utf-8")
        if not body:
            raise SinkError("nsq sink: a row has an empty body (nsqd refuses empty messages)")
        if topic is None:
            raise SinkError("nsq sink: a row has a null topic and option 'topic' is not set")
        yield topic, body


def publish(opts: SinkOptions, batches: Iterator[Any]) -> NsqCommitMessage:
    """One task: publish every row of its Arrow record batches."""
    partition_id = _partition_id()
    iterator = iter(batches)
    first = next(iterator, None)
    if first is None:
        return NsqCommitMessage(partition_id, "", 0)
    hint = opts.topic
    if hint is None and first.num_rows:
        hint = first.column("topic")[0].as_py()
    address = _pick_nsqd(opts, partition_id, hint)
    checked: set[str] = set()
    batcher: _Batcher | None = None
    try:
        with Publisher(address, timeout=max(30.0, opts.connect_timeout_ms / 1000)) as pub:
            batcher = _Batcher(pub, opts)
            for batch in _chain(first, iterator):
                for topic, body in _rows(batch, opts.topic):
                    if topic not in checked:
                        if not is_valid_name(topic.encode()):
                            raise SinkError(f"nsq sink: {topic!r} is not a valid topic name")
                        checked.add(topic)
                    batcher.add(topic, body)
            batcher.flush()
    except (OSError, NSQError, SinkError) as exc:
        done = batcher.total if batcher is not None else 0
        raise SinkError(
            f"nsq sink: task {partition_id} failed after publishing {done} messages "
            f"to nsqd {address}: {exc}"
        ) from exc
    return NsqCommitMessage(partition_id, str(address), batcher.total, dict(batcher.published))


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest


def _summary(messages: list[WriterCommitMessage | None]) -> tuple[int, dict[str, int]]:
    total, topics = 0, {}
    for m in messages:
        if isinstance(m, NsqCommitMessage):
            total += m.published
            for t, n in m.topics.items():
                topics[t] = topics.get(t, 0) + n
    return total, topics


class NsqWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_sink_schema(schema, topic_option=options.topic)
        self.opts = options

    def write(self, iterator: Iterator[Any]) -> NsqCommitMessage:
        return publish(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total, topics = _summary(messages)
        log.info("nsq sink: published %d messages %s", total, topics)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        total, _ = _summary(messages)
        log.warning(
            "nsq sink: write aborted; %d messages of finished tasks were already "
            "published and stay published (NSQ has no rollback)",
            total,
        )


class NsqStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_sink_schema(schema, topic_option=options.topic)
        self.opts = options

    def write(self, iterator: Iterator[Any]) -> NsqCommitMessage:
        return publish(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total, topics = _summary(messages)
        log.info("nsq sink: batch %d published %d messages %s", batchId, total, topics)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total, _ = _summary(messages)
        log.warning(
            "nsq sink: batch %d aborted; %d messages of finished tasks were already "
            "published; the retried batch publishes them again (at-least-once)",
            batchId,
            total,
        )
