"""Real clients against our nsqd over TLS (verification on, against the test CA), snappy,
deflate, TLS+snappy and TLS+deflate: go-nsq v1.1.0, pynsq 0.9.1 and nsqjs 0.13.0 each
publish 1,000 messages per mode (half PUB, half MPUB) and consume them back, and each proves
its connections really upgraded. Then client certificates under require-verify."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tls_support import Certs, Daemon, nsqd_process, start_daemon

HERE = Path(__file__).resolve().parent
MODES = ("tls", "snappy", "deflate", "tls+snappy", "tls+deflate")
CLIENT_TIMEOUT = 90.0  # each program bounds its own waits well below this
RESULT = re.compile(r"^RESULT (PASS|FAIL) (\S+) (\S+) (.*)$", re.M)


@pytest.fixture(scope="module")
def nsqd(certs: Certs) -> Iterator[Daemon]:
    daemon = start_daemon("ours", certs.server_args)
    yield daemon
    assert daemon.stop() == 0


def run_client(argv: list[str], env: dict[str, str] | None = None) -> dict[str, tuple[str, str]]:
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=CLIENT_TIMEOUT, env=env, check=False
    )
    results = {
        mode: (status, detail) for status, mode, _secs, detail in RESULT.findall(proc.stdout)
    }
    if not results:
        pytest.fail(f"no results (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr[-3000:]}")
    return results


def assert_all_passed(results: dict[str, tuple[str, str]]) -> None:
    assert set(results) == set(MODES), results
    failed = {m: d for m, (s, d) in results.items() if s != "PASS"}
    assert not failed, failed


def test_gonsq(nsqd: Daemon, certs: Certs, gonsq_bin: Path) -> None:
    assert_all_passed(
        run_client([str(gonsq_bin), "-nsqd", nsqd.tcp_address, "-ca", certs.ca, "-n", "1000"])
    )


def test_pynsq(nsqd: Daemon, certs: Certs) -> None:
    script = HERE / "pynsq_tls.py"
    argv = [sys.executable, str(script), "--nsqd", nsqd.tcp_address, "--ca", certs.ca]
    assert_all_passed(run_client(argv, nsqd_process.pythonpath_env()))  # for the harness


def test_nsqjs(nsqd: Daemon, certs: Certs, nsqjs_env: dict[str, str]) -> None:
    script = HERE / "nsqjs" / "tls_check.js"
    assert_all_passed(
        run_client(["node", str(script), "--nsqd", nsqd.tcp_address, "--ca", certs.ca], nsqjs_env)
    )


def test_gonsq_client_certificate_require_verify(certs: Certs, gonsq_bin: Path) -> None:
    """With --tls-client-auth-policy=require-verify go-nsq gets in with the CA's client
    certificate and not without one."""
    daemon = start_daemon(
        "ours",
        [
            *certs.server_args,
            "--tls-client-auth-policy=require-verify",
            f"--tls-root-ca-file={certs.ca}",
        ],
    )
    try:
        base = [str(gonsq_bin), "-nsqd", daemon.tcp_address, "-ca", certs.ca, "-n", "100"]
        with_cert = run_client(
            [
                *base,
                "-modes",
                "tls,tls+snappy,tls+deflate",
                "-cert",
                str(certs.files.client_cert),
                "-key",
                str(certs.files.client_key),
            ]
        )
        assert all(s == "PASS" for s, _ in with_cert.values()), with_cert
        without = run_client([*base, "-modes", "tls"])
        assert without["tls"][0] == "FAIL", without
    finally:
        assert daemon.stop() == 0
