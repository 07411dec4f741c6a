"""Fixtures for the queue-policy tests: a data directory, our daemon (the durability tests'
process helper), and the go-nsq consumer in gonsq/ built once per session."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(REPO_ROOT / "tests"))
sys.path.append(str(REPO_ROOT / "scripts"))
import gobuild  # noqa: E402

# the durability tests' fixtures: a data directory, our daemon on it, no daemon left behind
from durability.conftest import _kill_leftover_daemons, daemon, data_dir  # noqa: E402, F401

GONSQ_DIR = Path(__file__).resolve().parent / "gonsq"
GONSQ_BIN = GONSQ_DIR / "bin" / "policy-consumer"


@pytest.fixture(scope="session")
def gonsq_consumer() -> Path:
    """Build gonsq/ (go-nsq v1.1.0 per go.mod/go.sum) unless up to date."""
    try:
        return gobuild.build(GONSQ_DIR, GONSQ_BIN)
    except gobuild.GoBuildError as exc:
        pytest.fail(f"the go-nsq consumer did not build: {exc}", pytrace=False)
