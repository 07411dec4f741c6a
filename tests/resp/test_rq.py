"""python-rq (a real queue library, unchanged) on ours beside redis-server: enqueue, a worker,
a result, the failure registry (tests/resp/rq/check.py)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).with_name("rq")


@pytest.mark.parametrize("kind", ["ours", "redis"])
def test_rq_enqueue_work_result_failure(pair, kind: str) -> None:
    if importlib.util.find_spec("rq") is None:
        pytest.fail("python-rq is needed (the test extra installs it)", pytrace=False)
    redis_server, ours = pair.by_kind["plain"]
    server = ours if kind == "ours" else redis_server
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    done = subprocess.run(
        [sys.executable, "check.py", str(server.port)],
        cwd=HERE, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip().endswith("PASS"), done.stdout + done.stderr
