"""NSQ -> Parquet rows/s on a Spark standalone cluster (scripts/spark_cluster.sh), not run in CI.

    python bench/spark_cluster_bench.py [--scale 1.0] [--runs 3] [--quick] [--rows 0,4]

Each row runs the cluster script --runs times (master + 2 workers of 1 core, nsqlookupd, the
nsqds, the streaming job into Parquet with a checkpoint, 200 B messages published before the
job starts) and prints the median rows/s between the end of the first batch (which also
starts the executors' Python workers) and the end of the last, with missing and duplicates of
every run. The table is Markdown, for bench/spark_cluster.md and the README."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

MEM_QUEUE = "--nsqd-arg=--mem-queue-size=1000000"
# (label, cluster script arguments, messages): the executor-side rows read 200 B messages at
# 168,000 per batch with the defaults (4 partitions of 8 MiB), so they need more messages for
# several batches after the first (which also starts the executors' Python workers).
ROWS: list[tuple[str, list[str], int]] = [
    ("executor-side, our nsqd x2, 2 executors", ["--nsqds", "2"], 840_000),
    ("executor-side, our nsqd x2, 1 executor", ["--nsqds", "2", "--workers", "1"], 840_000),
    ("executor-side, our nsqd x1, 2 executors", ["--nsqds", "1"], 840_000),
    ("executor-side, our nsqd x1, 1 executor", ["--nsqds", "1", "--workers", "1"], 840_000),
    (
        "driver-side (executorReads=off), our nsqd x2, 2 executors",
        ["--nsqds", "2", "--option", "executorReads=off"],
        200_000,
    ),
    (
        "driver-side (executorReads=off), our nsqd x1, 2 executors",
        ["--nsqds", "1", "--option", "executorReads=off"],
        200_000,
    ),
    (
        "driver-side (executorReads=off), our nsqd x1, 1 executor",
        ["--nsqds", "1", "--workers", "1", "--option", "executorReads=off"],
        200_000,
    ),
    ("driver-side (chosen), Go nsqd x1, 2 executors", ["--nsqds", "1", "--daemon", "go"], 200_000),
    # The backlog in memory instead of on disk (the default --mem-queue-size=10000 keeps 10,000
    # per channel in memory): what a user who reads a large backlog fast would set.
    (
        "executor-side, our nsqd x2 (--mem-queue-size=1000000), 2 executors",
        ["--nsqds", "2", MEM_QUEUE],
        840_000,
    ),
    (
        "executor-side, our nsqd x2 (--mem-queue-size=1000000), 1 executor",
        ["--nsqds", "2", "--workers", "1", MEM_QUEUE],
        840_000,
    ),
]


def run(messages: int, extra: list[str]) -> dict:
    proc = subprocess.run(
        [str(REPO / "scripts" / "spark_cluster.sh"), "--messages", str(messages), *extra],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
        env={**__import__("os").environ, "PYTHON": sys.executable},
    )
    if proc.returncode not in (0, 2):
        return {"error": proc.stderr[-600:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=1.0, help="times each row's messages")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="only the first two rows")
    parser.add_argument("--rows", default="", help="row numbers to run, e.g. 0,4")
    args = parser.parse_args()
    print(
        "| NSQ -> Parquet, workers x 1 core | rows/s (median) | runs: rows/s, missing, "
        "duplicates, batches, largest batch |"
    )
    print("| --- | --- | --- |")
    rows = ROWS[:2] if args.quick else ROWS
    if args.rows:
        rows = [ROWS[int(i)] for i in args.rows.split(",")]
    for label, extra, messages in rows:
        results = [run(round(messages * args.scale), extra) for _ in range(args.runs)]
        rates = [r["steady_rows_per_s"] for r in results if r.get("steady_rows_per_s")]
        runs = "; ".join(
            f"{r['steady_rows_per_s']:,}, {r['missing']}, {r['duplicates']}, {r['batches']}, "
            f"{r['max_batch']:,}"
            if "rows" in r
            else "failed"
            for r in results
        )
        median = f"{statistics.median(rates):,.0f}" if rates else "-"
        print(f"| {label} | {median} | {runs} |", flush=True)
        for r in results:
            if "error" in r:
                print(r["error"], file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
