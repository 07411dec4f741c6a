"""python -m conformance [--target ours|reference|both] [-k PATTERN] [--window 400ms]
[--retries 2] [--no-retry GLOB] [-v]

Exit status: 0 when every difference is listed in KNOWN_GAPS.md, 1 otherwise, 2 when the suite
could not run (bad scenario file, reference not installable).
"""

from __future__ import annotations

import argparse
import fnmatch
import shlex
import sys
import time
from pathlib import Path

from . import daemons
from .daemons import REPO_ROOT, TARGETS
from .runner import DEFAULT_WINDOW
from .scenario import ScenarioError, load_scenarios, parse_duration
from .suite import DEFAULT_JOBS, RETRIES, format_result, run_suite, stale_gaps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance", description=__doc__)
    parser.add_argument("--target", choices=("ours", "reference", "both"), default="both")
    parser.add_argument(
        "-k",
        "--only",
        action="append",
        default=[],
        metavar="PATTERN",
        help="run only scenarios whose id matches this glob (or contains it); repeatable",
    )
    parser.add_argument(
        "--window",
        default=f"{int(DEFAULT_WINDOW * 1000)}ms",
        help="read window after each step (default %(default)s)",
    )
    parser.add_argument(
        "--retries",
        type=int,
        default=RETRIES,
        help="reruns of a differing scenario, fresh daemons, window doubled (default %(default)s)",
    )
    parser.add_argument(
        "--no-retry",
        action="append",
        default=[],
        metavar="GLOB",
        help="ids expected to differ in this configuration: judged on their first run; repeatable",
    )
    parser.add_argument("--jobs", type=int, default=DEFAULT_JOBS, help="concurrent runs")
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print every transcript, not only differing ones",
    )
    parser.add_argument("--list", action="store_true", help="list scenario ids and exit")
    parser.add_argument(
        "--ours-root",
        type=Path,
        default=REPO_ROOT,
        metavar="DIR",
        help="source tree to run our nsqd from (default: this checkout)",
    )
    parser.add_argument(
        "--ours-flags",
        default="",
        help="flags added to every start of ours, e.g. --ours-flags=--workers=2",
    )
    args = parser.parse_args(argv)
    daemons.OURS_FLAGS[:] = shlex.split(args.ours_flags)

    try:
        scenarios = load_scenarios()
    except ScenarioError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 2
    stale = stale_gaps(scenarios)
    if args.only:
        scenarios = [
            s for s in scenarios if any(fnmatch.fnmatch(s.id, p) or p in s.id for p in args.only)
        ]
    if args.list:
        for s in scenarios:
            flags = " ".join(s.flags)
            print(f"{s.id:<40} {s.where:<24} {flags} {s.doc}")
        return 0
    if not scenarios:
        print("conformance: no scenario selected", file=sys.stderr)
        return 2
    targets = TARGETS if args.target == "both" else (args.target,)
    no_retry = frozenset(
        s.id for s in scenarios if any(fnmatch.fnmatch(s.id, p) for p in args.no_retry)
    )
    start = time.monotonic()
    try:
        result = run_suite(
            scenarios,
            targets,
            parse_duration(args.window),
            args.jobs,
            progress=lambda msg: print(f"conformance: {msg}", file=sys.stderr),
            ours_root=args.ours_root.resolve(),
            retries=args.retries,
            no_retry=no_retry,
        )
    except Exception as exc:  # e.g. ReferenceInstallError
        print(f"conformance: cannot run: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print(f"conformance: ran in {time.monotonic() - start:.1f}s", file=sys.stderr)
    if stale:
        result.notes.append(f"KNOWN_GAPS.md names scenarios that do not exist: {', '.join(stale)}")
    print("\n".join(format_result(result, args.verbose)))
    return 1 if result.unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
