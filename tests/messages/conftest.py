"""Fixtures for the HTTP message-access tests: a data directory and our daemon (the durability
tests' process helper)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(REPO_ROOT / "tests"))

# the durability tests' fixtures: a data directory, our daemon on it, no daemon left behind
from durability.conftest import _kill_leftover_daemons, daemon, data_dir  # noqa: E402, F401
