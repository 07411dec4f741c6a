"""The Redis front-end beside a real redis-server 7 (issue 19): redis-benchmark (Debian
`redis-tools`, installed by scripts/install_redis.sh) runs LPUSH, RPUSH, LPOP, RPOP and LRANGE
(the first 100, 300, 450 and 600 elements) with -c 50 -d 200, without pipelining and with
-P 16, against both servers in one run, alternating runs so drift hits both alike; medians of
--repeat runs and the ratio ours / redis-server.

    python bench/resp.py [--requests 200000] [--repeat 3] [--aof] [--out bench/results/resp-X.md]

Ours runs with its defaults (resp.log under a fresh --data-path, --sync-every=2500): every
push is written to its log before it is acknowledged; redis-server runs with persistence off
(its default `save` snapshots make no difference to these rows), or with --aof as the durable
comparison. Each row checks its count: after N pushes the list holds N more elements, after N
pops N fewer, after an LRANGE run (which pushes N first) N more (the run fails loudly)."""

from __future__ import annotations

import argparse
import csv
import io
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from conformance.resp.servers import Server, start_ours, start_redis  # noqa: E402
from conformance.resp.wire import Conn, encode  # noqa: E402

TESTS = ("lpush", "rpush", "lpop", "rpop", "lrange")
# the rows a test prints: -t lrange first pushes -n elements ("LPUSH (needed to benchmark
# LRANGE)"), then reads the first 100, 300, 450 and 600 of them
ROWS = {
    "lpush": ("LPUSH",),
    "rpush": ("RPUSH",),
    "lpop": ("LPOP",),
    "rpop": ("RPOP",),
    "lrange": ("LRANGE_100", "LRANGE_300", "LRANGE_500", "LRANGE_600"),
}
KEY = b"mylist"  # the list redis-benchmark 7.0 works on


def llen(port: int) -> int:
    c = Conn(port)
    c.send(encode([b"LLEN", KEY]))
    reply = c.reply()
    c.close()
    assert reply.startswith(b":"), reply
    return int(reply[1:])


def bench(tool: str, port: int, test: str, n: int, pipeline: int) -> dict[str, float]:
    before = llen(port)
    argv = [tool, "-p", str(port), "-t", test, "-n", str(n), "-c", "50", "-d", "200", "--csv"]
    argv += ["-P", str(pipeline)] if pipeline > 1 else []
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"redis-benchmark failed: {done.stderr}")
    rows = {r["test"].split()[0]: float(r["rps"]) for r in csv.DictReader(io.StringIO(done.stdout))}
    if not set(ROWS[test]) <= rows.keys():
        raise RuntimeError(f"unexpected redis-benchmark output: {done.stdout!r}")
    after = llen(port)
    want = before - n if test.endswith("pop") else before + n  # lrange pushes n first
    if after != want:
        raise RuntimeError(f"{test} on port {port}: list length {before} -> {after}, want {want}")
    return {row: rows[row] for row in ROWS[test]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--aof",
        action="store_true",
        help="redis-server with appendonly yes, appendfsync everysec (the durable comparison)",
    )
    args = ap.parse_args()
    tool = shutil.which("redis-benchmark")
    if tool is None:
        print("redis-benchmark missing: run scripts/install_redis.sh", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp(prefix="resp-bench-"))
    servers: list[Server] = []
    try:
        aof = ("--appendonly", "yes", "--appendfsync", "everysec") if args.aof else ()
        redis = start_redis(tmp, "", *aof)
        ours = start_ours(tmp / "data")
        servers += [redis, ours]
        results: dict[tuple[str, int, str], list[float]] = {}
        for pipeline in (1, 16):
            for _ in range(args.repeat):
                for kind, server in (("redis", redis), ("ours", ours)):
                    for test in TESTS:  # pushes first: the pops then take what they pushed
                        rows = bench(tool, server.port, test, args.requests, pipeline)
                        for row, rps in rows.items():
                            results.setdefault((row, pipeline, kind), []).append(rps)
        table = render(results, args)
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(table)
    if args.out:
        args.out.write_text(table + "\n")
    return 0


def render(results: dict[tuple[str, int, str], list[float]], args: argparse.Namespace) -> str:
    lines = [
        f"redis-benchmark -c 50 -d 200 -n {args.requests}, medians of {args.repeat} "
        f"({time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC)",
        "",
        "| test | pipeline | redis-server rps | ours rps | ours / redis |",
        "|---|---|---:|---:|---:|",
    ]
    for pipeline in (1, 16):
        for row in (row for test in TESTS for row in ROWS[test]):
            redis = statistics.median(results[(row, pipeline, "redis")])
            ours = statistics.median(results[(row, pipeline, "ours")])
            label = "none" if pipeline == 1 else f"-P {pipeline}"
            lines.append(f"| {row} | {label} | {redis:,.0f} | {ours:,.0f} | {ours / redis:.2f}x |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
