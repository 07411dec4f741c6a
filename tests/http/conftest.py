"""Fixtures for the HTTP API tests: our nsqd (and the Go reference for the differential
checks) as subprocesses with small limits, one per test module; teardown wants exit 0."""

from __future__ import annotations

import os
from collections.abc import Iterator

import httpx
import pytest
from nsqhttp_support import Daemon, ReferenceUnavailable, reference_nsqd, start

# nsqd's own HTTP tests use limits like these; small enough to hit every size error cheaply
LIMITS = ("--max-msg-size=100", "--max-body-size=1000", "--max-req-timeout=10s")


def _run(kind: str, *args: str) -> Iterator[Daemon]:
    daemon = start(kind, *args)
    try:
        yield daemon
    finally:
        log = daemon.log()
        rc = daemon.stop()
    assert rc == 0, f"{kind} nsqd exited {rc} after SIGTERM; log:\n{log[-3000:]}"


# The hard-coded answers in these suites are nsqd v1.3.0's: every test that takes the `nsqd`
# fixture runs against ours and against the Go binary, which proves the expectations right. A
# module that compares the two itself (it also takes `reference`) sets DAEMONS = ("ours",).
# HTTP_TESTS_DAEMON=ours|reference narrows a local run to one of them.
DAEMONS = tuple(os.environ.get("HTTP_TESTS_DAEMON", "ours,reference").split(","))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "nsqd" in metafunc.fixturenames:
        kinds = [k for k in getattr(metafunc.module, "DAEMONS", DAEMONS) if k in DAEMONS]
        metafunc.parametrize("nsqd", kinds, indirect=True, scope="module")


def _need_reference() -> None:
    try:
        reference_nsqd()
    except ReferenceUnavailable as exc:  # the suite needs it: fail, never skip
        pytest.fail(f"reference nsqd unavailable: {exc}", pytrace=False)


@pytest.fixture(scope="module")
def nsqd(request: pytest.FixtureRequest) -> Iterator[Daemon]:
    """The daemon under test: ours, or the Go nsqd (see DAEMONS)."""
    kind = request.param
    if kind == "reference":
        _need_reference()
    yield from _run(kind, *LIMITS)


@pytest.fixture(scope="module")
def reference() -> Iterator[Daemon]:
    _need_reference()
    yield from _run("reference", *LIMITS)


@pytest.fixture
def http(nsqd: Daemon) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=nsqd.url, timeout=5.0, follow_redirects=False) as client:
        yield client
