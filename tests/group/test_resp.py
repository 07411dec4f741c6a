"""The Redis front-end in a group (`--workers=2 --resp-address`): worker 0 alone listens on the
Redis port and owns every key (its resp.log in worker-0/); the other workers open no Redis
listener and import nothing of nsqd.resp; every worker's /metrics has worker 0's list
lengths. The bridge publishes into worker 0's partition, and
consumers in either worker get those messages; a BLPOP on a channel key in worker 0 gets what
was published in worker 1 through worker 0's pull link, and a pop that does not block (LPOP,
RPOP, LMPOP, LMOVE, RPOPLPUSH) and LLEN ask worker 1 for what worker 0's partition lacks
(inside MULTI/EXEC: worker 0's alone). Worker 0 killed with SIGKILL, and the whole group, come
back with the keys."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.ops.conftest import (
    REPO_ROOT,
    START_TIMEOUT,
    V2,
    free_ports,
    http_get,
    port_open,
    wait_until,
)

from .conftest import Group

CH = "channel:t:c"


class RespGroup(Group):
    """A group with --resp-address on a port of its own."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.tcp, self.http, self.resp = free_ports(3)  # distinct, from one call

    def start(self, *flags: str) -> RespGroup:
        super().start(f"--resp-address=127.0.0.1:{self.resp}", *flags)
        wait_until(lambda: port_open(self.resp), START_TIMEOUT, "the Redis port")
        return self

    def redis(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.resp, socket_timeout=10)

    def channels(self, k: int, topic: str = "t") -> dict[str, dict]:
        """Worker k's own channels of `topic` by name (its /stats entries)."""
        for t in self.worker_stats(k, f"&topic={topic}")["topics"] or ():
            if t["topic_name"] == topic:
                return {c["channel_name"]: c for c in t["channels"] or ()}
        return {}

    def listening(self, port: int) -> set[int]:
        """The pids of the group's workers with a socket listening on `port` (/proc/net/tcp
        gives the listening sockets' inodes, /proc/<pid>/fd who holds them)."""
        inodes = set()
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and int(local.rpartition(":")[2], 16) == port:
                inodes.add(f"socket:[{inode}]")
        pids = set()
        for pid in self.pids().values():
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                try:
                    if os.readlink(fd) in inodes:
                        pids.add(pid)
                except OSError:  # closed meanwhile
                    continue
        return pids


@pytest.fixture
def group(workdir: Path) -> Iterator[RespGroup]:
    g = RespGroup(workdir)
    yield g
    status = g.stop()
    assert status in (None, 0, -signal.SIGTERM), g.log_text()[-3000:]


def _take(conn: V2, n: int) -> list[bytes]:
    """n messages' bodies, each FIN'd."""
    bodies = []
    for _ in range(n):
        msg_id, body = conn.message()
        conn.fin(msg_id)
        bodies.append(body)
    return bodies


def test_worker_0_alone_listens_and_owns_every_key(group: RespGroup) -> None:
    group.start()
    assert group.listening(group.resp) == {group.pids()[0]}
    assert group.log_text().count("RESP: listening on") == 1
    clients = [group.redis() for _ in range(8)]  # shared ports would spread these
    assert clients[0].set("k", "v")
    assert clients[1].rpush("l", "a", "b", "c") == 3
    assert clients[2].lpush("l", "z") == 4
    for r in clients:
        assert r.get("k") == b"v"
    assert clients[3].lrange("l", 0, -1) == [b"z", b"a", b"b", b"c"]
    assert clients[4].lpop("l") == b"z"
    assert clients[5].rpop("l") == b"c"
    assert clients[6].llen("l") == 2
    assert clients[7].dbsize() == 2
    for r in clients:
        r.close()
    for k in (0, 1):  # each worker's /metrics answers for the group: worker 0's lists too
        _, body = http_get(f"http://{group.private_http(k)}/metrics")
        assert b'nsq_resp_list_length{key="l"} 2' in body, (k, body[-2000:])
    assert (group.data / "worker-0" / "resp.log").exists()
    assert not (group.data / "worker-1" / "resp.log").exists()


def test_another_worker_imports_nothing_of_the_redis_front_end(tmp_path: Path) -> None:
    """Worker 1's daemon with --resp-address: no listener, no nsqd.resp module."""
    code = (
        "import sys, trio\n"
        "from nsqd.config.options import Options\n"
        "from nsqd.daemon import NSQD\n"
        "from nsqd.group import identity\n"
        "from nsqd.net.reactor import Loop\n"
        f"path = {str(tmp_path)!r}\n"
        "opts = Options.build(workers=2, resp_address='127.0.0.1:1', data_path=path)\n"
        "identity.become(identity.Identity(1, 2, path), opts)\n"
        "print(trio.run(NSQD(opts)._open_resp, Loop(), None))\n"
        "print([m for m in sys.modules if m.startswith('nsqd.resp')])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["(None, [])", "[]"], done.stdout


def test_a_redis_push_reaches_an_nsq_consumer_in_each_worker(group: RespGroup) -> None:
    group.start()
    with group.pin(0) as c0, group.pin(1) as c1:
        c0.sub("t", "c0")
        c1.sub("t", "c1")
        # each SUB's channel is made in the other worker within milliseconds
        wait_until(lambda: {"c0", "c1"} <= set(group.channels(0)), START_TIMEOUT, "channels")
        c0.rdy(10)
        c1.rdy(10)
        r = group.redis()
        assert r.rpush("topic:t", "a", "b") == 2
        assert r.lpush("topic:t", "c") == 1
        r.close()
        assert sorted(_take(c0, 3)) == [b"a", b"b", b"c"]
        assert sorted(_take(c1, 3)) == [b"a", b"b", b"c"]  # pulled from worker 0
    (topic,) = group.worker_stats(0, "&topic=t")["topics"]
    assert topic["message_count"] == 3  # published in worker 0's partition
    (topic,) = group.worker_stats(1, "&topic=t")["topics"]
    assert topic["message_count"] == 0


def test_an_nsq_publish_in_worker_1_reaches_a_blocked_pop_in_worker_0(group: RespGroup) -> None:
    group.start()
    r = group.redis()
    assert r.lpop(CH) is None  # makes the channel, here and (within milliseconds) in worker 1
    wait_until(lambda: "c" in group.channels(1), START_TIMEOUT, "the channel in worker 1")
    with group.pin(1) as pub:
        pub.pub("t", b"early")
    # worker 1 made the topic at run time: it holds it until its peers said whether the
    # group's is paused (group/new_topics.py), then the message reaches the channel
    wait_until(lambda: group.channels(1)["c"]["depth"] == 1, 5, "the message in the channel")
    # a blocked pop is a consumer in worker 0: its pull brings the message from worker 1
    assert r.blpop([CH], timeout=5) == (CH.encode(), b"early")

    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(r.blpop([CH], timeout=10)))
    waiter.start()
    wait_until(lambda: group.channels(0)["c"]["clients"], START_TIMEOUT, "the blocked pop")
    with group.pin(1) as pub:
        pub.pub("t", b"later")
    waiter.join(15)
    assert got == [(CH.encode(), b"later")]
    r.close()
    wait_until(lambda: group.channels(1)["c"]["depth"] == 0, 5, "worker 1's channel empty")
    assert group.channels(0)["c"]["depth"] == 0


def test_worker_0_or_the_group_killed_comes_back_with_the_keys(
    group: RespGroup,
) -> None:
    group.start()
    r = group.redis()
    assert r.set("s", "v")
    assert r.rpush("l", "a", "b") == 2
    assert r.hset("h", mapping={"f": "1", "g": "2"}) == 2
    assert r.set("gone", "x") and r.delete("gone") == 1
    r.close()
    before = group.pids()[0]
    os.kill(before, signal.SIGKILL)
    wait_until(lambda: group.pids()[0] != before, START_TIMEOUT, "worker 0 started again")
    wait_until(lambda: port_open(group.resp), START_TIMEOUT, "the Redis port again")
    assert "worker 0 exited (signal 9)" in group.log_text()
    r = group.redis()
    assert r.get("s") == b"v"
    assert r.lrange("l", 0, -1) == [b"a", b"b"]
    assert r.hgetall("h") == {b"f": b"1", b"g": b"2"}
    assert r.exists("gone") == 0
    assert r.dbsize() == 3
    r.close()
    assert group.listening(group.resp) == {group.pids()[0]}
    group.kill()  # the whole group, then started again
    group.start()
    r = group.redis()
    assert r.get("s") == b"v" and r.lrange("l", 0, -1) == [b"a", b"b"] and r.dbsize() == 3
    r.close()


def _publish_in(group: RespGroup, k: int, *bodies: bytes) -> None:
    with group.pin(k) as pub:
        for body in bodies:
            pub.pub("t", body)


def test_pops_that_do_not_block_and_llen_ask_the_other_worker(group: RespGroup) -> None:
    group.start()
    r = group.redis()
    assert r.lpop(CH) is None  # makes the channel, here and (within milliseconds) in worker 1
    wait_until(lambda: "c" in group.channels(1), START_TIMEOUT, "the channel in worker 1")
    _publish_in(group, 1, b"w1-a", b"w1-b", b"w1-c")
    _publish_in(group, 0, b"w0-a")
    # a topic made at run time holds what is published into it until its peers have said
    # whether the group's is paused (a few ms: docs/workers.md); then its channel has it
    wait_until(lambda: group.channels(1)["c"]["depth"] == 3, START_TIMEOUT, "worker 1's three")
    assert r.llen(CH) == 4  # 1 here, 3 in worker 1
    assert r.llen("topic:t") == 0  # every message went on to the channel, in both workers
    # worker 0's message first, then what worker 1 gives for the rest of the COUNT
    assert r.lpop(CH, 3) == [b"w0-a", b"w1-a", b"w1-b"]
    assert r.llen(CH) == 1
    assert r.rpop(CH) == b"w1-c"
    assert r.lpop(CH) is None and r.lpop(CH, 2) is None and r.llen(CH) == 0

    # LMPOP: an empty channel key here asks worker 1 before the keys after it are looked at
    assert r.rpush("plain", "p") == 1
    _publish_in(group, 1, b"w1-d")
    assert r.lmpop(2, CH, "plain", direction="LEFT", count=5) == [CH.encode(), [b"w1-d"]]
    assert r.lmpop(2, CH, "plain", direction="LEFT", count=5) == [b"plain", [b"p"]]

    # a move from a channel key takes worker 1's message and finishes it there once moved
    _publish_in(group, 1, b"w1-e", b"w1-f")
    assert r.lmove(CH, "dst", "LEFT", "RIGHT") == b"w1-e"
    assert r.rpoplpush(CH, "dst") == b"w1-f"
    assert r.rpoplpush(CH, "dst") is None
    assert r.lrange("dst", 0, -1) == [b"w1-f", b"w1-e"]
    assert r.set("str", "x")
    _publish_in(group, 1, b"w1-g")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.lmove(CH, "str", "LEFT", "LEFT")  # checked before anything is taken
    assert r.llen(CH) == 1
    wait_until(lambda: group.channels(1)["c"]["in_flight_count"] == 0, 5, "nothing held")

    # a pipeline's replies keep their order behind a reply that waits for the peer
    pipe = r.pipeline(transaction=False)
    pipe.set("k", "1").lpop(CH).incr("k").llen(CH).get("k")
    assert pipe.execute() == [True, b"w1-g", 2, 0, b"2"]

    # inside MULTI/EXEC nothing waits: worker 0's partition alone answers
    _publish_in(group, 1, b"w1-h")
    tx = r.pipeline(transaction=True)
    tx.llen(CH).lpop(CH)
    assert tx.execute() == [0, None]
    assert r.lpop(CH) == b"w1-h"
    r.close()
    for k in (0, 1):
        c = group.channels(k)["c"]
        assert (c["depth"], c["in_flight_count"]) == (0, 0), (k, c)


def test_a_move_from_a_peer_serves_a_blocked_pop_when_its_client_closed(group: RespGroup) -> None:
    """LMOVE from a channel key that worker 0 has nothing of takes worker 1's message and
    pushes it on to the destination after its ask; a BLPOP on the destination is served then,
    even when the LMOVE's client closed while the ask was out (it never resumes)."""
    group.start()
    r = group.redis()
    assert r.lpop(CH) is None  # makes the channel, here and (within milliseconds) in worker 1
    wait_until(lambda: "c" in group.channels(1), START_TIMEOUT, "the channel in worker 1")
    _publish_in(group, 1, b"w1-a")
    got: list[object] = []
    # its timeout is below the client's socket_timeout (10 s), which would retry the BLPOP
    waiter = threading.Thread(target=lambda: got.append(group.redis().blpop(["dst"], 8)))
    waiter.start()
    wait_until(lambda: any(c["flags"] == "b" for c in r.client_list()), 10, "the BLPOP")
    with socket.create_connection(("127.0.0.1", group.resp), timeout=5) as s:
        s.sendall(
            b"*5\r\n$5\r\nLMOVE\r\n$11\r\nchannel:t:c\r\n$3\r\ndst\r\n$4\r\nLEFT\r\n$5\r\nRIGHT\r\n"
        )
    waiter.join(30)
    assert got == [(b"dst", b"w1-a")]
    assert r.llen("dst") == 0
    r.close()


def test_a_pop_from_a_peer_that_answers_too_late_loses_nothing(group: RespGroup) -> None:
    """A pop that asks worker 1 while it does not answer (stopped) gives up after the ask's
    timeout; worker 1 serves the request once it runs again. What it took must come back to
    the channel (a receive held under a lease, then finished), not be finished there and
    dropped here (a `/channel/pop` lost it)."""
    group.start("--msg-timeout=3s")
    r = group.redis()
    assert r.lpop(CH) is None  # makes the channel, here and (within milliseconds) in worker 1
    wait_until(lambda: "c" in group.channels(1), START_TIMEOUT, "the channel in worker 1")
    _publish_in(group, 1, b"w1-a")
    worker_1 = group.pids()[1]
    os.kill(worker_1, signal.SIGSTOP)
    try:
        assert r.lpop(CH, 5) is None  # worker 1 did not answer in time
    finally:
        os.kill(worker_1, signal.SIGCONT)
    got: list[bytes] = []
    wait_until(lambda: got.extend(r.lpop(CH, 5) or ()) or got, 30, "the message back")
    assert got == [b"w1-a"]
    wait_until(lambda: group.channels(1)["c"]["in_flight_count"] == 0, 10, "nothing held")
    assert group.channels(1)["c"]["depth"] == 0
    r.close()
