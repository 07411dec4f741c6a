"""Side-by-side benchmark: the real nsqd v1.3.0 (Go) against ours (python -m nsqd), same workloads.

    python bench/run.py [--target ours|reference|both] [--runfor 5s] [--repeat 3] [--quick]
                        [--only ROWS] [--backlog N] [--workers N] [--list]

Every row runs on freshly started daemons (free 127.0.0.1 ports, empty temp --data-path, the same
flags for both, --mem-queue-size 30M so queued messages stay in memory; the `defaults` rows leave
--mem-queue-size at each daemon's default, 10,000, so a channel's backlog is on disk).
--workers N is passed to ours only. A repeat runs every row
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
  defaults each daemon's default flags: bench_writer MPUB 200 and batch 1 into one channel
           nobody reads (past 10,000 on disk), bench_reader on a backlog on disk (400,000 per
           s of --runfor), bench_writer and bench_reader at once; with the daemon's CPU time
           per message (utime+stime from /proc over the tools' run)
  reader   Go bench_reader (RDY 2500) for --runfor on a backlog of --backlog messages queued in
           memory before it starts; the backlog must outlast the window
  mpub     200,000 messages by MPUB (batches of 200, one raw socket), then consumed on one
           channel, RDY 2500, FINs batched; msgs/s each way
  tls, snappy  MPUB 200,000 on one connection upgraded to TLS / snappy
  rt       single PUB round trips (one request in flight per connection) for --runfor: 1
           connection, and 32 connections over client processes (one per 4 cores, at least 2)
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
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
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
from report import TargetResult, exit_code, footnotes, report, save, table
from rows import WORKLOADS, Workload, select_workloads
from workloads import (
    CertPaths,
    Metrics,
    Settings,
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


def _workers(value: str) -> str:
    """--workers: a whole number of workers, or auto (our daemon's own spelling)."""
    if value != "auto" and not (value.isascii() and value.isdigit() and int(value) > 0):
        raise argparse.ArgumentTypeError(f"not a number of workers or auto: {value!r}")
    return value


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
    p.add_argument(
        "--workers",
        type=_workers,
        help="passed to our daemon as --workers=N|auto (the reference has no such flag)",
    )
    args = p.parse_args(argv)
    if args.workers is not None:
        args.ours_cmd += f" --workers={args.workers}"
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
    if args.workers not in (None, "1"):
        # scaleout is one of our daemons per core behind nsqlookupd, not a group: a group's
        # workers each register there (by design), and the row's count check rightly fails
        if args.only and any(w.name == "scaleout" for w in args.workloads):
            p.error("the scaleout row runs one nsqd per core itself: leave it out with --workers")
        args.workloads = [w for w in args.workloads if w.name != "scaleout"]
    return args


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


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


def run_workload(
    target: str,
    workload: Workload,
    settings: Settings,
    watch: Callable[[Daemon], AbstractContextManager[object]] | None = None,
) -> dict[str, Any]:
    """One workload for one target: {"metrics", "error", "seconds"}; DaemonError if its fresh
    daemon does not start. `watch` is entered once the daemon is up and left when the
    workload is done (bench/profile_rows.py samples the daemon's processes there)."""
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
        mem_queue_size = None if workload.defaults else settings.mem_queue_size
        daemon = start_daemon(target, mem_queue_size, settings.bin_dir, settings.ours_cmd, flags)
        with daemon, watch(daemon) if watch is not None else nullcontext():
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


def make_settings(args: argparse.Namespace, bin_dir: Path | None) -> Settings:
    return Settings(
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


def run_all(args: argparse.Namespace) -> tuple[dict[str, TargetResult], Settings]:
    results, bin_dir = prepare_targets(args.target)
    settings = make_settings(args, bin_dir)
    certs_dir = None
    if any(w.tls for w in args.workloads):
        certs_dir = Path(tempfile.mkdtemp(prefix="nsqbench-certs-"))
        settings = replace(settings, certs=make_certs(certs_dir))
    if any(w.group == "reader" for w in args.workloads):
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


if __name__ == "__main__":
    sys.exit(main())
