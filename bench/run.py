"""Side-by-side benchmark: the real nsqd v1.3.0 (Go) against ours (python -m nsqd), same workloads.

    python bench/run.py [--target ours|reference|both] [--runfor 5s] [--repeat 3] [--quick]
                        [--only ROWS] [--backlog N] [--list]

Every row runs on freshly started daemons (free 127.0.0.1 ports, empty temp --data-path, the same
flags for both, --mem-queue-size 30M so queued messages stay in memory). A repeat runs every row
for both daemons back to back, reference first on even repeats and ours first on odd ones, so
drift hits both alike. Each row checks its own counts against the daemon's /stats (what the
clients counted = what the daemon accepted, the backlog outlasted the reader, every published
message was delivered) and reports an error instead of a figure when they do not add up.
Medians over the repeats are printed as one table with the ratio ours/reference, and everything
(every run, every count) is written to bench/results/<UTC time>.json.

Rows (200-byte messages; --list prints them with their keys; --only takes row keys, workload
names or the groups below, comma-separated):
  writer   Go bench_writer (one connection per core) for --runfor: MPUB batch 200 and batch 1,
           each with no channel and with one channel attached
  reader   Go bench_reader (RDY 2500) for --runfor on a backlog of --backlog messages queued in
           memory before it starts; the backlog must outlast the window
  mpub     200,000 messages by MPUB (batches of 200, one raw socket), then consumed on one
           channel, RDY 2500, FINs batched; msgs/s each way
  tls, snappy  MPUB 200,000 on one connection upgraded to TLS / snappy
  rt       single PUB round trips (one request in flight per connection) for --runfor: 1
           connection, and 32 connections over 2 client processes
  http     keep-alive HTTP POST /pub (1 message) and /mpub (200) for --runfor, 1 and 32 connections
  latency  publish→deliver latency p50/p99 of a steady PUB stream at --latency-rate
  start    process start → first answered GET /ping (median of --start-samples starts)
  rss      daemon VmRSS idle and with 1,000,000 messages queued in memory on one channel
  scaleout one of our nsqds per core registered with the real nsqlookupd, beside one Go nsqd on
           all cores; one bench_writer and one bench_reader per core, found through /lookup,
           run concurrently for --runfor; aggregate msgs/s each way

If ours cannot start (`python -m nsqd` fails) that is reported and the reference is still measured.
Exit status: 0 all measured, 2 some target/row failed, 1 nothing measured.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from daemons import (
    OURS_COMMAND,
    REPO_ROOT,
    TARGETS,
    Daemon,
    DaemonError,
    reference_version,
    start_daemon,
)
from scaleout import scale_out
from workloads import (
    HTTP_MPUB_BATCH,
    MANY_CONNS,
    CertPaths,
    Metric,
    Metrics,
    Settings,
    bench_writer,
    latency,
    mpub_then_consume,
    reader_on_backlog,
    round_trips,
    rss_after_1m,
    start_to_ping,
    upgraded_mpub,
)

sys.path.insert(0, str(REPO_ROOT / "scripts"))
import nsqd_process
from reference import ReferenceInstallError, ensure_reference

RESULTS_DIR: Final = REPO_ROOT / "bench" / "results"
DURATION: Final = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)$")
UNIT_SECONDS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
# The reader backlog per second of --runfor: above what either daemon reads in a second here
# (~0.4-0.8 M msgs/s); a row whose backlog ran dry fails and says to raise --backlog.
BACKLOG_PER_S: Final = 1_000_000


@dataclass(frozen=True)
class Workload:
    """One or more rows measured together: on a fresh daemon (`on_daemon`), or by a function
    that starts its own daemons (`own`)."""

    name: str
    group: str
    rows: tuple[Metric, ...]
    on_daemon: Callable[[Daemon, Settings], Metrics] | None = None
    own: Callable[[str, Settings], Metrics] | None = None
    tls: bool = False  # the daemon gets --tls-cert/--tls-key


def _rt(key: str, label: str, kind: str, conns: int, per_request: int) -> Workload:
    group = "rt" if kind == "v2" else "http"
    return Workload(
        key,
        group,
        (Metric(key, label, "msgs/s", True),),
        on_daemon=round_trips(key, "v2" if kind == "v2" else "http", conns, per_request),
    )


def _writer(key: str, label: str, batch: int, channel: bool) -> Workload:
    return Workload(
        key,
        "writer",
        (Metric(key, label, "msgs/s", True),),
        on_daemon=bench_writer(key, batch, channel),
    )


N: Final = MANY_CONNS
WORKLOADS: Final = (
    _writer("writer_b200", "bench_writer MPUB 200, no channel", 200, False),
    _writer("writer_b200_ch", "bench_writer MPUB 200, 1 channel", 200, True),
    _writer("writer_b1", "bench_writer batch 1, no channel", 1, False),
    _writer("writer_b1_ch", "bench_writer batch 1, 1 channel", 1, True),
    Workload(
        "reader",
        "reader",
        (Metric("reader", "bench_reader on {backlog} backlog", "msgs/s", True),),
        on_daemon=reader_on_backlog,
    ),
    Workload(
        "mpub",
        "mpub",
        (
            Metric("mpub200k_pub", "MPUB 200k: publish (batch 200)", "msgs/s", True),
            Metric("mpub200k_sub", "MPUB 200k: consume (RDY 2500, FIN)", "msgs/s", True),
        ),
        on_daemon=mpub_then_consume,
    ),
    Workload(
        "tls",
        "tls",
        (Metric("tls_mpub", "MPUB 200k over TLS", "msgs/s", True),),
        on_daemon=upgraded_mpub("tls_mpub", tls=True, snappy=False),
        tls=True,
    ),
    Workload(
        "snappy",
        "snappy",
        (Metric("snappy_mpub", "MPUB 200k over snappy", "msgs/s", True),),
        on_daemon=upgraded_mpub("snappy_mpub", tls=False, snappy=True),
    ),
    _rt("pub_rt_1", "PUB round trips, 1 connection", "v2", 1, 1),
    _rt("pub_rt_32", f"PUB round trips, {N} connections", "v2", N, 1),
    _rt("http_pub_1", "HTTP /pub keep-alive, 1 connection", "http", 1, 1),
    _rt("http_pub_32", f"HTTP /pub keep-alive, {N} connections", "http", N, 1),
    _rt("http_mpub_1", f"HTTP /mpub {HTTP_MPUB_BATCH}, 1 connection", "http", 1, HTTP_MPUB_BATCH),
    _rt(
        "http_mpub_32", f"HTTP /mpub {HTTP_MPUB_BATCH}, {N} connections", "http", N, HTTP_MPUB_BATCH
    ),
    Workload(
        "latency",
        "latency",
        (
            Metric("latency_p50_us", "PUB→deliver p50 @ {rate} msgs/s", "us", False),
            Metric("latency_p99_us", "PUB→deliver p99 @ {rate} msgs/s", "us", False),
        ),
        on_daemon=latency,
    ),
    Workload(
        "start",
        "start",
        (Metric("start_ping_ms", "start → first /ping answered", "ms", False),),
        own=start_to_ping,
    ),
    Workload(
        "rss",
        "rss",
        (
            Metric("rss_idle_mib", "RSS idle", "MiB", False),
            Metric("rss_1m_mib", "RSS with 1M queued", "MiB", False),
        ),
        on_daemon=rss_after_1m,
    ),
    Workload(
        "scaleout",
        "scaleout",
        (
            Metric("scale_pub", "scale-out {cores} cores: publish, MPUB 200", "msgs/s", True),
            Metric("scale_sub", "scale-out {cores} cores: consume, same time", "msgs/s", True),
        ),
        own=scale_out,
    ),
)
METRICS: Final = tuple(m for w in WORKLOADS for m in w.rows)


def select_workloads(only: str) -> list[Workload]:
    """Workloads named by row keys, workload names or groups (in table order); ValueError if a
    name is unknown."""
    wanted = {w.strip() for w in only.split(",") if w.strip()}
    chosen = [
        w
        for w in WORKLOADS
        if w.name in wanted or w.group in wanted or any(m.key in wanted for m in w.rows)
    ]
    known = {w.name for w in WORKLOADS} | {w.group for w in WORKLOADS} | {m.key for m in METRICS}
    unknown = wanted - known
    if unknown:
        raise ValueError(f"unknown rows {sorted(unknown)}; see --list")
    return chosen


@dataclass
class TargetResult:
    """Everything measured for one daemon over all repeats."""

    name: str
    version: str = ""
    error: str | None = None
    runs: list[dict[str, Any]] = field(default_factory=list)

    def values(self, key: str) -> list[float]:
        return [
            float(v)
            for run in self.runs
            for w in run.values()
            if isinstance(v := w.get("metrics", {}).get(key), int | float)
            and not isinstance(v, bool)
        ]

    def all_workloads(self) -> list[dict[str, Any]]:
        return [w for run in self.runs for w in run.values()]

    def medians(self) -> dict[str, float | None]:
        return {m.key: median_or_none(self.values(m.key)) for m in METRICS}

    def failed(self, key: str) -> bool:
        """Whether a run of the workload holding this row failed."""
        name = next(w.name for w in WORKLOADS if any(m.key == key for m in w.rows))
        return any(run.get(name, {}).get("error") for run in self.runs)

    def errors(self) -> list[str]:
        return [
            f"{name}: {w['error']}" for run in self.runs for name, w in run.items() if w["error"]
        ]


def median_or_none(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def parse_duration(text: str) -> float:
    match = DURATION.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"not a duration like 10s / 500ms / 1m: {text!r}")
    return float(match[1]) * UNIT_SECONDS[match[2]]


def go_duration(text: str) -> str:
    """argparse type: a Go duration string the Go tools accept (validated, returned as is)."""
    parse_duration(text)
    return text


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--target", choices=("ours", "reference", "both"), default="both")
    p.add_argument(
        "--runfor",
        type=go_duration,
        help="window of the bench_writer/bench_reader, round-trip, HTTP and scale-out rows\n"
        "(default 5s, quick 2s)",
    )
    p.add_argument("--quick", action="store_true", help="runfor 2s, 1 repeat, 2 s latency run")
    p.add_argument("--repeat", type=int, help="repeats per row (default 3, quick 1)")
    p.add_argument("--only", default="", help="comma list of rows, workloads or groups")
    p.add_argument("--list", action="store_true", help="print the rows and their keys, then exit")
    p.add_argument(
        "--backlog",
        type=int,
        help=f"messages queued before bench_reader (default {BACKLOG_PER_S:,} per s of runfor)",
    )
    p.add_argument("--mem-queue-size", type=int, default=30_000_000)
    p.add_argument("--latency-rate", type=int, default=10_000, help="msgs/s")
    p.add_argument("--latency-seconds", type=float, help="default 5, quick 2")
    p.add_argument("--start-samples", type=int, help="starts per start row (default 5, quick 3)")
    p.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    p.add_argument(
        "--ours-cmd",
        default=shlex.join(OURS_COMMAND),
        help="command line that starts our daemon (the nsqd flags are appended)",
    )
    args = p.parse_args(argv)
    args.runfor = args.runfor or ("2s" if args.quick else "5s")
    args.repeat = args.repeat or (1 if args.quick else 3)
    args.latency_seconds = args.latency_seconds or (2.0 if args.quick else 5.0)
    args.start_samples = args.start_samples or (3 if args.quick else 5)
    if args.backlog is None:
        # whole MPUB batches, so the fill is exact
        args.backlog = int(BACKLOG_PER_S * parse_duration(args.runfor)) // 200 * 200
    if args.backlog <= 0 or args.backlog % 200:
        p.error("--backlog must be a positive multiple of 200 (it is filled by MPUB 200)")
    if args.backlog > args.mem_queue_size:
        p.error("--backlog must fit in --mem-queue-size (the backlog is read from memory)")
    try:
        args.workloads = select_workloads(args.only) if args.only else list(WORKLOADS)
    except ValueError as exc:
        p.error(str(exc))
    return args


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def label(metric: Metric, settings: Settings) -> str:
    return metric.label.format(
        backlog=f"{settings.backlog / 1e6:g}M",
        rate=f"{settings.latency_rate / 1000:g}k",
        cores=os.cpu_count(),
    )


def prepare_targets(target: str) -> tuple[dict[str, TargetResult], Path | None]:
    """TargetResults for the chosen daemons; installs the reference tools when needed."""
    names = TARGETS if target == "both" else (target,)
    results = {n: TargetResult(n) for n in names}
    try:
        bin_dir: Path | None = ensure_reference()
    except ReferenceInstallError as exc:
        bin_dir = None
        log(f"!! reference tools unavailable: {exc}")
        if "reference" in results:
            results["reference"].error = f"reference tools unavailable: {exc}"
    if bin_dir is not None and "reference" in results:
        results["reference"].version = reference_version(bin_dir)
    if "ours" in results:
        results["ours"].version = f"python -m nsqd (Python {platform.python_version()})"
        compile_ours()
    return results, bin_dir


def compile_ours() -> None:
    """Our package's bytecode, as `pip install` writes it: with PYTHONDONTWRITEBYTECODE set
    (as in this project's shells) a run from the working tree would otherwise compile every
    module from source at each start, which no installed nsqd does (~60 ms here)."""
    import compileall

    for package in ("nsqd", "protocol"):
        compileall.compile_dir(REPO_ROOT / package, quiet=1)


def make_certs(directory: Path) -> CertPaths:
    """A throwaway CA and server certificate, written by our nsqd-certs (as tests/tls does)."""
    subprocess.run(
        [sys.executable, "-m", "nsqd.certs", "--out", str(directory)],
        cwd=REPO_ROOT,
        env=nsqd_process.pythonpath_env(),
        capture_output=True,
        timeout=60,
        check=True,
    )
    return CertPaths(directory / "ca.pem", directory / "server.pem", directory / "server.key")


def run_workload(target: str, workload: Workload, settings: Settings) -> dict[str, Any]:
    """One workload for one target: {"metrics", "error", "seconds"}; DaemonError if its fresh
    daemon does not start."""
    started = time.monotonic()
    metrics: Metrics = {}
    error = None
    if workload.own is not None:
        try:
            metrics = workload.own(target, settings)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
    else:
        assert workload.on_daemon is not None
        flags: list[str] = []
        if workload.tls and settings.certs is not None:
            flags = [f"--tls-cert={settings.certs.cert}", f"--tls-key={settings.certs.key}"]
        daemon = start_daemon(
            target, settings.mem_queue_size, settings.bin_dir, settings.ours_cmd, flags
        )
        with daemon:
            try:
                metrics = workload.on_daemon(daemon, settings)
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                if not daemon.alive():
                    error += f"\n(daemon died) {daemon.log_tail(800)}"
    return {"metrics": metrics, "error": error, "seconds": round(time.monotonic() - started, 2)}


def describe(metrics: Metrics) -> str:
    return ", ".join(
        f"{k}={v:,.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in metrics.items()
    )


def run_all(args: argparse.Namespace) -> tuple[dict[str, TargetResult], Settings]:
    results, bin_dir = prepare_targets(args.target)
    settings = Settings(
        bin_dir=bin_dir,
        runfor=args.runfor,
        runfor_s=parse_duration(args.runfor),
        latency_rate=args.latency_rate,
        latency_seconds=args.latency_seconds,
        mem_queue_size=args.mem_queue_size,
        ours_cmd=tuple(shlex.split(args.ours_cmd)),
        backlog=args.backlog,
        start_samples=args.start_samples,
    )
    certs_dir = None
    if any(w.tls for w in args.workloads):
        certs_dir = Path(tempfile.mkdtemp(prefix="nsqbench-certs-"))
        settings = replace(settings, certs=make_certs(certs_dir))
    log(f"reader backlog: {settings.backlog:,} messages, in memory, the same for both daemons")
    try:
        for i in range(args.repeat):
            runs: dict[str, dict[str, Any]] = {name: {} for name in results}
            # alternate which daemon goes first, so drift between the two hits both alike
            order = list(results) if i % 2 == 0 else list(reversed(results))
            for workload in args.workloads:
                for name in order:
                    result = results[name]
                    if result.error is not None:
                        continue
                    try:
                        outcome = run_workload(name, workload, settings)
                    except DaemonError as exc:
                        result.error = f"daemon failed to start: {exc}"
                        log(f"!! [{name}] {result.error}")
                        continue
                    runs[name][workload.name] = outcome
                    status = (
                        f"ERROR {outcome['error']}"
                        if outcome["error"]
                        else describe(outcome["metrics"])
                    )
                    log(f"[{name} {i + 1}] {workload.name} ({outcome['seconds']}s): {status}")
            for name, run in runs.items():
                results[name].runs.append(run)
    finally:
        if certs_dir is not None:
            shutil.rmtree(certs_dir, ignore_errors=True)
    return results, settings


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if unit in ("msgs/s", "us") else f"{value:,.1f}"


def ratio(ours: float | None, ref: float | None) -> float | None:
    return ours / ref if ours is not None and ref else None


def table(results: dict[str, TargetResult], settings: Settings, rows: list[Metric]) -> str:
    """One line per row: the medians, the ratio ours/Go and which way is better. A row with a
    failed run shows FAILED (its other runs are not enough to quote)."""
    names = [n for n in TARGETS if n in results]
    titles = {"reference": "Go nsqd", "ours": "ours"}
    medians = {n: results[n].medians() for n in names}
    width = max(len(label(m, settings)) for m in rows) + 2
    header = f"{'row (200-byte messages)':<{width}}{'unit':<8}" + "".join(
        f"{titles[n]:>12}" for n in names
    )
    if len(names) == 2:
        header += f"{'ours/Go':>9}  better"
    lines = [header, "-" * len(header)]
    for m in rows:
        row = f"{label(m, settings):<{width}}{m.unit:<8}"
        cells = {}
        for n in names:
            cells[n] = "FAILED" if results[n].failed(m.key) else fmt(medians[n][m.key], m.unit)
            row += f"{cells[n]:>12}"
        if len(names) == 2:
            r = ratio(medians["ours"][m.key], medians["reference"][m.key])
            if "FAILED" in cells.values():
                r = None
            better = "higher" if m.higher_is_better else "lower"
            row += f"{'-' if r is None else f'{r:.2f}x':>9}  {better}"
        lines.append(row)
    return "\n".join(lines)


def one_line(text: str, limit: int = 400) -> str:
    line = " | ".join(part.strip() for part in text.splitlines() if part.strip())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def footnotes(results: dict[str, TargetResult]) -> list[str]:
    notes = []
    for r in results.values():
        if r.error:
            notes.append(f"{r.name.upper()} NOT (FULLY) MEASURED: {one_line(r.error)}")
        notes.extend(f"{r.name}: {one_line(e)}" for e in r.errors())
    return notes


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except OSError:
        return ""
    return out.stdout.strip()


def report(
    results: dict[str, TargetResult], args: argparse.Namespace, settings: Settings
) -> dict[str, Any]:
    medians = {n: r.medians() for n, r in results.items()}
    ratios = {}
    if len(results) == 2:
        ratios = {
            m.key: ratio(medians["ours"][m.key], medians["reference"][m.key]) for m in METRICS
        }
    return {
        "created_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": [Path(sys.argv[0]).name, *sys.argv[1:]],
        "git_commit": git_commit(),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "settings": {
            "runfor": args.runfor,
            "repeat": args.repeat,
            "workloads": [w.name for w in args.workloads],
            "mem_queue_size": args.mem_queue_size,
            "backlog": args.backlog,
            "latency_rate": args.latency_rate,
            "latency_seconds": args.latency_seconds,
            "start_samples": args.start_samples,
            "ours_cmd": args.ours_cmd,
        },
        "metrics": {
            m.key: {
                "label": label(m, settings),
                "unit": m.unit,
                "higher_is_better": m.higher_is_better,
            }
            for m in METRICS
        },
        "targets": {
            n: {"version": r.version, "error": r.error, "median": medians[n], "runs": r.runs}
            for n, r in results.items()
        },
        "ratio_ours_over_reference": ratios,
    }


def save(data: dict[str, Any], results_dir: Path) -> Path:
    results_dir.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    path = results_dir / f"{stamp}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)
    return path


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.list:
        for w in WORKLOADS:
            for m in w.rows:
                print(f"{m.key:<16} {w.name:<14} {w.group:<9} {m.label}")
        return 0
    log(
        f"nsqd side-by-side: target={args.target} runfor={args.runfor} repeat={args.repeat} "
        f"rows={','.join(w.name for w in args.workloads)}"
    )
    started = time.monotonic()
    try:
        results, settings = run_all(args)
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    except Exception:
        traceback.print_exc()
        return 1
    path = save(report(results, args, settings), args.results_dir)
    for r in results.values():
        print(f"{r.name}: {r.version or '?'}")
    rows = [m for w in args.workloads for m in w.rows]
    print(table(results, settings, rows))
    print(
        f"medians of {args.repeat} run(s); --runfor {args.runfor}; reader backlog "
        f"{settings.backlog:,}; {os.cpu_count()} cores; {time.monotonic() - started:.0f} s"
    )
    for note in footnotes(results):
        print(f"  * {note}")
    print(f"results: {path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path}")
    return exit_code(results)


def exit_code(results: dict[str, TargetResult]) -> int:
    """0: everything measured; 2: some target or row failed; 1: nothing measured at all."""
    if not any(r.medians()[m.key] is not None for r in results.values() for m in METRICS):
        return 1
    if any(r.error or r.errors() for r in results.values()):
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
