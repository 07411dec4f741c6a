"""Differential conformance: every scenario of conformance/scenarios against the real nsqd v1.3.0
and ours (see conformance/README.md). One test per scenario; a difference not listed in
conformance/KNOWN_GAPS.md fails with both transcripts side by side, a listed one is an xfail."""

from __future__ import annotations

from pathlib import Path

import pytest

from conformance import daemons
from conformance.scenario import Scenario, ScenarioError, load_scenarios, parse_text
from conformance.suite import SuiteResult, format_result, run_suite, stale_gaps
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


def test_a_reply_later_than_the_window_is_waited_for_on_a_rerun(tmp_path: Path) -> None:
    """A reply that comes after the read window (a loaded machine's stretched OK, here a
    heartbeat 1s after IDENTIFY against a 600ms window) differs on the first run; the rerun on
    a fresh daemon with the window doubled sees it, and the report names that run's window."""
    (late,) = parse_text(
        "scenario: retry_late_heartbeat\n"
        'send: "  V2IDENTIFY\\n" + body(\'{"heartbeat_interval":1000}\')\n'
        "expect: response OK\nexpect: heartbeat\n",
        tmp_path / "late.txt",
    )
    result = run_suite([late], ("ours",), window=0.6)
    (outcome,) = result.outcomes
    report = "\n".join(format_result(result))
    assert outcome.identical, report
    assert outcome.earlier[0].window == 0.6 and outcome.runs >= 2, report
    assert f"identical on run {outcome.runs}, window " in report


def test_a_real_difference_fails_after_every_rerun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reruns hide no real difference: ours started with --max-msg-size=4 answers a PUB of
    11 bytes with E_BAD_MESSAGE where the real nsqd says OK, and a scenario whose expected
    reply is doctored fails on both; both differ on every run, windows doubled each time but
    a timed scenario's (a `sleep:`: its steps sit between the daemon's timers)."""
    scenarios = parse_text(
        'scenario: retry_real_difference\nsend: "  V2"\npub: $topic hello-world\n'
        'scenario: retry_doctored_expect\nsend: "  V2"\npub: $topic ok\n'
        "expect: response OOK\n"
        'scenario: retry_timed\nsend: "  V2"\nsleep: 10ms\npub: $topic hello-world\n',
        tmp_path / "real.txt",
    )
    monkeypatch.setattr(daemons, "OURS_FLAGS", ["--max-msg-size=4"])
    result = run_suite(scenarios, window=0.1)
    report = "\n".join(format_result(result))
    doubled, kept = (0.1, 0.2, 0.4), (0.1, 0.1, 0.1)
    for outcome, windows in zip(result.outcomes, (doubled, doubled, kept), strict=True):
        assert not outcome.identical and outcome.gap is None, report
        runs = [*outcome.earlier, outcome]
        assert [(o.runs, o.window, o.identical) for o in runs] == [
            (n, w, False) for n, w in enumerate(windows, start=1)
        ], report
        assert f"differs   {outcome.id}" in report
    assert "still differs on run 3, window 400ms" in report
    assert "still differs on run 3, window 100ms" in report
    assert "error E_BAD_MESSAGE" in report and "expect response OOK: got response OK" in report


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
