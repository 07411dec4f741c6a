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


@pytest.fixture(scope="module")
def nsqd() -> Iterator[Daemon]:
    """Our nsqd; HTTP_TESTS_DAEMON=reference points the same tests at the Go binary."""
    kind = os.environ.get("HTTP_TESTS_DAEMON", "ours")
    if kind == "reference":
        try:
            reference_nsqd()
        except ReferenceUnavailable as exc:
            pytest.skip(f"reference nsqd unavailable: {exc}")
    yield from _run(kind, *LIMITS)


@pytest.fixture(scope="module")
def reference() -> Iterator[Daemon]:
    try:
        reference_nsqd()
    except ReferenceUnavailable as exc:
        pytest.skip(f"reference nsqd unavailable: {exc}")
    yield from _run("reference", *LIMITS)


@pytest.fixture
def http(nsqd: Daemon) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=nsqd.url, timeout=5.0, follow_redirects=False) as client:
        yield client
