"""Fixtures for the Redis front-end tests: the redis-server/ours pair of the differential
suite (once per session) and single daemons of ours with their own data paths."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from conformance.resp import servers  # noqa: E402


@pytest.fixture(scope="session")
def pair() -> Iterator[servers.Pair]:
    try:
        servers.redis_server()
    except servers.MissingRedis as exc:
        pytest.fail(str(exc), pytrace=False)
    p = servers.Pair()
    try:
        p.start()
        yield p
    finally:
        problems = p.stop()
    assert not problems, problems


class Daemons:
    """Our nsqd with --resp-address, started on demand; all stopped at the end."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.started: list[servers.Server] = []

    def start(
        self, *flags: str, data: Path | None = None, port: int | None = None
    ) -> servers.Server:
        server = servers.start_ours(data or self.tmp / "data", *flags, port=port)
        self.started.append(server)
        return server


@pytest.fixture
def ours(tmp_path: Path) -> Iterator[Daemons]:
    d = Daemons(tmp_path)
    yield d
    for server in d.started:
        if server.proc.poll() is None:
            server.kill()
