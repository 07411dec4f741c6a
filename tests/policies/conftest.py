"""Fixtures for the queue-policy tests: a data directory, our daemon (the durability tests'
process helper), and the go-nsq consumer in gonsq/ built once per session."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(REPO_ROOT / "tests"))

from durability import helpers  # noqa: E402

GONSQ_DIR = Path(__file__).resolve().parent / "gonsq"
GONSQ_BIN = GONSQ_DIR / "bin" / "policy-consumer"


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


@pytest.fixture(scope="session")
def gonsq_consumer() -> Path:
    """Build gonsq/ (go-nsq v1.1.0 per go.mod/go.sum) unless up to date."""
    go = shutil.which("go") or (
        "/usr/local/go/bin/go" if os.access("/usr/local/go/bin/go", os.X_OK) else None
    )
    if go is None:
        pytest.fail("no Go toolchain to build the go-nsq consumer", pytrace=False)
    env = dict(
        os.environ, GOTOOLCHAIN="local", GOWORK="off", GOFLAGS="-buildvcs=false -mod=readonly"
    )
    version = subprocess.run(
        [go, "env", "GOVERSION"], env=env, capture_output=True, text=True, timeout=60, check=True
    ).stdout.strip()
    digest = hashlib.sha256(version.encode())
    for name in ("main.go", "go.mod", "go.sum"):
        digest.update((GONSQ_DIR / name).read_bytes())
    stamp = GONSQ_BIN.with_name(".build-stamp")
    if not (GONSQ_BIN.exists() and stamp.exists() and stamp.read_text() == digest.hexdigest()):
        GONSQ_BIN.parent.mkdir(exist_ok=True)
        tmp = GONSQ_BIN.with_name(f".build.{os.getpid()}")
        out = subprocess.run(
            [go, "build", "-o", str(tmp), "."],
            cwd=GONSQ_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        tmp.replace(GONSQ_BIN)
        stamp.write_text(digest.hexdigest())
    return GONSQ_BIN
