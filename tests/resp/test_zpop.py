"""Sorted-set pops that a ZADD served to blocked clients (BZPOPMIN, BZMPOP) are in resp.log:
after a kill -9 and a restart the members they took stay gone, the others are back. (Their
replies, errors and FIFO order are compared with redis-server by
conformance/resp/scripts/24_zpop_blocking.txt and the fuzzers.)"""

from __future__ import annotations

import threading

from .helpers import client, wait_for


def test_served_zset_pops_survive_kill9(ours, tmp_path) -> None:
    data = tmp_path / "d"
    server = ours.start("--sync-every=1", data=data)
    r = client(server.port)
    got: dict[str, object] = {}

    def wait(name: str, *argv: object) -> None:
        got[name] = client(server.port).execute_command(*argv)

    waiters = [
        threading.Thread(target=wait, args=("min", "BZPOPMIN", "jobs", 5)),
        threading.Thread(target=wait, args=("mpop", "BZMPOP", 5, 1, "jobs", "MAX", "COUNT", 2)),
    ]
    for n, t in enumerate(waiters, 1):  # one after the other: FIFO
        t.start()
        wait_for(lambda n=n: r.info("clients")["blocked_clients"] == n, 5, f"waiter {n}")
    assert r.zadd("jobs", {"a": 1, "b": 2, "c": 3, "d": 4}) == 4
    for t in waiters:
        t.join(5)
    assert got == {"min": (b"jobs", b"a", 1.0), "mpop": [b"jobs", [[b"d", b"4"], [b"c", b"3"]]]}
    r.close()
    server.kill()
    server = ours.start(data=data)
    r = client(server.port)
    assert r.zrange("jobs", 0, -1, withscores=True) == [(b"b", 2.0)]
    r.close()
