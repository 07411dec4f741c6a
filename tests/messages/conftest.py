"""Fixtures for the HTTP message-access tests: a data directory and our daemon (the durability
tests' process helper)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(REPO_ROOT / "tests"))

from durability import helpers  # noqa: E402


@pytest.fixture(autouse=True)
def _kill_leftover_daemons() -> Iterator[None]:
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
    with helpers.running("ours", data_dir) as d:
        yield d
