"""What bench/run.py measured, per daemon over all repeats, and how it is reported: the table of
medians with the ratio ours/Go, the footnotes of failed rows, the JSON kept in bench/results/ and
the exit status."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from daemons import REPO_ROOT, TARGETS
from rows import METRICS, WORKLOADS
from workloads import Metric, Settings


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


def label(metric: Metric, settings: Settings) -> str:
    return metric.label.format(
        backlog=f"{settings.backlog / 1e6:g}M",
        rate=f"{settings.latency_rate / 1000:g}k",
        cores=os.cpu_count(),
    )


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


def exit_code(results: dict[str, TargetResult]) -> int:
    """0: everything measured; 2: some target or row failed; 1: nothing measured at all."""
    if not any(r.medians()[m.key] is not None for r in results.values() for m in METRICS):
        return 1
    if any(r.error or r.errors() for r in results.values()):
        return 2
    return 0
