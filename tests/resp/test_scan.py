"""SCAN over a large database: every key present for the whole scan comes back, whatever is
added and deleted meanwhile, and each call costs its COUNT, not the database (every call
sorted all the keys: a scan_iter of 500,000 keys took hours while every client waited)."""

from __future__ import annotations

import random
import time

import redis


def test_a_scan_of_a_large_database_is_complete_while_keys_come_and_go(ours) -> None:
    server = ours.start()
    r = redis.Redis(port=server.port)
    stable = [b"stable:%d" % i for i in range(200_000)]
    pipe = r.pipeline(transaction=False)
    for i in range(0, len(stable), 5000):
        pipe.mset(dict.fromkeys(stable[i : i + 5000], b"v"))
    pipe.execute()
    rng = random.Random(5)
    seen: set[bytes] = set()
    cursor, calls, churn = 0, 0, 0
    started = time.monotonic()
    while True:
        cursor, keys = r.scan(cursor, count=100)
        seen.update(keys)
        calls += 1
        if calls % 20 == 0:  # keys that come and go while the scan runs
            churn += 1
            r.set(b"new:%d" % churn, b"v")
            r.delete(b"new:%d" % rng.randrange(1, churn + 1))
        if cursor == 0:
            break
        # bounded: ~2,000 calls are enough; a cursor that never ends would be a defect
        assert calls < 10_000, "SCAN never ended"
        # (a liveness bound, 20x what it takes: sorting every key at each call took ~400 s)
        assert time.monotonic() - started < 60, "each SCAN costs the whole database"
    assert set(stable) <= seen
    assert r.ping()


def test_scan_forgets_deleted_keys_and_starts_over_after_flush(ours) -> None:
    server = ours.start()
    r = redis.Redis(port=server.port)
    r.mset({b"k%d" % i: b"v" for i in range(3000)})
    assert len(set(r.scan_iter(count=50))) == 3000
    r.delete(*[b"k%d" % i for i in range(0, 3000, 2)])
    assert set(r.scan_iter(count=50)) == {b"k%d" % i for i in range(1, 3000, 2)}
    r.flushdb()
    r.set(b"after", b"v")
    assert list(r.scan_iter(count=50)) == [b"after"]
