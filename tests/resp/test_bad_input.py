"""Bad input never crashes the daemon or leaves a connection stuck: random and mangled
requests each get answers or a protocol error and a close, and the next client is served;
--resp-max-bulk bounds a bulk argument as proto-max-bulk-len does."""

from __future__ import annotations

import random

import redis

from conformance.resp.wire import CLOSED, NO_REPLY, Conn, encode

SEED_COMMANDS = [
    [b"LPUSH", b"q", b"a", b"b"], [b"BLPOP", b"q", b"0.01"], [b"LPOP", b"q", b"2"],
    [b"SET", b"s", b"v", b"PX", b"50"], [b"HSET", b"h", b"f", b"v"], [b"LRANGE", b"q", b"0", b"-1"],
    [b"LMOVE", b"q", b"p", b"LEFT", b"RIGHT"], [b"EXPIRE", b"h", b"1", b"GT"],
]  # fmt: skip


def mangle(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(4)
        i = rng.randrange(len(b) + 1)
        if op == 0 and b:
            b[min(i, len(b) - 1)] = rng.randrange(256)
        elif op == 1:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op == 2 and b:
            del b[i : i + rng.randint(1, 6)]
        else:
            b[i:i] = rng.choice([b"\r\n", b"*", b"$", b"-1", b"99999999999", b'"', b"'"])
    return bytes(b)


def test_mangled_requests_never_break_the_daemon(pair) -> None:
    _, ours = pair.by_kind["plain"]
    rng = random.Random(19)
    for _ in range(150):
        cmds = rng.sample(SEED_COMMANDS, rng.randint(1, 3))
        data = mangle(rng, b"".join(encode(c) for c in cmds))
        c = Conn(ours.port, timeout=5)
        c.send(data + b"\r\n")
        got = c.until_closed(0.15)  # answers, and a close after a protocol error
        assert got.endswith((CLOSED, NO_REPLY))
        c.close()
        check = Conn(ours.port)
        check.send(encode([b"PING"]))
        assert check.reply() == b"+PONG\r\n", data
        check.close()
    assert ours.proc.poll() is None
    log = ours.log_path.read_text(errors="replace")
    assert "unexpected error" not in log and "Traceback" not in log, log


def test_max_bulk_flag(ours) -> None:
    server = ours.start("--resp-max-bulk=1024")
    c = Conn(server.port)
    c.send(encode([b"SET", b"k", b"x" * 1024]))
    assert c.reply() == b"+OK\r\n"
    c.send(encode([b"SET", b"k", b"x" * 1025]))
    assert c.until_closed(5) == b"-ERR Protocol error: invalid bulk length\r\n" + CLOSED
    c.close()


def test_memory_usage_answers_for_every_type(pair) -> None:
    """MEMORY USAGE of a stream raised TypeError in the handler, which closed the connection
    (found by fuzzing); every type answers a size, as Redis does."""
    _, ours = pair.by_kind["plain"]
    r = redis.Redis(port=ours.port, db=8)
    r.flushdb()
    r.set("str", "v")
    r.rpush("list", "a", "b")
    r.hset("hash", "f", "v")
    r.sadd("set", "m")
    r.zadd("zset", {"m": 1})
    r.xadd("stream", {"f": "v"})
    for key in ("str", "list", "hash", "set", "zset", "stream"):
        size = r.memory_usage(key)
        assert isinstance(size, int) and size > 0, key
    assert r.ping()
    r.flushdb()
