"""Shared helpers for tests/resp: redis-py clients on our daemon, a raw V2 consumer."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

REPO_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO_ROOT / "scripts"))
import v2client  # noqa: E402

from conformance.clients.runner import setup_lock  # noqa: E402
from nsqd.resp.databases import Databases  # noqa: E402
from nsqd.storage.resp_log import RespLog  # noqa: E402
from protocol.v2.message import decode_message  # noqa: E402


def client(port: int, **kwargs: object) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=10, **kwargs)  # type: ignore[arg-type]


def wait_for(predicate: Callable[[], object], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        time.sleep(0.02)


def consume(tcp_port: int, topic: str, channel: str, n: int, timeout: float = 10) -> list[bytes]:
    """SUB with a raw V2 client, take n messages (FIN each), return their bodies."""
    with v2client.BlockingV2(("127.0.0.1", tcp_port), timeout=timeout) as c:
        c.sub(topic, channel)
        c.rdy(n)
        bodies = []
        while len(bodies) < n:
            kind, data = c.frame()
            assert kind == 2, (kind, data)
            msg = decode_message(data)
            bodies.append(msg.body)
            c.fin(msg.id)
        c.nop()
        return bodies


def publish(tcp_port: int, topic: str, bodies: list[bytes]) -> None:
    with v2client.BlockingV2(("127.0.0.1", tcp_port)) as c:
        for body in bodies:
            c.pub(topic, body)


def node_project(here: Path, what: str) -> str:
    """The node binary, after `npm ci` of the client project in `here` from its lock file
    (again only when the lock changed); the test fails when node or npm is missing."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail(f"node and npm are needed for the {what} check", pytrace=False)
    stamp = here / "node_modules" / ".stamp"
    lock = (here / "package-lock.json").read_text()
    with setup_lock(here):
        if not stamp.exists() or stamp.read_text() != lock:
            done = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=here, capture_output=True, text=True, timeout=300, check=False,
            )  # fmt: skip
            assert done.returncode == 0, done.stdout + done.stderr
            stamp.write_text(lock)
    return node


def rewrite_offline(data: Path | str) -> None:
    """The compaction of a stopped daemon's resp.log in `data`, as a rewrite makes it (every
    key as snapshot records), so that its next start replays those instead of the commands."""
    log = RespLog(str(data), sync_every=1, sync_timeout=1.0, sync_due=lambda: None)
    log.load(Databases())  # type: ignore[arg-type]
    log.rewrite()
    log.close()
