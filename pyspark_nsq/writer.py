"""The sink: batch and streaming writers that publish each partition's rows from the executors.

Every task publishes its rows (the `body` column, binary or UTF-8 string; the topic from the
`topic` option, else the row's `topic` column) in chunks of at most `batchSize` messages and
`maxBodyBytes` bytes, waiting for nsqd's answer to each. Against our nsqd with
--dedupe-window a task sends HTTP /mpub with a de-duplication key per row (senders.py,
sinkkeys.py), so a retried task or micro-batch publishes nothing twice; against any other
nsqd (or with option dedupe=off) it sends TCP MPUB, and NSQ cannot take messages back: a
retried task or micro-batch publishes again what it had already published (at-least-once).
Spark calls commit or abort on the driver once per write (per micro-batch when streaming)
with what every task reported."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
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
from .http import lookup
from .httppub import PublishRefused
from .options import SinkOptions
from .schema import check_sink_schema
from .senders import Sender, SinkError, Target, open_sender
from .sinkkeys import new_write_key, task_prefix

log = logging.getLogger("pyspark_nsq")

__all__ = ["NsqStreamWriter", "NsqWriter", "SinkError"]


@dataclass
class NsqCommitMessage(WriterCommitMessage):
    partition_id: int
    nsqd: str
    published: int
    topics: dict[str, int] = field(default_factory=dict)
    mode: str = ""  # "tcp" or "http+keys"


def _partition_id() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else 0


def _pick_nsqd(opts: SinkOptions, partition_id: int, topic_hint: str | None) -> Target:
    """Spread tasks over the nsqds: the listed ones, else the topic's producers known to
    nsqlookupd, else every nsqd node it knows."""
    http = opts.nsqd_http or tuple(Address(a.host, a.port + 1) for a in opts.nsqd)
    candidates = [Target(tcp, h) for tcp, h in zip(opts.nsqd, http, strict=True)]
    if not candidates:
        timeout = opts.connect_timeout_ms / 1000
        producers = lookup(opts.lookupd, topic_hint, timeout) if topic_hint else []
        producers = producers or lookup(opts.lookupd, None, timeout)
        candidates = sorted((Target(p.tcp, p.http) for p in producers), key=lambda t: t.tcp)
        if not candidates:
            raise SinkError(f"nsq sink: no nsqd registered with nsqlookupd {opts.lookupd}")
    return candidates[partition_id % len(candidates)]


class _Batcher:
    """Per-topic buffers flushed at batchSize messages or maxBodyBytes (MPUB's and binary
    /mpub's size: a 4-byte count, then a 4-byte size per message)."""

    def __init__(self, sender: Sender, opts: SinkOptions) -> None:
        self.sender = sender
        self.opts = opts
        self.pending: dict[str, tuple[list[bytes], int]] = {}
        self.published: dict[str, int] = {}  # also each topic's next row index

    def add(self, topic: str, body: bytes) -> None:
        bodies, size = self.pending.get(topic) or ([], 4)
        if bodies and (
            len(bodies) >= self.opts.batch_size or size + 4 + len(body) > self.opts.max_body_bytes
        ):
            self._flush(topic, bodies)
            bodies, size = [], 4
        bodies.append(body)
        self.pending[topic] = (bodies, size + 4 + len(body))

    def _flush(self, topic: str, bodies: Sequence[bytes]) -> None:
        done = self.published.get(topic, 0)
        self.sender.send(topic, bodies, done)
        self.published[topic] = done + len(bodies)

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


def publish(
    opts: SinkOptions, batches: Iterator[Any], *, streaming: bool, write_key: str | None
) -> NsqCommitMessage:
    """One task: publish every row of its Arrow record batches."""
    partition_id = _partition_id()
    iterator = iter(batches)
    first = next(iterator, None)
    if first is None:
        return NsqCommitMessage(partition_id, "", 0)
    hint = opts.topic
    if hint is None and first.num_rows:
        hint = first.column("topic")[0].as_py()
    target = _pick_nsqd(opts, partition_id, hint)
    batcher: _Batcher | None = None
    mode = f"dedupe={opts.dedupe}"  # until the sender is chosen
    try:
        prefix = task_prefix(streaming, opts.dedupe_key, write_key)
        sender = open_sender(opts, target, prefix)
        mode = sender.mode
        try:
            batcher = _Batcher(sender, opts)
            _publish_rows(batcher, _chain(first, iterator), opts.topic)
            batcher.flush()
        finally:
            sender.close()
    except (OSError, NSQError, SinkError, PublishRefused) as exc:
        done = batcher.total if batcher is not None else 0
        raise SinkError(
            f"nsq sink: task {partition_id} failed after publishing {done} messages "
            f"to nsqd {target.tcp} ({mode}): {exc}"
        ) from exc
    published = dict(batcher.published)
    return NsqCommitMessage(partition_id, str(target.tcp), batcher.total, published, mode)


def _publish_rows(batcher: _Batcher, batches: Iterator[Any], topic_option: str | None) -> None:
    checked: set[str] = set()
    for batch in batches:
        for topic, body in _rows(batch, topic_option):
            if topic not in checked:
                if not is_valid_name(topic.encode()):
                    raise SinkError(f"nsq sink: {topic!r} is not a valid topic name")
                checked.add(topic)
            batcher.add(topic, body)


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


def _modes(messages: list[WriterCommitMessage | None]) -> str:
    modes = {m.mode for m in messages if isinstance(m, NsqCommitMessage) and m.mode}
    return "/".join(sorted(modes)) or "-"


class NsqWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_sink_schema(schema, topic_option=options.topic)
        self.opts = options
        # Made once on the driver, so every attempt of a task gets the same keys.
        self.write_key = new_write_key()

    def write(self, iterator: Iterator[Any]) -> NsqCommitMessage:
        return publish(self.opts, iterator, streaming=False, write_key=self.write_key)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        total, topics = _summary(messages)
        log.info("nsq sink: published %d messages %s (%s)", total, topics, _modes(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        total, _ = _summary(messages)
        log.warning(
            "nsq sink: write aborted; %d messages of finished tasks were already "
            "published and stay published (NSQ has no rollback; with de-duplication keys a "
            "retried write publishes them once)",
            total,
        )


class NsqStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_sink_schema(schema, topic_option=options.topic)
        self.opts = options

    def write(self, iterator: Iterator[Any]) -> NsqCommitMessage:
        return publish(self.opts, iterator, streaming=True, write_key=None)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total, topics = _summary(messages)
        log.info(
            "nsq sink: batch %d published %d messages %s (%s)",
            batchId,
            total,
            topics,
            _modes(messages),
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        total, _ = _summary(messages)
        log.warning(
            "nsq sink: batch %d aborted; %d messages of finished tasks were already "
            "published; the retried batch publishes them again over TCP (at-least-once), "
            "and not again with de-duplication keys",
            batchId,
            total,
        )
