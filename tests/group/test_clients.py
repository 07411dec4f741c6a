"""The real clients' checks (go-nsq v1.1.0, nsqjs, pynsq 0.9.1: publishers and consumers,
fan-out, a split channel, backoff, deferral...) against `nsqd --workers=2`: their connections
land in either worker (SO_REUSEPORT), so publishers and consumers meet across partitions."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.ops.conftest import REPO_ROOT, nsqd_process

RUN_TIMEOUT_S = 900.0
COMMAND = (sys.executable, "-m", "conformance.clients", "--target", "ours")


def test_every_client_check_passes_against_a_group() -> None:
    try:
        proc = subprocess.run(
            [*COMMAND, "--ours-flags=--workers=2"],
            cwd=REPO_ROOT,
            env=nsqd_process.pythonpath_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"python -m conformance.clients ran over {RUN_TIMEOUT_S:.0f}s")
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert " FAIL " not in output, output
    assert "clients: 24 checks, 24 passed, 0 failed" in output, output
