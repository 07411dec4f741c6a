"""The sink's exactly-once path (issue 18 item 7): against our nsqd with --dedupe-window a task
publishes over HTTP with a key per row, so a retried task, a retried micro-batch after an nsqd
restart, or a write run again with the same dedupeKey publishes nothing twice; against the Go
nsqd it publishes over TCP (at-least-once)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spark_support import (
    Proc,
    drain,
    go_nsqd,
    our_nsqd,
    spark_env,
    start_process,
    wait_until,
)

HERE = Path(__file__).resolve().parent
CHUNK = 10  # the sink's rows per request in files_to_nsq (its batchSize)


@pytest.fixture(scope="module")
def dnsqd() -> Iterator[Proc]:
    daemon = our_nsqd(["--dedupe-window=10m"])
    try:
        yield daemon
    finally:
        daemon.stop()


def depth(nsqd: Proc, topic: str) -> int:
    """Messages the topic holds (no channel yet: nothing has left it)."""
    url = f"http://{nsqd.http}/stats?format=json&topic={topic}"
    with urllib.request.urlopen(url, timeout=5) as response:
        doc = json.loads(response.read())
    return sum(t["depth"] for t in doc.get("topics") or [] if t["topic_name"] == topic)


def write(df: Any, nsqd: Proc, topic: str, **options: str) -> None:
    writer = df.write.format("nsq").option("nsqd", nsqd.tcp).option("nsqdHttp", nsqd.http)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.option("topic", topic).mode("append").save()


def write_twice_and_again(spark: Any, nsqd: Proc, topic: str, n: int, partitions: int) -> Any:
    """A write of n rows, the same write split differently (nothing more stored), another
    load (n more); returns the rows."""
    df = spark.range(0, n, 1, partitions).selectExpr("concat('row-', id) as body")
    write(df, nsqd, topic, dedupeKey="load-1")
    assert depth(nsqd, topic) == n
    write(df, nsqd, topic, dedupeKey="load-1", batchSize="700")  # split differently
    assert depth(nsqd, topic) == n
    write(df, nsqd, topic, dedupeKey="load-2")  # another load: published again
    assert depth(nsqd, topic) == 2 * n
    return df


def test_write_again_with_the_same_dedupe_key_publishes_nothing(
    spark: Any, dnsqd: Proc, topic: str
) -> None:
    n = 3000
    df = write_twice_and_again(spark, dnsqd, topic, n, 3)
    write(df, dnsqd, topic, dedupeKey="load-2", dedupe="off")  # TCP: no keys
    assert depth(dnsqd, topic) == 3 * n


def test_retried_task_publishes_nothing_twice(dnsqd: Proc, topic: str, report: Any) -> None:
    """local[2,4] in a child job: task 0's first attempt fails after publishing 1,500 of its
    2,000 rows; with keys the retry adds only the other 500, over TCP it adds all 2,000."""
    n, fail_at = 4000, 1500
    keyed, tcp = f"{topic}_keys", f"{topic}_tcp"
    job = HERE / "sink_retry_job.py"
    args = [dnsqd.tcp, dnsqd.http, str(n), str(fail_at), f"{keyed}=auto", f"{tcp}=off"]
    done = subprocess.run(
        [sys.executable, str(job), *args],
        env=spark_env(),
        cwd="/tmp",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = Counter(drain(dnsqd.tcp, keyed, "check", n))
    assert got == Counter(f"row-{i}".encode() for i in range(n))
    again = Counter(drain(dnsqd.tcp, tcp, "check", n + fail_at))
    assert set(again) == set(got)
    assert sum(again.values()) == n + fail_at  # the first attempt's 1,500, twice
    report(f"sink, retried task: keys 0 duplicates; TCP {sum(again.values()) - n} duplicates")


def batch_files(folder: Path, count: int, rows: int) -> list[str]:
    folder.mkdir()
    lines = []
    for k in range(count):
        part = [f"f{k}-{i}" for i in range(rows)]
        path = folder / f"part-{k}.txt"
        path.write_text("\n".join(part) + "\n")
        os.utime(path, (1_700_000_000 + k, 1_700_000_000 + k))  # file k is batch k
        lines += part
    return lines


def files_to_nsq(spark: Any, src: Path, nsqd: Proc, topic: str, ckpt: Path, **trigger: Any) -> Any:
    return (
        spark.readStream.option("maxFilesPerTrigger", "1")
        .text(str(src))
        .selectExpr("value as body")
        .writeStream.format("nsq")
        .option("nsqd", nsqd.tcp)
        .option("nsqdHttp", nsqd.http)
        .option("topic", topic)
        .option("batchSize", str(CHUNK))  # many requests per batch: a wide window for the kill
        .option("checkpointLocation", str(ckpt))
        .trigger(**trigger)
        .start()
    )


def restart(daemon: Proc) -> Proc:
    daemon.proc.send_signal(signal.SIGTERM)
    daemon.proc.wait(20)
    time.sleep(0.5)
    return start_process(daemon.name, daemon.command, daemon.extra, again=daemon)


def test_streaming_sink_retried_after_nsqd_restart_no_duplicates(
    spark: Any, topic: str, tmp_path: Path, report: Any
) -> None:
    """Our nsqd (--dedupe-window) is stopped (SIGTERM) in the middle of a micro-batch's
    publishing and started again; the task fails on its dead connection and so does the query;
    restarted from its checkpoint the query replays that batch whole: every row lands exactly
    once (over TCP, `dedupe=off`, the rows stored before the stop come twice)."""
    files, rows = 6, 1000
    src, ckpt = tmp_path / "in", tmp_path / "ckpt"
    sent = batch_files(src, files, rows)
    daemon = our_nsqd(["--dedupe-window=10m"])
    try:

        def mid_batch() -> int:
            n = depth(daemon, topic)
            return n if 0 < n % rows < rows * 0.8 and n < (files - 1) * rows else 0

        query = files_to_nsq(spark, src, daemon, topic, ckpt, processingTime="0 seconds")
        try:
            held = wait_until(mid_batch, 120, 0.01, "a micro-batch half published")
            daemon = restart(daemon)
            before = depth(daemon, topic)
            with pytest.raises(Exception, match=r"nsq sink: task 0 failed after publishing"):
                query.awaitTermination(120)
        finally:
            query.stop()
        assert before % rows != 0, (held, before)  # part of a batch stored, not committed
        query = files_to_nsq(spark, src, daemon, topic, ckpt, availableNow=True)
        assert query.awaitTermination(180)
        got = Counter(drain(daemon.tcp, topic, "check", len(sent), settle=1.0))
    finally:
        daemon.stop()
    assert got == Counter(line.encode() for line in sent)
    report(
        f"sink, nsqd restarted mid-batch: {before % rows} rows of the batch stored "
        f"before, published again after it, 0 duplicates (of {len(sent)})"
    )


def test_go_nsqd_gets_tcp_and_dedupe_on_refuses_it(spark: Any, topic: str) -> None:
    n = 2000
    df = spark.range(0, n, 1, 2).selectExpr("concat('go-', id) as body")
    daemon = go_nsqd()
    try:
        write(df, daemon, topic)  # auto: the probe finds no dedupe_window, so TCP
        assert Counter(drain(daemon.tcp, topic, "check", n)) == Counter(
            f"go-{i}".encode() for i in range(n)
        )
        with pytest.raises(Exception, match=r"dedupe=on, but nsqd .* cannot: it has no"):
            write(df, daemon, f"{topic}_on", dedupe="on")
    finally:
        daemon.stop()


def test_dedupe_on_refuses_our_nsqd_without_the_window(spark: Any, nsqd: Proc, topic: str) -> None:
    df = spark.range(0, 10, 1, 1).selectExpr("cast(id as string) as body")
    with pytest.raises(Exception, match="cannot: it runs without --dedupe-window"):
        write(df, nsqd, topic, dedupe="on")
