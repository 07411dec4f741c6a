"""ioredis (Node) unchanged against ours, and the same check against redis-server (which
proves the check): tests/resp/ioredis/check.js, installed with `npm ci` from its lock file."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).with_name("ioredis")


def _setup() -> str:
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail("node and npm are needed for the ioredis check", pytrace=False)
    stamp = HERE / "node_modules" / ".stamp"
    lock = (HERE / "package-lock.json").read_text()
    if not stamp.exists() or stamp.read_text() != lock:
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=HERE, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        stamp.write_text(lock)
    return node


@pytest.mark.parametrize("kind", ["ours", "redis"])
def test_ioredis(pair, kind: str) -> None:
    node = _setup()
    redis_server, ours = pair.by_kind["plain"]
    server = ours if kind == "ours" else redis_server
    done = subprocess.run(
        [node, "check.js", str(server.port)],
        cwd=HERE, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip().endswith("PASS"), done.stdout + done.stderr
