"""Celery with its Redis broker and result backend (a real queue library, unchanged) on ours
beside redis-server: a round trip, a retry, and a task whose worker is killed -9 mid-task,
redelivered to the next worker (tests/resp/celery_app/check.py). Its transport uses lists
(BRPOP), sets, sorted sets, pub/sub, MULTI/WATCH and, for results, SUBSCRIBE."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).with_name("celery_app")


@pytest.mark.parametrize("kind", ["ours", "redis"])
def test_celery_round_trip_retry_and_redelivery(pair, kind: str, tmp_path: Path) -> None:
    if importlib.util.find_spec("celery") is None:
        pytest.fail("Celery is needed (the test extra installs it)", pytrace=False)
    redis_server, ours = pair.by_kind["plain"]
    server = ours if kind == "ours" else redis_server
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    done = subprocess.run(
        [sys.executable, "check.py", str(server.port), str(tmp_path / "runs")],
        cwd=HERE, env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip().endswith("PASS"), (
        done.stdout[-3000:] + done.stderr[-3000:]
    )
