"""Fixtures for the TLS / snappy / deflate / AUTH tests: test certificates, and the real
clients' programs (go-nsq built from gonsq/, nsqjs from npm, pynsq installed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
for path in (REPO_ROOT, HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from auth_support import Policy, start_pair, stop_pair  # noqa: E402
from tls_support import AuthServer, Certs, Daemon, make_certs  # noqa: E402

GO_BUILD_TIMEOUT = 300.0  # a first build may fetch go-nsq through the module proxy
NPM_TIMEOUT = 300.0


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def _newest(paths: list[Path]) -> float:
    return max(p.stat().st_mtime for p in paths if p.exists())


@pytest.fixture(scope="session")
def gonsq_bin() -> Path:
    """tests/tls/gonsq/bin/gonsq-tls, rebuilt when its sources are newer."""
    src = HERE / "gonsq"
    binary = src / "bin" / "gonsq-tls"
    sources = [src / "main.go", src / "go.mod", src / "go.sum"]
    if binary.exists() and binary.stat().st_mtime >= _newest(sources):
        return binary
    go = shutil.which("go") or (
        "/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None
    )
    if go is None:
        pytest.fail("no Go toolchain to build the go-nsq client", pytrace=False)
    proc = subprocess.run(
        [go, "build", "-o", str(binary), "."],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=GO_BUILD_TIMEOUT,
        env={**os.environ, "GOFLAGS": "-mod=mod -buildvcs=false"},
        check=False,
    )
    if proc.returncode != 0:
        pytest.fail(f"go build failed:\n{proc.stdout}\n{proc.stderr}")
    return binary


@pytest.fixture(scope="session")
def nsqjs_env() -> dict[str, str]:
    """Environment for `node nsqjs/tls_check.js`: our own node_modules if installed, else the
    conformance suite's (same nsqjs 0.13.0), else `npm ci` here."""
    if shutil.which("node") is None:
        pytest.fail("no node for the nsqjs client", pytrace=False)
    own = HERE / "nsqjs" / "node_modules"
    shared = REPO_ROOT / "conformance" / "clients" / "nsqjs" / "node_modules"
    if not (own / "nsqjs").exists() and not (shared / "nsqjs").exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.fail("nsqjs is not installed and there is no npm", pytrace=False)
        proc = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=HERE / "nsqjs",
            capture_output=True,
            text=True,
            timeout=NPM_TIMEOUT,
            check=False,
        )
        if proc.returncode != 0:
            pytest.fail(f"npm ci failed:\n{proc.stdout}\n{proc.stderr}")
    node_path = own if (own / "nsqjs").exists() else shared
    return {**os.environ, "NODE_PATH": str(node_path)}


# -- AUTH (test_tls_auth.py, test_auth_server.py): one auth server and daemon pair per module


@pytest.fixture(scope="module")
def policy() -> Policy:
    return Policy()


@pytest.fixture(scope="module")
def authd(policy: Policy) -> Iterator[AuthServer]:
    server = AuthServer(policy).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def pair(authd: AuthServer, certs: Certs) -> Iterator[dict[str, Daemon]]:
    daemons = start_pair(
        [
            *certs.server_args,
            f"--auth-http-address={authd.address}",
            "--http-client-request-timeout=2s",
        ]
    )
    yield daemons
    stop_pair(daemons)
