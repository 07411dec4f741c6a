"""The Redis front-end beside a real redis-server 7 (issue 19): redis-benchmark (Debian
`redis-tools`, installed by scripts/install_redis.sh) runs LPUSH, RPUSH, LMOVE, RPOPLPUSH, LPOP,
RPOP, LRANGE (the first 100, 300, 450 and 600 elements) and SET ... EX with -c 50 -d 200,
without pipelining and with -P 16, against both servers in one run, alternating runs so drift
hits both alike; medians of --repeat runs and the ratio ours / redis-server.

    python bench/resp.py [--requests 200000] [--repeat 3] [--aof] [--out bench/results/resp-X.md]
    python bench/resp.py --tests lmove,rpoplpush,setex --against /tmp/old-checkout

Ours runs with its defaults (resp.log under a fresh --data-path, --sync-every=2500): every
push is written to its log before it is acknowledged; redis-server runs with persistence off
(its default `save` snapshots make no difference to these rows), or with --aof as the durable
comparison. --against DIR runs the nsqd of another checkout (an older commit: `git archive
<commit> | tar -x -C DIR`) in redis-server's place: old / new, alternated the same way. Each
row checks its count: after N pushes the list holds N more elements, after N pops N fewer,
after N LMOVEs (mylist -> mylist:moved) N fewer, after N RPOPLPUSHes (back) N more, after an
LRANGE run (which pushes N first) N more; SET ... EX leaves its key with a TTL (the run fails
loudly)."""

from __future__ import annotations

import argparse
import csv
import io
import os
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

KEY = b"mylist"  # the list redis-benchmark 7.0 works on
MOVED = "mylist:moved"  # where LMOVE takes its elements, RPOPLPUSH brings them back from
CACHED = "cache:key"  # SET ... EX's key
# test -> (redis-benchmark's arguments for it, the rows it prints, how many elements each
# request adds to KEY). A test named by -t uses -d 200; a command line needs its value
# written out. -t lrange first pushes -n elements ("LPUSH (needed to benchmark LRANGE)"),
# then reads the first 100, 300, 450 and 600 of them
TESTS: dict[str, tuple[list[str], tuple[str, ...], int]] = {
    "lpush": (["-t", "lpush"], ("LPUSH",), 1),
    "rpush": (["-t", "rpush"], ("RPUSH",), 1),
    "lmove": (["LMOVE", KEY.decode(), MOVED, "RIGHT", "LEFT"], ("LMOVE",), -1),
    "rpoplpush": (["RPOPLPUSH", MOVED, KEY.decode()], ("RPOPLPUSH",), 1),
    "lpop": (["-t", "lpop"], ("LPOP",), -1),
    "rpop": (["-t", "rpop"], ("RPOP",), -1),
    "lrange": (["-t", "lrange"], ("LRANGE_100", "LRANGE_300", "LRANGE_500", "LRANGE_600"), 1),
    "setex": (["SET", CACHED, "v" * 200, "EX", "3600"], ("SET",), 0),
}


def ask(port: int, *argv: bytes) -> bytes:
    c = Conn(port)
    c.send(encode(list(argv)))
    reply = c.reply()
    c.close()
    return reply


def llen(port: int) -> int:
    reply = ask(port, b"LLEN", KEY)
    assert reply.startswith(b":"), reply
    return int(reply[1:])


def run_tool(tool: str, port: int, args: list[str], n: int, pipeline: int) -> dict[str, float]:
    argv = [tool, "-p", str(port), "-n", str(n), "-c", "50", "-d", "200", "--csv"]
    argv += ["-P", str(pipeline)] if pipeline > 1 else []
    argv += args  # (a command line last: what follows it is its arguments)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"redis-benchmark failed: {done.stderr}")
    return {r["test"].split()[0]: float(r["rps"]) for r in csv.DictReader(io.StringIO(done.stdout))}


def cpu_s(pid: int) -> float:
    """The process's CPU time so far (user + system, all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def bench(
    tool: str, server: Server, test: str, n: int, pipeline: int
) -> tuple[dict[str, float], float]:
    """The rows' requests per second, and the server's CPU microseconds per request (less
    noisy than the rate on a shared machine)."""
    args, names, adds = TESTS[test]
    port = server.port
    before = llen(port)
    if adds < 0 and before < n:  # a pop or a move on its own: give it the elements first
        run_tool(tool, port, ["-t", "rpush"], n - before, 16)
        before = n
    cpu = cpu_s(server.proc.pid)
    rows = run_tool(tool, port, args, n, pipeline)
    cpu = (cpu_s(server.proc.pid) - cpu) * 1e6 / (n * len(names))
    if not set(names) <= rows.keys():
        raise RuntimeError(f"unexpected redis-benchmark output for {test}: {rows!r}")
    after = llen(port)
    if after != before + adds * n:
        raise RuntimeError(f"{test} on port {port}: list length {before} -> {after}")
    if test == "setex" and not ask(port, b"TTL", CACHED.encode()).startswith(b":3"):
        raise RuntimeError(f"setex on port {port}: {CACHED} has no TTL")
    return {row: rows[row] for row in names}, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--tests", default=",".join(TESTS), help="comma-separated, of: %(default)s")
    ap.add_argument(
        "--against",
        type=Path,
        help="another checkout's nsqd in redis-server's place (an older commit: old / new)",
    )
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
        if args.against is None:
            other = start_redis(tmp, "", *aof)
        else:
            other = start_ours(tmp / "against", root=args.against.resolve())
        ours = start_ours(tmp / "data")
        servers += [other, ours]
        results: dict[tuple[str, int, str], list[float]] = {}  # rps, and CPU us under the test
        tests = [t for t in TESTS if t in args.tests.split(",")]  # pushes before pops
        for pipeline in (1, 16):
            for _ in range(args.repeat):
                for kind, server in (("redis", other), ("ours", ours)):
                    for test in tests:
                        rows, cpu = bench(tool, server, test, args.requests, pipeline)
                        for row, rps in rows.items():
                            results.setdefault((row, pipeline, kind), []).append(rps)
                        results.setdefault((test, pipeline, kind), []).append(cpu)
        table = render(results, args, tests)
    finally:
        for server in servers:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(table)
    if args.out:
        args.out.write_text(table + "\n")
    return 0


def render(
    results: dict[tuple[str, int, str], list[float]], args: argparse.Namespace, tests: list[str]
) -> str:
    other = "redis-server" if args.against is None else f"{args.against}"
    lines = [
        f"redis-benchmark -c 50 -d 200 -n {args.requests}, medians of {args.repeat} "
        f"({time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC)",
        "",
        f"| test | pipeline | {other} rps | ours rps | ours / other "
        f"| {other} CPU us/request | ours CPU us/request |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    med = {key: statistics.median(values) for key, values in results.items()}
    for pipeline in (1, 16):
        label = "none" if pipeline == 1 else f"-P {pipeline}"
        for test in tests:
            cpu = f"{med[(test, pipeline, 'redis')]:.1f} | {med[(test, pipeline, 'ours')]:.1f}"
            for row in TESTS[test][1]:  # (LRANGE's CPU: its pushes counted with its reads)
                redis, ours = med[(row, pipeline, "redis")], med[(row, pipeline, "ours")]
                rate = f"{redis:,.0f} | {ours:,.0f} | {ours / redis:.2f}x"
                lines.append(f"| {row} | {label} | {rate} | {cpu} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
