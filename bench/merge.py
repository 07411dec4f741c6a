"""The medians over every run of several bench/run.py result files, as one table: for runs made
in separate calls (a lent machine's short calls, one run each), whose medians of one are too noisy
to quote alone.

    python bench/merge.py bench/results/16cores-20261127T2347/all_workers-*.json

Each file's runs per daemon are put together and the table of medians with the ratio ours/Go is
printed as run.py prints it, with each file's own ratio after it so the spread shows."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from report import TargetResult, fmt, ratio


def load(paths: list[Path]) -> tuple[dict[str, TargetResult], dict[str, Any], list[dict]]:
    """The runs of every file per daemon, the rows (labels as the first file saved them) and
    each file's own medians."""
    docs = [json.loads(p.read_text()) for p in paths]
    results: dict[str, TargetResult] = {}
    for doc in docs:
        for name, target in doc["targets"].items():
            merged = results.setdefault(name, TargetResult(name, target.get("version", "")))
            merged.runs.extend(target["runs"])
    return results, docs[0]["metrics"], [doc["targets"] for doc in docs]


def merged_table(paths: list[Path]) -> str:
    results, metrics, each = load(paths)
    medians = {n: r.medians() for n, r in results.items()}
    both = "reference" in results and "ours" in results
    lines = [
        f"{'row (200-byte messages)':<56}{'unit':<8}{'Go nsqd':>12}{'ours':>12}{'ours/Go':>9}"
        f"  each file's ours/Go (medians of {sum(len(r.runs) for r in results.values())} runs"
        f" in {len(paths)} files)"
    ]
    for key, metric in metrics.items():
        ours = medians.get("ours", {}).get(key)
        if ours is None:
            continue
        ref = medians.get("reference", {}).get(key)
        r = ratio(ours, ref) if both else None
        spread = [
            ratio(t["ours"]["median"].get(key), t["reference"]["median"].get(key))
            for t in each
            if "ours" in t and "reference" in t
        ]
        lines.append(
            f"{metric['label']:<56}{metric['unit']:<8}{fmt(ref, metric['unit']):>12}"
            f"{fmt(ours, metric['unit']):>12}{'-' if r is None else f'{r:.2f}x':>9}  "
            + " ".join("-" if s is None else f"{s:.2f}" for s in spread)
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("files", nargs="+", type=Path, help="bench/run.py result files (JSON)")
    args = p.parse_args(argv)
    print(merged_table(args.files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
