"""The multi-client fuzz (multi_fuzz.py, multi_fuzz_run.py) against redis-server 7.0.15,
bounded: fixed seeds of interleaved steps over four connections per server (blocking pops
and moves woken by other clients, timeouts, CLIENT UNBLOCK and KILL, closes of blocked
clients, WATCH spoiled by writes and by expiry, pub/sub with several subscribers and
patterns, stream reads and consumer groups: XREADGROUP BLOCK woken by XADD), everything each
connection receives after each step compared, over RESP2 and RESP3; the counts (counted on
redis-server's side) prove each path was reached: with the generator idle (no wake-ups, no
spoiled EXEC) the test fails. And the cases it found, as fixed steps.
`python -m tests.resp.multi_fuzz_run FIRST COUNT [LENGTH [PROTOCOL]]` runs more seeds."""

from __future__ import annotations

from collections import Counter

from conformance.resp.servers import Pair

from .multi_fuzz import Step
from .multi_fuzz_run import fixed, run, run_seed

LENGTH = 120


def test_interleaved_clients_answer_as_redis(pair: Pair) -> None:
    redis, ours = pair.by_kind["plain"]
    seen: Counter[str] = Counter()
    for seed in range(20261220, 20261220 + 5):
        miss = run_seed(seed, redis.port, ours.port, LENGTH, seen)
        assert miss is None, str(miss)
    for seed in range(20261315, 20261315 + 3):
        miss = run_seed(seed, redis.port, ours.port, LENGTH, seen, protocol=3)
        assert miss is None, str(miss)
    # the steps reached what they are for (counted on redis-server's side)
    for what, least in {
        "wakeup": 15, "wakeup-queued": 8, "wakeup-several": 2, "timeout": 5, "unblocked": 2,
        "closed-blocked": 5, "killed": 2, "exec": 3, "watch-exec": 3, "watch-exec-spoiled": 2,
        "expiry-exec-spoiled": 1, "message": 5, "publish-several": 1, "wrongtype": 10,
        "wakeup-zset": 3, "wakeup-stream": 3, "wakeup-group": 2, "group-read": 4,
    }.items():  # fmt: skip
        assert seen[what] >= least, (what, seen)


def _case(steps: list[Step], pair: Pair, protocol: int = 2) -> list[list[list[bytes]]]:
    """The steps on both servers, compared; redis-server's frames of each step."""
    redis, ours = pair.by_kind["plain"]
    log: list[list[list[bytes]]] = []
    miss = run(fixed(steps), redis.port, ours.port, protocol=protocol, log=log)
    assert miss is None, str(miss)
    return log


def test_unblock_inside_exec_takes_the_client_out_at_once(pair: Pair) -> None:
    """CLIENT UNBLOCK inside MULTI/EXEC: the client leaves every queue at once, as Redis's
    unblockClient: a push later in the same EXEC is not served to it (it gets the unblock's
    answer, the element stays), and a second UNBLOCK of it answers 0. Ours answered the
    element and 1 (the client left its queues only when it resumed). Found by the fuzz."""
    log = _case(
        [
            Step(0, [b"BLPOP", b"fq", b"0"]),
            Step(2, [b"BRPOP", b"fq", b"0"]),
            Step(1, [b"MULTI"]),
            Step(1, [b"CLIENT", b"UNBLOCK", b"{id:0}"]),
            Step(1, [b"CLIENT", b"UNBLOCK", b"{id:0}", b"ERROR"]),
            Step(1, [b"RPUSH", b"fq", b"a", b"b"]),
            Step(1, [b"EXEC"]),
            Step(1, [b"LRANGE", b"fq", b"0", b"-1"]),
        ],
        pair,
    )
    assert log[6][0] == [b"*-1\r\n"]  # the unblocked client: its timeout's answer
    assert log[6][1] == [b"*3\r\n:1\r\n:0\r\n:2\r\n"]
    assert log[6][2] == [b"*2\r\n$2\r\nfq\r\n$1\r\nb\r\n"]  # the other waiter is served
    assert log[7][1] == [b"*1\r\n$1\r\na\r\n"]


def test_unblock_answers_before_what_follows_in_exec(pair: Pair) -> None:
    """CLIENT UNBLOCK answers the blocked client at once, as Redis does: under RESP3 a
    message published to it later in the same EXEC comes after the unblock's answer, and the
    PING it pipelined behind its BLPOP after both. Ours sent the message first (the answer
    waited for the client to resume). Found by the fuzz (seed 20261320 over RESP3)."""
    log = _case(
        [
            Step(0, [b"SUBSCRIBE", b"ch"]),
            Step(0, [b"BLPOP", b"uq", b"0"]),
            Step(0, [b"PING"]),
            Step(1, [b"MULTI"]),
            Step(1, [b"CLIENT", b"UNBLOCK", b"{id:0}", b"ERROR"]),
            Step(1, [b"PUBLISH", b"ch", b"m"]),
            Step(1, [b"EXEC"]),
        ],
        pair,
        protocol=3,
    )
    assert log[6][0] == [
        b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n",
        b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nm\r\n",
        b"+PONG\r\n",
    ]


def test_flushdb_unblocks_a_group_consumer_of_a_stream_it_deletes(pair: Pair) -> None:
    """FLUSHDB inside EXEC deletes a stream a consumer waits on with XREADGROUP BLOCK: it is
    answered -UNBLOCKED at once, as after a DEL (Redis's scanDatabaseForDeletedStreams), while
    an XREAD waiter of the key keeps waiting and is served by a later XADD. Ours left the
    consumer waiting. Found by the fuzz (seed 15 over RESP2, step 58)."""
    log = _case(
        [
            Step(0, [b"XGROUP", b"CREATE", b"fx", b"g", b"$", b"MKSTREAM"]),
            Step(0, [b"XREADGROUP", b"GROUP", b"g", b"c", b"BLOCK", b"0", b"STREAMS", b"fx", b">"]),
            Step(2, [b"XREAD", b"BLOCK", b"0", b"STREAMS", b"fx", b"$"]),
            Step(1, [b"MULTI"]),
            Step(1, [b"FLUSHDB"]),
            Step(1, [b"EXEC"]),
            Step(1, [b"XADD", b"fx", b"5-1", b"f", b"v"]),
        ],
        pair,
    )
    assert log[5][0] == [b"-UNBLOCKED the stream key no longer exists\r\n"]
    assert log[5][2] == []
    assert log[6][2] == [
        b"*1\r\n*2\r\n$2\r\nfx\r\n*1\r\n*2\r\n$3\r\n5-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    ]
