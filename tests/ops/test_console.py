"""The `nsqd` command itself: `--version` in Go's form (what tools parse), and the console
commands (`nsqd`, `nsqd-certs`) finding our packages whatever PYTHONPATH holds."""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .conftest import HOST, OURS, free_ports, http_get, reference_bin
from .test_config import run

# what tools parse out of `nsqd --version` (gnsq's pattern, from Go's form)
GO_VERSION_LINE = re.compile(r"^[a-z]+ v[0-9.]+(?:-[a-z]+)? \(built w/[a-z0-9.-]+\)$")


def test_version_in_gos_form() -> None:
    ref = run([str(reference_bin("nsqd")), "--version"])
    assert GO_VERSION_LINE.match(ref.stdout.strip()), ref.stdout  # the pattern is Go's form
    out = run([*OURS, "--version"])
    assert out.returncode == 0
    assert out.stdout == f"nsqd v1.3.0 (built w/python{platform.python_version()})\n"
    assert GO_VERSION_LINE.match(out.stdout.strip())


def console_script(name: str) -> str:
    found = shutil.which(name, path=os.path.dirname(sys.executable)) or shutil.which(name)
    assert found, f"the {name} command is not installed (pip install -e . installs it)"
    return found


def test_console_command_runs_with_its_own_checkout_on_pythonpath(tmp_path: Path) -> None:
    """PYTHONPATH naming the folder our packages are in (the checkout, for the editable
    install scripts/test.sh makes): site then skips the install's own .pth entry for it, and
    the command took the folder out as a shadow: `No module named 'nsqd'` (found when a
    test process's Spark session had put the checkout on PYTHONPATH)."""
    import nsqd_launcher

    ours = os.path.dirname(os.path.abspath(nsqd_launcher.__file__))
    env = dict(os.environ, PYTHONPATH=ours)
    for argv in ([console_script("nsqd"), "--version"], [console_script("nsqd-certs"), "--help"]):
        done = subprocess.run(
            argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr


def test_console_command_ignores_a_shadowing_pythonpath(tmp_path: Path) -> None:
    # gnsq's test setup: a folder holding its own nsqd.py on PYTHONPATH
    shadow = tmp_path / "pp"
    shadow.mkdir()
    (shadow / "nsqd.py").write_text("raise SystemExit('the shadow nsqd.py ran')\n")
    env = dict(os.environ, PYTHONPATH=str(shadow))
    for argv in ([console_script("nsqd"), "--version"], [console_script("nsqd-certs"), "--help"]):
        done = subprocess.run(
            argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr
    port, http = free_ports(2)
    proc = subprocess.Popen(
        [
            console_script("nsqd"),
            f"--tcp-address={HOST}:{port}",
            f"--http-address={HOST}:{http}",
            f"--data-path={tmp_path}",
        ],
        cwd=shadow,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 15
        answer = None
        while time.monotonic() < deadline and proc.poll() is None and answer is None:
            try:
                answer = http_get(f"http://{HOST}:{http}/ping")
            except OSError:
                time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert answer is not None
    finally:
        proc.terminate()
        proc.wait(10)
