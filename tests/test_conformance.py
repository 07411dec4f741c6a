"""Differential conformance: every scenario of conformance/scenarios against the real nsqd v1.3.0
and ours (see conformance/README.md). One test per scenario; a difference not listed in
conformance/KNOWN_GAPS.md fails with both transcripts side by side, a listed one is an xfail."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance import daemons
from conformance.scenario import Scenario, ScenarioError, load_scenarios, parse_text
from conformance.suite import SuiteResult, run_suite, stale_gaps
from conformance.transcript import StepRecord, Transcript, same
from conformance.wire import Event

try:
    SCENARIOS: list[Scenario] = load_scenarios()
    LOAD_ERROR: str | None = None
except ScenarioError as exc:  # reported by test_scenarios_load instead of breaking collection
    SCENARIOS, LOAD_ERROR = [], str(exc)


@pytest.fixture(scope="module")
def suite() -> SuiteResult:
    try:
        daemons.reference_bin()
    except Exception as exc:  # ReferenceInstallError, or no Go toolchain at all
        pytest.fail(
            f"the reference nsqd v1.3.0 could not be installed (scripts/install_reference.sh):"
            f"\n{exc}",
            pytrace=False,
        )
    result = run_suite(SCENARIOS)
    print(result.summary())
    return result


def test_scenarios_load() -> None:
    assert LOAD_ERROR is None, LOAD_ERROR
    assert len(SCENARIOS) >= 120


def test_known_gaps_name_existing_scenarios() -> None:
    assert stale_gaps(SCENARIOS) == [], "conformance/KNOWN_GAPS.md names unknown scenario ids"


def test_order_any_compares_a_steps_events_as_a_set(tmp_path: Path) -> None:
    """`order: any` (a reply order that is a race inside nsqd): swapped events are the same
    transcript; a missing or different one is not; without it the order counts."""
    text = "scenario: racy\norder: any\nsend: PUB t\nscenario: strict\nsend: PUB t\n"
    racy, strict = parse_text(text, tmp_path / "x.txt")
    assert (racy.any_order, strict.any_order) == (True, False)
    with pytest.raises(ScenarioError):
        parse_text("scenario: bad\norder: sometimes\nsend: x\n", tmp_path / "x.txt")

    def transcript(any_order: bool, *texts: str) -> Transcript:
        events = [Event("a", "response", t) for t in texts]
        return Transcript("t", "s", [StepRecord(1, "a", "PUB", events)], any_order=any_order)

    assert same(transcript(True, "OK", "x"), transcript(True, "x", "OK"))
    assert not same(transcript(True, "OK", "x"), transcript(True, "OK"))
    assert not same(transcript(True, "OK", "x"), transcript(True, "OK", "y"))
    assert not same(transcript(False, "OK", "x"), transcript(False, "x", "OK"))


def test_daemons_survived(suite: SuiteResult) -> None:
    assert not suite.notes, "\n".join(suite.notes)


@pytest.mark.parametrize("scenario_id", [s.id for s in SCENARIOS])
def test_scenario(suite: SuiteResult, scenario_id: str) -> None:
    outcome = next(o for o in suite.outcomes if o.id == scenario_id)
    if outcome.identical:
        return
    details = "\n".join(outcome.report())
    if outcome.gap is not None:
        pytest.xfail(f"known gap ({outcome.gap})")
    pytest.fail(
        f"{scenario_id} [{outcome.scenario.where}] differs from the reference nsqd:\n{details}",
        pytrace=False,
    )
