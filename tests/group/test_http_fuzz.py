"""The seeded HTTP differential fuzz of tests/http/test_http_fuzz.py against a group: the same
requests go to ours started with `--workers=2` and to the Go nsqd v1.3.0, and each answer must
have the same status, masked body and content headers, whichever worker answers (docs/workers.md:
one address behaves as one nsqd). A keep-alive connection stays in the worker that accepted it,
so a new connection is opened every SWITCH_EVERY requests, in turn to the shared port (the
kernel picks the worker) and to each worker's private HTTP listener, which answers a client (no
peer header) for the group as the shared port does: both workers surely answer.

Nothing is excluded or waited for beyond the one-process fuzz's own retry of /stats (Go's
topic pumps move messages after answering): a group's admin change is answered once every
running worker made it, so the next request sees it in whichever worker it lands.

NSQD_GROUP_HTTP_FUZZ_SEEDS=7,8 replays (or widens) the seeds, NSQD_GROUP_HTTP_FUZZ_REQUESTS=n
sets the length of each, NSQD_GROUP_HTTP_FUZZ_SWITCH=n the requests a connection carries."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "http"))
from http_grammar import Request
from nsqhttp_support import Daemon, ReferenceUnavailable, reference_nsqd, start
from test_http_fuzz import FLAGS, Connection, compared

from .conftest import Group

# 1-8 (channel requests on a topic one worker lacked), and 21 and 37: the two of 9-40 that met
# a channel made under a topic paused while a worker lacked it
DEFAULT_SEEDS = "1,2,3,4,5,6,7,8,21,37"
SEEDS = [int(s) for s in os.environ.get("NSQD_GROUP_HTTP_FUZZ_SEEDS", DEFAULT_SEEDS).split(",")]
REQUESTS = int(os.environ.get("NSQD_GROUP_HTTP_FUZZ_REQUESTS", "400"))
# requests on one keep-alive connection before the next is opened
SWITCH_EVERY = int(os.environ.get("NSQD_GROUP_HTTP_FUZZ_SWITCH", "2"))


@dataclass
class GroupTarget:
    """What Connection and normalize() read of a daemon: its ports and its temp folder."""

    http_port: int
    tcp_port: int
    tmp: Path


class Rotating(Connection):
    """A connection opened again every SWITCH_EVERY requests, each time to the next of
    `ports`: for the group, the shared port (the kernel picks the worker) and each worker's
    private listener, which answers a client (no peer header) for the group too, so both
    workers surely answer."""

    def __init__(self, daemon: GroupTarget | Daemon, ports: list[int]) -> None:
        super().__init__(daemon)  # type: ignore[arg-type]
        self.ports, self.sent = ports, 0

    def port(self) -> int:
        return self.ports[(self.sent - 1) // SWITCH_EVERY % len(self.ports)]

    def send(self, request: Request) -> tuple[int, dict[str, str], bytes]:
        if self.sent % SWITCH_EVERY == 0:
            self.close()
        self.sent += 1
        return super().send(request)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Group, Daemon]]:
    try:
        reference_nsqd()
    except ReferenceUnavailable as exc:  # the suite needs it: fail, never skip
        pytest.fail(f"reference nsqd unavailable: {exc}", pytrace=False)
    group = Group(tmp_path_factory.mktemp("group-fuzz")).start(*FLAGS)
    ref = start("reference", *FLAGS)
    try:
        yield group, ref
    finally:
        log = group.log_text()
        codes = [group.stop(), ref.stop()]
    assert codes[0] in (0, -signal.SIGTERM) and codes[1] == 0, f"exit {codes}:\n{log[-3000:]}"


@pytest.mark.parametrize("seed", SEEDS)
def test_fuzzed_requests_answered_by_a_group_as_go(pair: tuple[Group, Daemon], seed: int) -> None:
    group, ref_daemon = pair
    print(f"group http fuzz seed {seed}: {REQUESTS} requests")
    privates = [int(group.private_http(k).rpartition(":")[2]) for k in range(group.count)]
    ours = Rotating(GroupTarget(group.http, group.tcp, group.workdir), [group.http, *privates])
    compared(seed, REQUESTS, ours, Rotating(ref_daemon, [ref_daemon.http_port]))
