"""ioredis (Node) unchanged against ours, and the same check against redis-server (which
proves the check): tests/resp/ioredis/check.js, installed with `npm ci` from its lock file."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .helpers import node_project

HERE = Path(__file__).with_name("ioredis")


def _setup() -> str:
    return node_project(HERE, "ioredis")


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
