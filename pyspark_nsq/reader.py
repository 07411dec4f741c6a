"""The streaming reader. Offsets are {"seq": n, "token", "batch", "leases"}: `seq` counts the
messages the driver-side reader handed to Spark, the rest is the executor-side plan (leased.py).

Where things run (see docs/spark.md): every method but `read` runs in one long-lived Python
process on the driver. Against the Go nsqd (and with executorReads off) that process holds the
nsqd connections and the messages, and `read` only unpacks the rows `partitions` put into each
`NsqPartition`. Against our nsqds the driver only plans and finishes: `read` pulls a
`LeasePartition` from its nsqd over HTTP (pull.py). Both kinds can be in one batch.

FIN after commit: `latestOffset(start, limit)` is called on every trigger with `start` = the
end of the last batch Spark committed, so everything up to `start` is FINed there; `commit(end)`
does the same (Spark calls it one batch late, and never for the final batch)."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from .addresses import Address
from .consumer import Consumer
from .http import channel_counts
from .leased import LeasedReader, new_token, offset
from .options import SourceOptions
from .planning import NsqPartition, driver_partitions, record_batch
from .pull import LeasePartition, describe, pull
from .schema import check_source_schema

log = logging.getLogger("pyspark_nsq")


def _trace(topic: str, event: str, **fields: Any) -> None:
    """Append one JSON line per reader call to $PYSPARK_NSQ_TRACE (debugging and tests)."""
    path = os.environ.get("PYSPARK_NSQ_TRACE")
    if path:
        line = json.dumps(
            {"pid": os.getpid(), "t": time.time(), "topic": topic, "event": event, **fields}
        )
        with open(path, "a") as f:
            f.write(line + "\n")


def _on_sigterm(cleanup: Callable[[], None], limit: float = 3.0) -> None:
    """On SIGTERM run `cleanup` for at most `limit` seconds, then end as SIGTERM would.

    The cleanup runs in its own thread: the signal may have interrupted the main thread
    inside a lock the cleanup needs (it then just times out). A second SIGTERM ends the
    process at once."""
    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)

    def handler(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        worker = threading.Thread(target=cleanup, name="nsq-sigterm", daemon=True)
        worker.start()
        worker.join(limit)
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            os.kill(os.getpid(), signal.SIGTERM)
        else:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)

    signal.signal(signal.SIGTERM, handler)


class NsqStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions, schema: StructType) -> None:
        check_source_schema(schema)
        self.opts = options
        self.schema = schema
        self._consumer: Consumer | None = None
        self._base = 0
        self._available_now = False
        self._target: int | None = None
        self._warned = -1e9
        self._token = new_token()  # for a checkpoint from before the executor-side reader
        self.leased = LeasedReader(options)

    # The planner pickles this object for the executors: never with connections or threads.
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_consumer"] = None
        return state

    def _started(self, *, rdy_open: bool = True) -> Consumer:
        if self._consumer is None:
            consumer = Consumer(self.opts)
            consumer.note_offset(self._base)
            consumer.start(rdy_open=rdy_open)
            self._consumer = consumer
            _on_sigterm(self._terminated)
        return self._consumer

    def _terminated(self) -> None:
        """Spark ends this process with SIGTERM when the query stops (stop() is not always
        called first): hand back at once what no offset range holds; the rest times out on
        nsqd."""
        _trace(self.opts.topic, "sigterm")
        self.stop()

    def initialOffset(self) -> dict[str, Any]:
        _trace(self.opts.topic, "initialOffset", token=self._token)
        return offset(0, self._token, 0, [])

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_messages_per_trigger:
            return ReadMaxRows(self.opts.max_messages_per_trigger)
        return ReadAllAvailable()

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: ReadLimit | None = None
    ) -> dict[str, Any]:
        start_seq = int((start or {}).get("seq", self._base))
        self._base = max(self._base, start_seq)
        consumer = self._started()
        full = consumer.window_full()
        fins = consumer.fin_through(start_seq)  # Spark has committed every batch up to start
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        if full and fins:  # the FINs reopen the window: let nsqd refill it for a full batch
            consumer.wait_for_refill(min(fins, max_rows or fins))
        if self._available_now:
            self._wait_available_now(consumer)
        elif not consumer.buffered() and self.opts.poll_timeout_ms:
            consumer.wait_for_data(self.opts.poll_timeout_ms / 1000)
        end = start_seq
        if not isinstance(limit, ReadMinRows) or consumer.buffered() >= limit.min_rows:
            end = consumer.take(start_seq, max_rows)
        leased_fin = self.leased.finish(start)  # the executor-side share of the committed batch
        rows_left = None if max_rows is None else max_rows - (end - start_seq)
        result, planned = self._next_offset(start or {}, end, rows_left, consumer)
        unknown = self._warn_unknown_topic(consumer)
        _trace(
            self.opts.topic,
            "latestOffset",
            start=start_seq,
            end=end,
            executor_nsqds=[str(p.tcp) for p in consumer.subs.executor_side()],
            planned=planned,
            leased_fin=leased_fin,
            limit=repr(limit),
            fin=fins,
            accepted=consumer.accepted,
            redelivered=consumer.redelivered,
            late_fins=consumer.late_fins,
            kept_from_lost=consumer.kept_from_lost,
            unknown_topic=len(unknown),
        )
        return result

    def _next_offset(
        self, start: dict[str, Any], end: int, rows_left: int | None, consumer: Consumer
    ) -> tuple[dict[str, Any], int]:
        """The end offset: the driver-side `end` and the executor-side plan; `start` itself
        when neither has anything (Spark then runs no batch)."""
        token = str(start.get("token") or self._token)
        batch = int(start.get("batch", 0))
        producers = consumer.subs.executor_side()
        plan: list[Any] = []
        if producers and (rows_left is None or rows_left > 0):
            plan = self.leased.plan(producers, rows_left)
            if not plan and self._available_now and self.leased.quota_left():
                idle = self.opts.available_now_idle_ms / 1000
                if self.leased.wait_available(producers, idle):
                    plan = self.leased.plan(producers, rows_left)
        planned = sum(n for entry in plan for n in entry[2])
        if not plan and end == int(start.get("seq", 0)) and "token" in start:
            return start, 0
        return offset(end, token, batch + 1 if plan else batch, plan), planned

    def _warn_unknown_topic(self, consumer: Consumer) -> list[str]:
        """Say so on triggers while the topic is missing somewhere it was looked for: at most
        every 10 s (a query with the default trigger asks every 10 ms when idle)."""
        unknown = consumer.subs.unknown_topic()
        now = time.monotonic()
        if unknown and now - self._warned >= 10.0:
            self._warned = now
            log.warning(
                "nsq source: topic %r does not exist on %s (not subscribed there; "
                "checked again every few seconds)",
                self.opts.topic,
                ", ".join(unknown),
            )
        return unknown

    def _wait_available_now(self, consumer: Consumer) -> None:
        """An unchanged offset ends an availableNow query: while fewer messages than the
        target have arrived, wait for more (up to availableNowIdleMs without any arriving)."""
        idle = self.opts.available_now_idle_ms / 1000
        while not consumer.buffered():
            if self._target is not None and consumer.accepted >= self._target:
                return
            if not consumer.wait_for_data(idle):
                if self._target is not None:
                    log.warning(
                        "availableNow: %d of %d messages arrived, ending the run",
                        consumer.accepted,
                        self._target,
                    )
                return

    def prepareForTriggerAvailableNow(self) -> None:
        """Target = topic depth + channel depth + in flight, summed over the nsqds (their
        /stats), counted while this reader is subscribed with RDY 0; no more than that many
        messages are read in this run (later ones are requeued at once)."""
        self._available_now = True
        consumer = self._started(rdy_open=False)
        _trace(self.opts.topic, "prepareForTriggerAvailableNow")
        target = 0
        try:
            for producer in consumer.subs.subscribed():
                target += self._available(producer.http)
            self._target = target
            consumer.limit_accepted(target)
        except (OSError, ValueError) as exc:
            log.warning(
                "availableNow: no channel counts from nsqd's /stats (%s); reading "
                "until nothing arrives for availableNowIdleMs",
                exc,
            )
            self._target = None
        _trace(self.opts.topic, "target", target=self._target)
        if self._target != 0:
            consumer.set_rdy_open(True)
        leased = self.leased.set_quota(consumer.subs.executor_side())
        _trace(self.opts.topic, "executor_target", target=leased)

    def _available(self, http: Address) -> int:
        """One nsqd's share of the target. While the topic still copies a backlog into a new
        channel, the copy in hand counts in neither depth (Go's nsqd): wait (up to 2 s) for
        the topic's depth to reach 0, and keep the largest sum seen."""
        deadline = time.monotonic() + 2.0
        best = 0
        while True:
            counts = channel_counts(
                http, self.opts.topic, self.opts.channel, self.opts.connect_timeout_ms / 1000
            )
            if counts is None:
                return best
            best = max(best, counts.topic_depth + counts.depth + counts.in_flight)
            if counts.topic_depth == 0 or time.monotonic() >= deadline:
                return best
            time.sleep(0.02)

    def reportLatestOffset(self) -> dict[str, int] | None:
        """Shown as the source's latestOffset in the query's progress, with how many places
        (nsqds, nsqlookupd) lack the topic."""
        if self._consumer is None:
            return None
        return {
            "seq": self._consumer.latest(),
            "unknownTopic": len(self._consumer.subs.unknown_topic()),
            "executorSideNsqds": len(self._consumer.subs.executor_side()),
        }

    def partitions(
        self, start: dict[str, Any], end: dict[str, Any]
    ) -> list[NsqPartition | LeasePartition]:
        leased = self.leased.partitions(end)
        s, e = int(start["seq"]), int(end["seq"])
        self._base = max(self._base, e)
        held = [] if self._consumer is None else self._consumer.rows(s, e)
        _trace(
            self.opts.topic,
            "partitions",
            start=s,
            end=e,
            held=len(held),
            leases=[describe(p) for p in leased],
        )
        return [*self._driver_partitions(held, s, e), *leased]

    def _driver_partitions(self, held: list[Any], s: int, e: int) -> list[NsqPartition]:
        if not held:  # e.g. a fresh process replaying the last uncommitted batch: its
            return []  # messages were never FINed and come back from nsqd
        if len(held) < e - s:
            log.warning(
                "batch (%d, %d]: %d of %d messages no longer held; nsqd redelivers the rest",
                s,
                e,
                len(held),
                e - s,
            )
        # The driver holds the bodies and ships them in the tasks (see planning.py).
        return list(
            driver_partitions(
                held,
                self.opts.topic,
                self.opts.channel,
                self.opts.num_partitions,
                self.opts.max_bytes_per_partition,
            )
        )

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from pyspark.sql.pandas.types import to_arrow_schema

        if isinstance(partition, LeasePartition):
            partition = pull(partition)
        assert isinstance(partition, NsqPartition)
        if not len(partition.ids):
            return
        yield record_batch(partition, to_arrow_schema(self.schema, timezone="UTC"))

    def commit(self, end: dict[str, Any]) -> None:
        fins = 0 if self._consumer is None else self._consumer.fin_through(int(end["seq"]))
        leased_fin = self.leased.finish(end)
        _trace(self.opts.topic, "commit", end=int(end["seq"]), fin=fins, leased_fin=leased_fin)

    def stop(self) -> None:
        consumer, self._consumer = self._consumer, None
        _trace(self.opts.topic, "stop")
        if consumer is not None:
            consumer.close()
            _trace(self.opts.topic, "stopped", requeued=consumer.requeued)
