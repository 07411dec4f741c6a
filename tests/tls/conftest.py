"""Fixtures for the TLS / snappy / deflate / AUTH tests: test certificates, and the real
clients' programs (go-nsq built from gonsq/, nsqjs from npm, pynsq installed)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
for path in (REPO_ROOT, HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
sys.path.append(str(REPO_ROOT / "scripts"))

import gobuild  # noqa: E402
from auth_support import Policy, start_pair, stop_pair  # noqa: E402
from tls_support import AuthServer, Certs, Daemon, make_certs  # noqa: E402

from conformance.clients.runner import NSQJS_DIR, SetupError, setup_nsqjs  # noqa: E402


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="session")
def gonsq_bin() -> Path:
    """tests/tls/gonsq/bin/gonsq-tls, built again when its sources or Go change."""
    try:
        return gobuild.build(HERE / "gonsq", HERE / "gonsq" / "bin" / "gonsq-tls")
    except gobuild.GoBuildError as exc:
        pytest.fail(f"the go-nsq client did not build: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def nsqjs_env() -> dict[str, str]:
    """Environment for `node nsqjs/tls_check.js`: the conformance suite's nsqjs 0.13.0
    (`npm ci` there, once, whichever test process comes first)."""
    try:
        setup_nsqjs()
    except SetupError as exc:
        pytest.fail(f"nsqjs is not installed: {exc}", pytrace=False)
    return {**os.environ, "NODE_PATH": str(NSQJS_DIR / "node_modules")}


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
