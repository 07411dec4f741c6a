"""SET with an expiry already past (EXAT/PXAT) removes the key, whatever TTL it had
(conformance/resp/scripts/32_set_past_expiry.txt compares the replies with redis-server 7);
here across a restart beside redis-server with its AOF: replayed from resp.log, after kill -9
and after a clean stop, the key stays gone and a key SET again after it has no TTL, as Redis
loads it. And the keyspace's own rule (ef41357): such a SET over a key whose old TTL is due
but not yet reclaimed sends no expiry event (it is an overwrite, as docs/redis.md says; the
old code sent one, carrying the new value)."""

from __future__ import annotations

import time
from pathlib import Path

from conformance.resp.servers import Server, start_redis
from conformance.resp.wire import Conn, encode
from nsqd.resp.keyspace import Keyspace, Record, Value, now_ms

# (the command, what each of them touches): EXAT/PXAT 1 is long past
CHANGES = [
    b"SET plain v", b"SET plain v2 EXAT 1",
    b"SET ttl v PX 100000", b"SET ttl v2 PXAT 1",
    b"SET missing v PXAT 1",
    b"RPUSH lst a", b"EXPIRE lst 100", b"SET lst v EXAT 1",
    b"SET back v PX 100000", b"SET back v2 PXAT 1", b"SET back v3",
    b"SET kept v PX 100000",
]  # fmt: skip
KEYS = [b"plain", b"ttl", b"missing", b"lst", b"back", b"kept"]


def _send(port: int, lines: list[bytes]) -> list[bytes]:
    conn = Conn(port)
    try:
        out = []
        for line in lines:
            conn.send(encode(line.split()))
            out.append(conn.reply())
        return out
    finally:
        conn.close()


def _look(port: int) -> list[bytes]:
    """Each key's EXISTS, TYPE, GET and PTTL's sign (-2 gone, -1 none, 1 a TTL)."""
    replies = _send(port, [b"%s %s" % (cmd, k) for k in KEYS for cmd in (b"EXISTS", b"TYPE")])
    for key in KEYS:
        get, pttl = _send(port, [b"GET " + key, b"PTTL " + key])
        replies += [get, b":1\r\n" if int(pttl[1:-2]) > 0 else pttl]
    return replies


def _redis(work: Path) -> Server:
    return start_redis(work, "", "--appendonly", "yes", "--appendfsync", "always")


def test_past_expiry_keys_stay_gone_across_a_restart(ours, tmp_path: Path) -> None:
    work = tmp_path / "redis"
    work.mkdir()
    redis = _redis(work)
    data = tmp_path / "d"
    server = ours.start(data=data)
    try:
        assert _send(server.port, CHANGES) == _send(redis.port, CHANGES)
        want = _look(redis.port)
        assert want[:4] == [b":0\r\n", b"+none\r\n"] * 2  # plain, ttl: gone
        assert _look(server.port) == want
        assert redis.stop() == 0
        redis = _redis(work)  # loads its AOF
        assert _look(redis.port) == want
        server.kill()
        server = ours.start(data=data)
        assert _look(server.port) == want, "after kill -9"
        assert server.stop() == 0
        server = ours.start(data=data)
        assert _look(server.port) == want, "after a clean stop"
    finally:
        redis.stop()


def test_an_overwrite_with_a_past_expiry_of_a_due_key_sends_no_event() -> None:
    """What SETEX/PSETEX reach when the millisecond their expiry was at passes before the
    change (they look nothing up first, as SET does)."""
    ks = Keyspace()
    events: list[tuple[bytes, Value]] = []
    logged: list[Record] = []
    ks.on_expired = lambda key, value: events.append((key, value))
    ks.record = logged.append
    ks.set_string(b"k", b"old", now_ms() + 20, keep_ttl=False)
    time.sleep(0.05)  # due, not reclaimed: nothing ran expire_due, nothing read it
    ks.set_string(b"k", b"new", now_ms() - 1, keep_ttl=False)
    assert events == []
    assert b"k" not in ks.data and b"k" not in ks.expires
    assert logged[-1] == (b"DEL", b"k")
