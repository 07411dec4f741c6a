"""NSQ -> Parquet rows/s on a Spark standalone cluster (scripts/spark_cluster.sh), not run in CI.

    python bench/spark_cluster_bench.py [--messages 120000] [--runs 3] [--quick]

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

ROWS: list[tuple[str, list[str]]] = [
    ("our nsqd x1, default options", ["--nsqds", "1"]),
    ("our nsqd x2, default options", ["--nsqds", "2"]),
    ("Go nsqd x1, default options", ["--nsqds", "1", "--daemon", "go"]),
    (
        "our nsqd x1, maxInFlight 2500 (one connection: the old default)",
        ["--nsqds", "1", "--option", "maxInFlight=2500"],
    ),
    (
        "our nsqd x1, maxInFlight 40000 (16 connections)",
        ["--nsqds", "1", "--option", "maxInFlight=40000"],
    ),
    ("our nsqd x1, default options, 1 executor", ["--nsqds", "1", "--workers", "1"]),
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
    parser.add_argument("--messages", type=int, default=120_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="only the first two rows")
    args = parser.parse_args()
    print(
        "| NSQ -> Parquet, 2 workers x 1 core | rows/s (median) | runs: rows/s, missing, "
        "duplicates |"
    )
    print("| --- | --- | --- |")
    for label, extra in ROWS[:2] if args.quick else ROWS:
        results = [run(args.messages, extra) for _ in range(args.runs)]
        rates = [r["steady_rows_per_s"] for r in results if r.get("steady_rows_per_s")]
        runs = "; ".join(
            f"{r['steady_rows_per_s']:,}, {r['missing']}, {r['duplicates']}"
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
