"""The suite's closing summary counts tests by kind, so that the headline number says what it
holds: most of it is one parser table fed several ways.

- protocol table cases: tests/protocol (the V2 parser's table, byte by byte and split, and the
  same cases replayed against the Go nsqd), one per case;
- differential scenarios: the conformance suite's wire scenarios, and every test run against the
  Go nsqd as well as ours (a `reference` parameter or fixture);
- client checks: real client libraries (go-nsq, nsqjs, pynsq, redis-py, ioredis) against the
  daemons;
- behaviour tests: the rest (end to end, HTTP, durability, TLS, operations, Spark, bench)."""

from __future__ import annotations

from collections import Counter

import pytest

KINDS = ("protocol table cases", "differential scenarios", "client checks", "behaviour tests")
_CLIENT_FILES = (
    "tests/test_clients.py",
    "tests/tls/test_tls_clients.py",
    "tests/e2e/test_pynsq.py",
    "tests/resp/test_redis_py.py",
    "tests/resp/test_ioredis.py",
    "tests/resp/test_redis_cli.py",
)


def kind_of(item: pytest.Item) -> str:
    path = item.nodeid.split("::", 1)[0]
    if path.startswith("tests/protocol/"):
        return "protocol table cases"
    if path.startswith(_CLIENT_FILES):
        return "client checks"
    if path == "tests/test_conformance.py" or "reference" in item.nodeid:
        return "differential scenarios"
    if "reference" in getattr(item, "fixturenames", ()):
        return "differential scenarios"
    return "behaviour tests"


# A test's kind and its summary lines travel in its reports' user_properties: with
# pytest-xdist (scripts/test.sh) the tests are collected and run in worker processes, and
# only their reports reach the process that prints the summary.
KIND = "kind"
SUMMARY = "summary"  # a line for the "pyspark_nsq delivery" section (tests/spark's `report`)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.user_properties.append((KIND, kind_of(item)))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    outcomes: dict[str, Counter[str]] = {k: Counter() for k in KINDS}
    lines: dict[tuple[str, str], None] = {}  # in order, once (every phase's report has them)
    for outcome, reports in terminalreporter.stats.items():
        for report in reports:
            props = getattr(report, "user_properties", None) or []
            for name, value in props:
                if name == SUMMARY:
                    lines[(report.nodeid, value)] = None
            kind = dict(props).get(KIND)
            counted = outcome in ("passed", "failed", "error", "skipped")
            if counted and kind in outcomes and getattr(report, "when", "") in ("call", "setup"):
                outcomes[kind][outcome] += 1
    if lines:
        terminalreporter.section("pyspark_nsq delivery")
        for _, line in lines:
            terminalreporter.write_line(line)
    if not any(outcomes.values()):
        return
    terminalreporter.section("tests by kind")
    for kind in KINDS:
        counts = outcomes[kind]
        parts = ", ".join(f"{n} {o}" for o, n in counts.items() if n) or "none run"
        terminalreporter.write_line(f"{kind:<24} {parts}")
