"""Side-by-side benchmark: the real nsqd v1.3.0 (Go) against ours (python -m nsqd), same workloads.

    python bench/run.py [--target ours|reference|both] [--runfor 10s] [--quick] [--repeat 3]
                        [--only bench,mpub,latency,rss]

Each workload gets a freshly started daemon (free 127.0.0.1 ports, empty temp --data-path, the same
flags for both); repeats alternate reference / ours so drift hits both alike. Medians are printed as
a table with the ratio ours/reference and written to bench/results/<UTC time>.json.

Workloads (200-byte messages):
  bench    Go bench_writer MPUB batch 200, bench_writer batch 1, then bench_reader (RDY 2500) on the
           backlog they left (one daemon, topic sub_bench, --runfor each)
  mpub     200,000 messages by MPUB (batches of 200, one raw socket), then consumed on one channel,
           RDY 2500, FINs batched; msgs/s each way
  latency  publish→deliver latency p50/p99 of a steady 10k msgs/s PUB stream (~5 s)
  rss      daemon VmRSS idle and with 1,000,000 messages queued in memory on one channel

If ours cannot start (`python -m nsqd` fails) that is reported and the reference is still measured.
Exit status: 0 all measured, 2 some target/workload failed, 1 nothing measured.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from daemons import (
    OURS_COMMAND,
    REPO_ROOT,
    TARGETS,
    DaemonError,
    reference_version,
    start_daemon,
)
from workloads import WORKLOADS, Metrics, Settings

sys.path.insert(0, str(REPO_ROOT / "scripts"))
from reference import ReferenceInstallError, ensure_reference

RESULTS_DIR: Final = REPO_ROOT / "bench" / "results"
DURATION: Final = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)$")
UNIT_SECONDS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str
    higher_is_better: bool


METRICS: Final = (
    Metric("writer_b200", "bench_writer, batch 200", "msgs/s", True),
    Metric("writer_b1", "bench_writer, batch 1", "msgs/s", True),
    Metric("reader", "bench_reader on backlog, RDY 2500", "msgs/s", True),
    Metric("mpub200k_pub", "MPUB 200k: publish (batch 200)", "msgs/s", True),
    Metric("mpub200k_sub", "MPUB 200k: consume (RDY 2500, FIN)", "msgs/s", True),
    Metric("latency_p50_us", "latency p50 @ 10k msgs/s", "us", False),
    Metric("latency_p99_us", "latency p99 @ 10k msgs/s", "us", False),
    Metric("rss_idle_mib", "RSS idle", "MiB", False),
    Metric("rss_1m_mib", "RSS with 1M queued", "MiB", False),
)


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

    def flag_any(self, key: str) -> bool:
        return any(w.get("metrics", {}).get(key) is True for w in self.all_workloads())

    def medians(self) -> dict[str, float | None]:
        return {m.key: median_or_none(self.values(m.key)) for m in METRICS}

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
        help="bench_writer/bench_reader duration (default 10s, quick 2s)",
    )
    p.add_argument("--quick", action="store_true", help="runfor 2s, 1 repeat, 2 s latency run")
    p.add_argument("--repeat", type=int, help="repeats per measurement (default 3, quick 1)")
    p.add_argument("--only", default=",".join(WORKLOADS), help="comma list of workloads")
    p.add_argument("--mem-queue-size", type=int, default=10_000_000)
    p.add_argument("--latency-rate", type=int, default=10_000, help="msgs/s")
    p.add_argument("--latency-seconds", type=float, help="default 5, quick 2")
    p.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    p.add_argument(
        "--ours-cmd",
        default=shlex.join(OURS_COMMAND),
        help="command line that starts our daemon (the nsqd flags are appended)",
    )
    args = p.parse_args(argv)
    args.runfor = args.runfor or ("2s" if args.quick else "10s")
    args.repeat = args.repeat or (1 if args.quick else 3)
    args.latency_seconds = args.latency_seconds or (2.0 if args.quick else 5.0)
    args.only = [w.strip() for w in args.only.split(",") if w.strip()]
    unknown = set(args.only) - set(WORKLOADS)
    if unknown:
        p.error(f"unknown workloads {sorted(unknown)}; choose from {list(WORKLOADS)}")
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
    return results, bin_dir


def run_workload(target: str, workload: str, settings: Settings) -> dict[str, Any]:
    """One workload on a fresh daemon: {"metrics", "error", "seconds"}; DaemonError if no start."""
    started = time.monotonic()
    daemon = start_daemon(target, settings.mem_queue_size, settings.bin_dir, settings.ours_cmd)
    with daemon:
        try:
            metrics: Metrics = WORKLOADS[workload](daemon, settings)
            error = None
        except Exception as exc:
            metrics, error = {}, f"{type(exc).__name__}: {exc}"
            if not daemon.alive():
                error += f"\n(daemon died) {daemon.log_tail(800)}"
    return {"metrics": metrics, "error": error, "seconds": round(time.monotonic() - started, 2)}


def describe(metrics: Metrics) -> str:
    return ", ".join(
        f"{k}={v:,.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in metrics.items()
    )


def run_repeat(result: TargetResult, workloads: list[str], settings: Settings, i: int) -> None:
    """All chosen workloads once for one target; the target fails if its daemon won't start."""
    run: dict[str, Any] = {}
    for workload in workloads:
        try:
            outcome = run_workload(result.name, workload, settings)
        except DaemonError as exc:
            result.error = f"daemon failed to start: {exc}"
            log(f"!! [{result.name}] {result.error}")
            break
        run[workload] = outcome
        status = f"ERROR {outcome['error']}" if outcome["error"] else describe(outcome["metrics"])
        log(f"[{result.name} {i + 1}] {workload} ({outcome['seconds']}s): {status}")
    result.runs.append(run)


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
    )
    for i in range(args.repeat):
        for result in results.values():
            if result.error is None:
                run_repeat(result, args.only, settings, i)
    return results, settings


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if unit == "msgs/s" else f"{value:,.1f}"


def ratio(ours: float | None, ref: float | None) -> float | None:
    return ours / ref if ours is not None and ref else None


def table(results: dict[str, TargetResult]) -> str:
    names = list(results)
    medians = {n: r.medians() for n, r in results.items()}
    header = f"{'workload (200-byte messages)':<38} {'unit':<7}" + "".join(
        f"{n:>13}" for n in names
    )
    if len(names) == 2:
        header += f"{'ours/ref':>10}  better"
    lines = [header, "-" * len(header)]
    for m in METRICS:
        if all(medians[n][m.key] is None for n in names):
            continue
        row = f"{m.label:<38} {m.unit:<7}"
        for n in names:
            mark = "≥" if m.key == "reader" and results[n].flag_any("reader_drained") else ""
            row += f"{mark + fmt(medians[n][m.key], m.unit):>13}"
        if len(names) == 2:
            r = ratio(medians["ours"][m.key], medians["reference"][m.key])
            better = "higher" if m.higher_is_better else "lower"
            row += f"{'-' if r is None else f'{r:.2f}x':>10}  {better}"
        lines.append(row)
    return "\n".join(lines)


def one_line(text: str, limit: int = 400) -> str:
    line = " | ".join(part.strip() for part in text.splitlines() if part.strip())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def footnotes(results: dict[str, TargetResult]) -> list[str]:
    notes = []
    if any(r.flag_any("reader_drained") for r in results.values()):
        notes.append(
            "≥ bench_reader drained the whole backlog before --runfor ended: a lower bound."
        )
    for r in results.values():
        if any(w.get("metrics", {}).get("rss_1m_confirmed") is False for w in r.all_workloads()):
            notes.append(
                f"{r.name}: 1M queued not confirmed by /stats; RSS read 1 s after the last MPUB."
            )
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


def report(results: dict[str, TargetResult], args: argparse.Namespace) -> dict[str, Any]:
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
            "workloads": args.only,
            "mem_queue_size": args.mem_queue_size,
            "latency_rate": args.latency_rate,
            "latency_seconds": args.latency_seconds,
            "ours_cmd": args.ours_cmd,
        },
        "metrics": {m.key: {"label": m.label, "unit": m.unit} for m in METRICS},
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
    log(f"nsqd side-by-side: target={args.target} runfor={args.runfor} repeat={args.repeat}")
    try:
        results, _ = run_all(args)
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    except Exception:
        traceback.print_exc()
        return 1
    path = save(report(results, args), args.results_dir)
    for r in results.values():
        print(f"{r.name}: {r.version or '?'}")
    print(table(results))
    for note in footnotes(results):
        print(f"  * {note}")
    print(f"results: {path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path}")
    return exit_code(results)


def exit_code(results: dict[str, TargetResult]) -> int:
    """0: everything measured; 2: some target or workload failed; 1: nothing measured at all."""
    if not any(r.medians()[m.key] is not None for r in results.values() for m in METRICS):
        return 1
    if any(r.error or r.errors() for r in results.values()):
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
