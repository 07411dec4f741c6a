"""Benchmark of the nsq sink's two paths: HTTP /mpub with de-duplication keys (our nsqd with
--dedupe-window, option dedupe=auto) against TCP MPUB (dedupe=off); not run in CI.

    python bench/spark_sink_bench.py [--messages 200000] [--size 200] [--rounds 3]

Starts our nsqd (--dedupe-window=10m, --mem-queue-size large enough to hold every round in
memory) and one local[2] Spark session, caches a DataFrame of --messages rows of --size bytes
in 2 partitions, then writes it with df.write.format("nsq") --rounds times per path,
alternating, each round to a new topic, and prints rows/s per round, the medians and their
ratio. Each round's topic must then hold exactly --messages messages (checked from /stats).
Publishing alone, without Spark, is timed too (one task's worth: the same chunks of 1,000),
with HTTP /mpub without keys as a third row; `--raw-only` times only that (no Spark).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "spark")]

from spark_support import build_session, spark_env, start_process  # noqa: E402

from pyspark_nsq.addresses import Address  # noqa: E402
from pyspark_nsq.conn import Publisher  # noqa: E402
from pyspark_nsq.httppub import HttpPublisher  # noqa: E402

MODES = {"http+keys": "auto", "tcp": "off"}
SHORT = {"http+keys": "key", "tcp": "tcp", "http": "plain"}  # topic name parts


def depth(nsqd: Any, topic: str) -> int:
    url = f"http://{nsqd.http}/stats?format=json&topic={topic}"
    with urllib.request.urlopen(url, timeout=10) as response:
        doc = json.loads(response.read())
    return sum(t["depth"] for t in doc.get("topics") or [] if t["topic_name"] == topic)


def spark_round(df: Any, nsqd: Any, topic: str, dedupe: str, messages: int) -> float:
    started = time.perf_counter()
    (
        df.write.format("nsq")
        .option("nsqd", nsqd.tcp)
        .option("nsqdHttp", nsqd.http)
        .option("topic", topic)
        .option("dedupe", dedupe)
        .mode("append")
        .save()
    )
    elapsed = time.perf_counter() - started
    assert depth(nsqd, topic) == messages, f"{topic}: {depth(nsqd, topic)} of {messages}"
    return messages / elapsed


def raw_round(nsqd: Any, topic: str, mode: str, bodies: list[bytes]) -> float:
    """One task's publishing without Spark: chunks of 1,000 over one connection."""
    started = time.perf_counter()
    if mode == "tcp":
        with Publisher(Address.parse(nsqd.tcp)) as pub:
            pub.publish_many(topic, bodies)
    elif mode == "http":
        conn = http.client.HTTPConnection("127.0.0.1", nsqd.http_port)
        for first in range(0, len(bodies), 1000):
            conn.request("POST", f"/mpub?topic={topic}", b"\n".join(bodies[first : first + 1000]))
            response = conn.getresponse()
            assert response.status == 200, response.read()
            response.read()
        conn.close()
    else:
        with HttpPublisher(Address.parse(nsqd.http)) as pub:
            for first in range(0, len(bodies), 1000):
                pub.mpub(topic, bodies[first : first + 1000], f"raw-{topic}", first)
    elapsed = time.perf_counter() - started
    assert depth(nsqd, topic) == len(bodies)
    return len(bodies) / elapsed


def raw_only(nsqd: Any, bodies: list[bytes], rounds: int, stamp: int) -> int:
    results: dict[str, list[float]] = {"http+keys": [], "http": [], "tcp": []}
    try:
        for r in range(rounds):
            for mode, rates in results.items():
                rates.append(raw_round(nsqd, f"r_{SHORT[mode]}_{r}_{stamp}", mode, bodies))
    finally:
        nsqd.stop()
    for mode, rates in results.items():
        rounds_text = " / ".join(f"{x:,.0f}" for x in rates)
        print(f"raw {mode:10s} median {statistics.median(rates):>9,.0f} msg/s ({rounds_text})")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--raw-only", action="store_true")
    args = parser.parse_args()
    os.environ.update(spark_env())
    queue = args.messages * args.rounds * 2 * 2
    nsqd = start_process(
        "bench-nsqd",
        [sys.executable, "-m", "nsqd"],
        ["--dedupe-window=10m", f"--mem-queue-size={queue}"],
    )
    bodies = [b"%d" % i + b"x" * args.size for i in range(args.messages // 2)]
    stamp = int(time.time())
    if args.raw_only:
        return raw_only(nsqd, bodies, args.rounds, stamp)
    os.environ["PYSPARK_SUBMIT_ARGS"] = "--conf spark.ui.showConsoleProgress=false pyspark-shell"
    spark = build_session("pyspark_nsq-sink-bench")
    spark.sparkContext.setLogLevel("ERROR")
    results: dict[str, list[float]] = {f"spark {m}": [] for m in MODES}
    results.update({f"raw {m}": [] for m in (*MODES, "http")})
    try:
        from pyspark.sql import functions as F

        df = spark.range(args.messages, numPartitions=2).select(
            F.concat(F.col("id").cast("string"), F.lit("x" * args.size)).alias("body")
        )
        df.cache().count()
        spark_round(df, nsqd, f"warm_{stamp}", "auto", args.messages)  # workers, imports
        for r in range(args.rounds):
            for mode, dedupe in MODES.items():
                rate = spark_round(df, nsqd, f"s_{SHORT[mode]}_{r}_{stamp}", dedupe, args.messages)
                results[f"spark {mode}"].append(rate)
                raw = raw_round(nsqd, f"r_{SHORT[mode]}_{r}_{stamp}", mode, bodies)
                results[f"raw {mode}"].append(raw)
                print(f"round {r} {mode:10s} spark {rate:>9,.0f} rows/s   raw {raw:>9,.0f} msg/s")
            plain = raw_round(nsqd, f"r_plain_{r}_{stamp}", "http", bodies)
            results["raw http"].append(plain)
            print(f"round {r} http, no keys                    raw {plain:>9,.0f} msg/s")
    finally:
        spark.stop()
        nsqd.stop()
    med = {k: statistics.median(v) for k, v in results.items()}
    for key, value in med.items():
        print(f"median {key:16s} {value:>9,.0f}/s")
    for what in ("spark", "raw"):
        ratio = med[f"{what} http+keys"] / med[f"{what} tcp"]
        print(f"{what}: http+keys / tcp = {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
