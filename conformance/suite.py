"""Run scenarios against one or both daemons and judge each: identical or differs.

Scenarios are grouped by (flags, daemon group); each target gets one daemon per group. All runs
(every scenario on every target) go through one thread pool, longest scenarios first; scenarios
sharing a daemon use their own topics, so they do not interfere. A scenario that differs runs
again on fresh daemons with its read window doubled (RETRIES times at most; a timed one with the
same window): only a difference that persists counts, and the report says which run and window
decided.
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final

from . import daemons
from .gaps import load_gaps
from .runner import DEFAULT_WINDOW, run_scenario
from .scenario import Scenario, parse_duration
from .transcript import Transcript, same, side_by_side

DEFAULT_JOBS: Final = 64
# Reruns of a differing scenario (windows 2x, 4x): a reply stretched past the 400ms window on a
# loaded machine (CI: 2 cores at load 6-10) lands in 800ms or 1600ms; a wrong byte stays wrong.
RETRIES: Final = 2
Group = tuple[tuple[str, ...], str]


@dataclass
class Outcome:
    scenario: Scenario
    transcripts: dict[str, Transcript]
    identical: bool
    gap: str | None = None  # KNOWN_GAPS.md reason when the scenario is listed there
    runs: int = 1  # the run that decided (1 = the first; more when earlier runs differed)
    earlier: list[Outcome] = field(default_factory=list)  # those earlier, differing runs

    @property
    def window(self) -> float | None:
        """The read window of the deciding run (its scenario's, set by run_suite)."""
        return self.scenario.window

    def retry_note(self) -> str:
        """Which run decided and with which window, when it was not the first one."""
        if self.runs == 1:
            return ""
        window = f"{(self.window or 0) * 1000:.0f}ms"
        verdict = "identical" if self.identical else "still differs"
        return f"  ({verdict} on run {self.runs}, window {window})"

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


def _start_daemons(
    pool: cf.ThreadPoolExecutor,
    keys: list[tuple[Group, str]],
    ours_root: Path,
    notes: list[str],
) -> tuple[dict[tuple[Group, str], daemons.Daemon], dict[tuple[Group, str], str]]:
    """One fresh daemon per (group, target), all started together; failures become notes."""
    ports = daemons.free_ports(2 * len(keys))
    starts = {
        pool.submit(daemons.start, t, g[0], (ports[2 * i], ports[2 * i + 1]), ours_root): (g, t)
        for i, (g, t) in enumerate(keys)
    }
    running: dict[tuple[Group, str], daemons.Daemon] = {}
    start_errors: dict[tuple[Group, str], str] = {}
    for fut in cf.as_completed(starts):
        key = starts[fut]
        try:
            running[key] = fut.result()
        except daemons.DaemonError as exc:
            start_errors[key] = str(exc)
            notes.append(f"could not start {key[1]} nsqd {' '.join(key[0][0])}: {exc}")
    return running, start_errors


def _run_round(
    scenarios: list[Scenario],
    targets: tuple[str, ...],
    jobs: int,
    progress: Callable[[str], None],
    ours_root: Path,
    notes: list[str],
) -> dict[str, dict[str, Transcript]]:
    """Every scenario on every target, on daemons started for this round and stopped after it.
    Each scenario's `window` is the one it runs with."""
    groups = list(dict.fromkeys(sc.group for sc in scenarios))
    keys = [(g, t) for g in groups for t in targets]
    transcripts: dict[str, dict[str, Transcript]] = {sc.id: {} for sc in scenarios}
    with cf.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        running, start_errors = _start_daemons(pool, keys, ours_root, notes)
        progress(f"started {len(running)} daemons for {len(groups)} flag sets")
        try:
            runs: dict[cf.Future[Transcript], tuple[Scenario, str]] = {}
            for sc in sorted(scenarios, key=lambda s: -estimated_seconds(s, DEFAULT_WINDOW)):
                for t in targets:
                    d = running.get((sc.group, t))
                    if d is not None:
                        runs[pool.submit(run_scenario, sc, d.addr, t)] = (sc, t)
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
                    notes.append(
                        f"{t} nsqd {' '.join(g[0])} died during the run "
                        f"(exit {d.proc.returncode}):\n{d.log_tail()}"
                    )
        finally:
            for d in running.values():
                d.stop()
    return {sc.id: {t: transcripts[sc.id][t] for t in targets} for sc in scenarios}


def run_suite(
    scenarios: list[Scenario],
    targets: tuple[str, ...] = daemons.TARGETS,
    window: float = DEFAULT_WINDOW,
    jobs: int = DEFAULT_JOBS,
    progress: Callable[[str], None] = lambda _msg: None,
    ours_root: Path = daemons.REPO_ROOT,
    retries: int = RETRIES,
    no_retry: frozenset[str] = frozenset(),
) -> SuiteResult:
    """Run and judge every scenario. One that differs (not a known gap, not in `no_retry`: ids
    the caller expects to differ) runs again, up to `retries` times, on fresh daemons (both
    targets) with its window doubled each time (see _windowed): a loaded machine can stretch a
    reply past the window, a real difference persists."""
    if "reference" in targets:
        daemons.reference_bin()  # install it now (or fail) rather than in a worker thread
    gaps = load_gaps()
    result = SuiteResult([], targets)
    outcomes: dict[str, Outcome] = {}
    todo = scenarios
    for run in range(1, retries + 2):
        windowed = [_windowed(sc, window, run) for sc in todo]
        transcripts = _run_round(windowed, targets, jobs, progress, ours_root, result.notes)
        for sc in windowed:
            earlier = outcomes.get(sc.id)
            outcome = outcomes[sc.id] = judge(sc, transcripts[sc.id], gaps)
            outcome.runs = run
            outcome.earlier = [*earlier.earlier, earlier] if earlier else []
        todo = [sc for sc in todo if outcomes[sc.id].unexpected and sc.id not in no_retry]
        if not todo or run > retries:
            break
        progress(f"{len(todo)} differ: running them again on fresh daemons, longer windows")
    result.outcomes = [outcomes[sc.id] for sc in scenarios]
    return result


def _windowed(sc: Scenario, window: float, run: int) -> Scenario:
    """`sc` for its `run`-th run, with its window (its own `window:` or the suite's) doubled
    per rerun; a timed scenario (a `sleep:` step or its own `window:`) keeps it: its steps sit
    between the daemon's timers (msg_timeout, heartbeats), which a longer window would move a
    step past (a TOUCH after the message timed out), so it reruns as it was."""
    timed = sc.window is not None or any(step.kind == "sleep" for step in sc.steps)
    factor = 1 if timed else 2 ** (run - 1)
    return replace(sc, window=(sc.window if sc.window is not None else window) * factor)


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
        lines.append(f"{status:<9} {o.id}  [{o.scenario.where}]{extra}{o.retry_note()}")
        if not o.identical or verbose:
            lines.extend(o.report())
            lines.append("")
        for e in o.earlier if o.identical else ():  # what the longer window made identical
            lines.append(f"  run {e.runs} (window {(e.window or 0) * 1000:.0f}ms) differed:")
            lines.extend(e.report())
            lines.append("")
    lines.extend(f"note: {n}" for n in result.notes)
    lines.append(result.summary())
    return lines
