"""Real NSQ clients (go-nsq v1.1.0, nsqjs, pynsq 0.9.1) run the same checks against the real
nsqd v1.3.0 and ours, through ``python -m conformance.clients --target both``.

Nothing is skipped: if Go, Node/npm or pynsq cannot be set up, or the reference nsqd cannot be
installed, these tests fail and say why. The whole run takes about 25 s (its client runs at once).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # plain `pytest` (not `python -m pytest`) from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from conformance.clients import runner  # noqa: E402

# Generous: a first run also downloads go-nsq (Go module proxy) and nsqjs (npm) and builds.
RUN_TIMEOUT_S = 1200.0


@pytest.fixture(scope="module")
def client_run() -> str:
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "conformance.clients", "--target", "both"],
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else ""
        pytest.fail(f"python -m conformance.clients ran over {RUN_TIMEOUT_S:.0f}s:\n{out}")
    output = proc.stdout + proc.stderr
    print(output)  # shown by pytest for failing tests
    return output


def _failures(output: str) -> str:
    return "\n".join(line for line in output.splitlines() if " FAIL " in line)


def test_client_setup(client_run: str) -> None:
    """go build (go-nsq), npm ci (nsqjs) and the pynsq import all succeeded."""
    setup = client_run.split("== reference", 1)[0]
    assert "SETUP FAILED" not in setup, setup
    for client in runner.CLIENTS:
        assert re.search(rf"^  {client}\s+ready", setup, re.M), setup


@pytest.mark.parametrize("target", ["reference", "ours"])
def test_clients_pass(client_run: str, target: str) -> None:
    """Every client check passes against the daemon."""
    m = re.search(
        rf"^clients: (\d+) checks, (\d+) passed, (\d+) failed \({target}:", client_run, re.M
    )
    assert m, f"no summary line for {target}:\n{client_run}"
    total, passed, failed = map(int, m.groups())
    assert total == len(runner.CHECKS) * len(runner.CLIENTS), m.group(0)
    assert failed == 0, f"{m.group(0)}\n{_failures(client_run)}"
    assert passed == total


def test_clients_implement_the_same_checks(client_run: str) -> None:
    """Each client program lists exactly the runner's checks, in the same order."""
    for client, setup in runner.SETUPS.items():
        argv = [*setup(), "-list" if client == "gonsq" else "--list"]
        proc = subprocess.run(
            argv,
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert tuple(proc.stdout.split()) == runner.CHECKS, (client, proc.stdout)
