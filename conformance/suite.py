"""Run scenarios against one or both daemons and judge each: identical or differs.

Scenarios are grouped by (flags, daemon group); each target gets one daemon per group. All runs
(every scenario on every target) go through one thread pool, longest scenarios first; scenarios
sharing a daemon use their own topics, so they do not interfere.
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from . import daemons
from .gaps import load_gaps
from .runner import DEFAULT_WINDOW, run_scenario
from .scenario import Scenario, parse_duration
from .transcript import Transcript, same, side_by_side

DEFAULT_JOBS: Final = 64
Group = tuple[tuple[str, ...], str]


@dataclass
class Outcome:
    scenario: Scenario
    transcripts: dict[str, Transcript]
    identical: bool
    gap: str | None = None  # KNOWN_GAPS.md reason when the scenario is listed there

    @property
    def id(self) -> str:
        return self.scenario.id

    @property
    def unexpected(self) -> bool:
        """A difference that is not excused by KNOWN_GAPS.md."""
        return not self.identical and self.gap is None

    def report(self) -> list[str]:
        """Why it differs: both transcripts side by side (or the one), failed expectations."""
        ts = list(self.transcripts.values())
        lines = (
            side_by_side(ts[0], ts[1])
            if len(ts) == 2
            else ["       " + ts[0].target] + ["  " + line for line in ts[0].lines()]
        )
        for t in ts:
            lines.extend(f"  expectation failed on {t.target}: {f}" for f in t.failures)
        return lines


@dataclass
class SuiteResult:
    outcomes: list[Outcome]
    targets: tuple[str, ...]
    notes: list[str] = field(default_factory=list)

    @property
    def identical(self) -> int:
        return sum(o.identical for o in self.outcomes)

    @property
    def differ(self) -> int:
        return len(self.outcomes) - self.identical

    @property
    def unexpected(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.unexpected]

    def summary(self) -> str:
        return (
            f"conformance: {len(self.outcomes)} scenarios, {self.identical} identical, "
            f"{self.differ} differ"
        )


def estimated_seconds(sc: Scenario, window: float) -> float:
    w = sc.window if sc.window is not None else window
    total = 0.0
    for step in sc.steps:
        if step.kind == "sleep":
            total += parse_duration(step.arg)
        elif step.kind not in ("conn", "expect"):
            total += w
    return total


def judge(sc: Scenario, transcripts: dict[str, Transcript], gaps: dict[str, str]) -> Outcome:
    ts = list(transcripts.values())
    ok = all(not t.failures and not t.error for t in ts)
    if len(ts) == 2:
        ok = ok and same(ts[0], ts[1])
    return Outcome(sc, transcripts, ok, gaps.get(sc.id))


def run_suite(
    scenarios: list[Scenario],
    targets: tuple[str, ...] = daemons.TARGETS,
    window: float = DEFAULT_WINDOW,
    jobs: int = DEFAULT_JOBS,
    progress: Callable[[str], None] = lambda _msg: None,
    ours_root: Path = daemons.REPO_ROOT,
) -> SuiteResult:
    if "reference" in targets:
        daemons.reference_bin()  # install it now (or fail) rather than in a worker thread
    groups: dict[Group, list[Scenario]] = {}
    for sc in scenarios:
        groups.setdefault(sc.group, []).append(sc)
    keys = [(g, t) for g in groups for t in targets]
    ports = daemons.free_ports(2 * len(keys))
    result = SuiteResult([], targets)
    running: dict[tuple[Group, str], daemons.Daemon] = {}
    start_errors: dict[tuple[Group, str], str] = {}

    with cf.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        starts = {
            pool.submit(daemons.start, t, g[0], (ports[2 * i], ports[2 * i + 1]), ours_root): (
                g,
                t,
            )
            for i, (g, t) in enumerate(keys)
        }
        for fut in cf.as_completed(starts):
            key = starts[fut]
            try:
                running[key] = fut.result()
            except daemons.DaemonError as exc:
                start_errors[key] = str(exc)
                result.notes.append(f"could not start {key[1]} nsqd {' '.join(key[0][0])}: {exc}")
        progress(f"started {len(running)} daemons for {len(groups)} flag sets")
        try:
            runs: dict[cf.Future[Transcript], tuple[Scenario, str]] = {}
            order = sorted(scenarios, key=lambda s: -estimated_seconds(s, window))
            for sc in order:
                for t in targets:
                    d = running.get((sc.group, t))
                    if d is None:
                        continue
                    runs[pool.submit(run_scenario, sc, d.addr, t, window)] = (sc, t)
            transcripts: dict[str, dict[str, Transcript]] = {sc.id: {} for sc in scenarios}
            for fut in cf.as_completed(runs):
                sc, t = runs[fut]
                transcripts[sc.id][t] = fut.result()
            for sc in scenarios:
                for t in targets:
                    if t not in transcripts[sc.id]:
                        err = start_errors.get((sc.group, t), "daemon not started")
                        transcripts[sc.id][t] = Transcript(t, sc.id, error=err.splitlines()[0])
            for (g, t), d in running.items():
                if not d.alive():
                    result.notes.append(
                        f"{t} nsqd {' '.join(g[0])} died during the run "
                        f"(exit {d.proc.returncode}):\n{d.log_tail()}"
                    )
        finally:
            for d in running.values():
                d.stop()

    gaps = load_gaps()
    for sc in scenarios:
        ordered = {t: transcripts[sc.id][t] for t in targets}
        result.outcomes.append(judge(sc, ordered, gaps))
    return result


def stale_gaps(scenarios: list[Scenario]) -> list[str]:
    """Ids named in KNOWN_GAPS.md that no scenario has (pass the full scenario list)."""
    return sorted(set(load_gaps()) - {sc.id for sc in scenarios})


def format_result(result: SuiteResult, verbose: bool = False) -> list[str]:
    """Human report: one line per scenario, details for differing ones, summary last."""
    lines: list[str] = []
    for o in result.outcomes:
        status = "identical" if o.identical else "differs"
        extra = f"  (known gap: {o.gap})" if o.gap and not o.identical else ""
        if o.gap and o.identical and len(result.targets) == 2:
            extra = "  (listed in KNOWN_GAPS.md but identical now: remove it)"
        lines.append(f"{status:<9} {o.id}  [{o.scenario.where}]{extra}")
        if not o.identical or verbose:
            lines.extend(o.report())
            lines.append("")
    lines.extend(f"note: {n}" for n in result.notes)
    lines.append(result.summary())
    return lines
