"""Batches are capped by bytes as well as by count: 300 messages of 1 MiB (nsqd's default
--max-msg-size) go through the driver-side reader with default options and default Spark
settings (its tasks carry the bodies: a task above spark.rpc.message.maxSize, 128 MiB, would
fail the job), and a 5 MB message goes through the executor-side reader (our nsqd's default)
when the nsqd takes it (each task's receive is capped by bytes)."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spark_support import Proc, create_channel, our_nsqd, publish, read_trace
from test_spark_source import source

MIB = 1 << 20


@pytest.fixture
def big_nsqd() -> Iterator[Proc]:
    # The backlog beyond 100 messages goes to disk, not the daemon's memory; 5 MB messages.
    proc = our_nsqd(["--mem-queue-size=100", "--max-msg-size=5500000"])
    try:
        yield proc
    finally:
        proc.stop()


def body(i: int, size: int) -> bytes:
    head = b"%08d" % i
    return head + (hashlib.sha256(head).digest() * (size // 32 + 1))[: size - 8]


def run_to_end(
    spark: Any, nsqd: Proc, topic: str, tmp_path: Path, n: int, **options: str
) -> tuple[dict[str, int], list[int]]:
    """Stream with availableNow into foreachBatch; returns {head: length} and batch sizes."""
    seen: dict[str, int] = {}
    sizes: list[int] = []
    lock = threading.Lock()

    def sink(batch: Any, batch_id: int) -> None:
        rows = batch.selectExpr("substring(body, 1, 8) as head", "length(body) as n").collect()
        with lock:
            sizes.append(len(rows))
            for r in rows:
                seen[bytes(r.head).decode()] = seen.get(bytes(r.head).decode(), 0) + r.n

    try:
        query = (
            source(spark, nsqd, topic, availableNowIdleMs="5000", **options)
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        ended = query.awaitTermination(300)
        failure = query.exception()
    except Exception as exc:  # py4j's, when the JVM is gone: told plainly, not as a traceback
        # (formatting one whose objects talk to a dead gateway once crashed pytest itself)
        pytest.fail(f"the stream failed: {type(exc).__name__}: {exc}"[:4000], pytrace=False)
    assert ended, "the query did not end"
    assert failure is None, str(failure)[:4000]
    return seen, sizes


def explain(nsqd: Proc, trace_path: Path, topic: str, what: str) -> str:
    """What a failed run needs to be understood without rerunning it: the reader's trace
    (its target, what it accepted, requeued, kept from lost connections) and the nsqd's."""
    import json
    import urllib.request

    lines = [what, f"nsqd exit status: {nsqd.proc.poll()}"]
    try:
        url = f"http://{nsqd.http}/stats?format=json&topic={topic}"
        with urllib.request.urlopen(url, timeout=5) as response:
            lines.append(f"nsqd /stats: {response.read().decode()[:2000]}")
    except OSError as exc:
        lines.append(f"nsqd /stats: {exc}")
    events = [e for e in read_trace(trace_path, topic) if e["event"] != "partitions"]
    lines += [json.dumps(e) for e in events[:4] + events[-6:]]
    lines.append("nsqd log:\n" + nsqd.log_tail(40))
    return "\n".join(lines)


def test_many_1mib_messages_with_defaults(
    spark: Any, big_nsqd: Proc, topic: str, tmp_path: Path, trace_path: Path, report: Any
) -> None:
    # 300 MiB, not the 1,000 MiB this test once sent (20-40 s of the suite's time on 2 cores
    # for nothing more proven): still ~10 batches under the 32 MiB trigger cap, several
    # pauses of the reader at 64 MiB held (2 x maxBytesPerTrigger), a backlog on disk (beyond
    # --mem-queue-size=100), and above 2 x 128 MiB, so a batch of it, or a task of half of it
    # (one per core of local[2]), would exceed spark.rpc.message.maxSize without the caps.
    n = 300
    sent = [body(i, MIB) for i in range(n)]
    create_channel(big_nsqd, topic)
    publish(big_nsqd, topic, sent)
    seen, sizes = run_to_end(spark, big_nsqd, topic, tmp_path, n, executorReads="off")
    missing = sorted(set(range(n)) - {int(k) for k in seen})
    assert not missing, explain(big_nsqd, trace_path, topic, f"{len(missing)} missing")
    assert seen == {b[:8].decode(): MIB for b in sent}
    assert max(sizes) <= 32, "a batch above maxBytesPerTrigger (32 MiB)"
    planned = [e for e in read_trace(trace_path, topic) if e["event"] == "partitions"]
    assert sum(e["held"] for e in planned) == n
    report(
        f"{n} x 1 MiB with default options: {len(sizes)} batches of at most {max(sizes)} messages"
    )


def test_5mb_message(
    spark: Any, big_nsqd: Proc, topic: str, tmp_path: Path, trace_path: Path
) -> None:
    sent = [body(0, 5_000_000), body(1, 100), body(2, 4_000_000)]
    create_channel(big_nsqd, topic)
    publish(big_nsqd, topic, sent)
    seen, _ = run_to_end(spark, big_nsqd, topic, tmp_path, len(sent))
    assert seen == {b[:8].decode(): len(b) for b in sent}
    events = read_trace(trace_path, topic)
    leases = [lease for e in events if e["event"] == "partitions" for lease in e["leases"]]
    assert leases and all(lease["max_bytes"] == 8 * MIB for lease in leases)
