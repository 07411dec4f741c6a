"""Fixtures for the durability tests (helpers live in helpers.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from . import helpers  # noqa: E402


@pytest.fixture(autouse=True)
def _kill_leftover_daemons() -> Iterator[None]:
    """Whatever a test started and left running is killed (a failing test must not leak)."""
    yield
    while helpers.SPAWNED:
        daemon = helpers.SPAWNED.pop()
        if daemon.alive():
            daemon.kill()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    path.mkdir()
    return path


@pytest.fixture
def daemon(data_dir: Path) -> Iterator[helpers.Daemon]:
    """Our daemon on `data_dir`, stopped cleanly (exit 0) after the test."""
    with helpers.running("ours", data_dir) as d:
        yield d


@pytest.fixture
def reference() -> Path:
    """The Go nsqd v1.3.0 binary (the test fails if it cannot be installed)."""
    binary = helpers.reference_binary()
    if binary is None:
        pytest.fail(f"reference nsqd unavailable: {helpers.reference_problem()}", pytrace=False)
    return binary


@pytest.fixture(params=["ours", "reference"])
def kind(request: pytest.FixtureRequest) -> str:
    """Runs the test on ours and on the Go nsqd: the reference run proves the test right."""
    if request.param == "reference" and helpers.reference_binary() is None:
        pytest.fail(f"reference nsqd unavailable: {helpers.reference_problem()}", pytrace=False)
    return request.param
