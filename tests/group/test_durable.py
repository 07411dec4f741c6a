"""--durable-inflight with a group: each worker journals its own channels' in-flight and
deferred messages in its partition, a message moved between workers included (it is the
pulling worker's once moved). The whole group killed with SIGKILL while a consumer holds
messages published in both workers: after the restart every one of them comes back at once
(not at its old in-flight deadline), attempts kept; a deferred message keeps its due time."""

from __future__ import annotations

import struct
import time

from tests.ops.conftest import V2, http_post

from .conftest import Group

FLAGS = ("--durable-inflight", "--msg-timeout=60s")  # a message back early: from a journal
DEFER_MS = 3000


def _take(conn: V2, n: int, timeout: float) -> dict[bytes, tuple[int, float]]:
    """Body -> (attempts, when it arrived) of the next `n` messages (not FIN'd)."""
    got: dict[bytes, tuple[int, float]] = {}
    deadline = time.monotonic() + timeout
    conn.sock.settimeout(1.0)
    while len(got) < n and time.monotonic() < deadline:
        try:
            kind, data = conn.frame()
        except TimeoutError:
            continue
        if kind == 0 and data == b"_heartbeat_":
            conn.nop()
            continue
        assert kind == 2, (kind, data)
        (attempts,) = struct.unpack_from(">H", data, 8)
        got[data[26:]] = (attempts, time.monotonic())
    return got


def test_in_flight_and_deferred_come_back_after_the_group_is_killed(group: Group) -> None:
    group.start(*FLAGS)
    base = f"http://127.0.0.1:{group.http}"
    assert http_post(f"{base}/topic/create?topic=t")[0] == 200
    assert http_post(f"{base}/channel/create?topic=t&channel=c")[0] == 200  # in both workers
    bodies = {b"w%d-%02d" % (k, i) for k in (0, 1) for i in range(20)}
    with group.pin(1) as sub:
        sub.sub("t", "c")
        for k in (0, 1):
            with group.pin(k) as pub:
                for i in range(20):
                    pub.pub("t", b"w%d-%02d" % (k, i))
        sub.rdy(100)
        held = _take(sub, len(bodies), 20)  # worker 0's twenty crossed to worker 1
        assert set(held) == bodies and {a for a, _ in held.values()} == {1}
        with group.pin(0) as pub:
            pub.send(b"DPUB t %d\n" % DEFER_MS + struct.pack(">i", 4) + b"late")
            pub.expect_ok()
            due = time.monotonic() + DEFER_MS / 1000
        time.sleep(0.5)  # the journals' records of what was moved, FIN'd and deferred
        group.kill()
    started = time.monotonic()
    group.start(*FLAGS)
    with group.pin(1) as sub:
        sub.sub("t", "c")
        sub.rdy(100)
        again = _take(sub, len(bodies) + 1, 20)
    assert set(again) == bodies | {b"late"}, f"lost: {sorted(bodies - set(again))}"
    assert {again[b][0] for b in bodies} == {2}, again  # attempts kept, one more delivery
    assert max(again[b][1] for b in bodies) - started < 30, "back at the in-flight deadline"
    attempts, arrived = again[b"late"]
    assert attempts == 1 and arrived >= due - 0.2, "the deferred message came before its time"
