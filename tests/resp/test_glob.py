"""Glob patterns as Redis 7.0 matches them (nsqd/resp/glob.py): random patterns of every
special character against the real redis-server for KEYS, SCAN MATCH, PSUBSCRIBE and CONFIG
GET; the two ways of matching (the regular expression and the long patterns' walk) against
each other; and patterns that held the whole daemon when Python's fnmatch read them."""

from __future__ import annotations

import random
import threading
import time

import redis

from nsqd.resp import glob

ALPHABET = b"ab*?[]^-\\Az!"
DB = 9  # the session's pair serves other tests in database 0


def _random(rng: random.Random, low: int, high: int) -> bytes:
    return bytes(rng.choice(ALPHABET) for _ in range(rng.randint(low, high)))


def _clients(pair) -> tuple[redis.Redis, redis.Redis]:
    theirs, ours = pair.by_kind["plain"]
    return redis.Redis(port=theirs.port, db=DB), redis.Redis(port=ours.port, db=DB)


def test_keys_and_scan_match_as_redis_does(pair) -> None:
    rng = random.Random(7)
    keys = {_random(rng, 0, 6) for _ in range(400)}
    clients = _clients(pair)
    for r in clients:
        r.flushdb()
        r.mset(dict.fromkeys(keys, 1))
    try:
        patterns = [_random(rng, 1, 8) for _ in range(1500)]
        # the nesting guard (1,000 stars deep), lone stars, unclosed classes, a lone escape
        patterns += [b"a*" * 1000 + b"a", b"a*" * 1001 + b"a", b"*", b"**", b"[", b"[^", b"\\"]
        differ = []
        for pattern in patterns:
            theirs, ours = (sorted(r.keys(pattern)) for r in clients)
            if theirs != ours:
                differ.append((pattern, theirs[:5], ours[:5]))
        assert not differ, differ[:10]
        for pattern in patterns[:300]:
            theirs, ours = (sorted(r.scan_iter(match=pattern, count=1000)) for r in clients)
            assert theirs == ours, pattern
        # the nesting guard's two sides really were tried: a key long enough for both
        for r in clients:
            r.set(b"a" * 1100, 1)
        theirs, ours = ([r.keys(p) for p in patterns[1500:1502]] for r in clients)
        assert theirs == ours == [[b"a" * 1100], []]
    finally:
        for r in clients:
            r.flushdb()


def test_psubscribe_and_pubsub_channels_match_as_redis_does(pair) -> None:
    rng = random.Random(11)
    patterns = list({_random(rng, 1, 5) for _ in range(40)})
    channels = [_random(rng, 1, 5) for _ in range(60)]
    counts = []
    for r in _clients(pair):
        sub = r.pubsub()
        sub.psubscribe(*patterns)
        for _ in patterns:  # the confirmations
            sub.get_message(timeout=5)
        counts.append([r.publish(c, b"m") for c in channels])
        sub.close()
    assert counts[0] == counts[1]
    assert len(set(counts[0])) >= 3  # channels matched by different numbers of patterns


def test_config_get_patterns_ignore_case_as_redis_does(pair) -> None:
    theirs, ours = _clients(pair)
    for pattern in ("MAXMEMORY*", "*Memory-P[O]LICY", "[M]axmemory", "*[A-Z]ort"):
        known = set(ours.config_get("*"))
        want = {k for k in theirs.config_get(pattern) if k in known}
        assert want, pattern
        assert set(ours.config_get(pattern)) == want, pattern


def test_the_long_patterns_walk_agrees_with_the_regular_expression() -> None:
    rng = random.Random(3)
    for _ in range(3000):
        pattern, text = _random(rng, 0, 8), _random(rng, 0, 8)
        for nocase in (False, True):
            tokens = glob.tokens_of(pattern, nocase)
            assert glob._slow(tokens, text) == glob.match(pattern, text, nocase), (pattern, text)
    # a pattern past COMPILED_MAX goes the walk's way
    long = b"ab" * glob.COMPILED_MAX + b"*"
    assert glob.match(long, b"ab" * glob.COMPILED_MAX + b"tail")
    assert not glob.match(long, b"ab" * (glob.COMPILED_MAX - 1))


def test_patterns_that_held_the_daemon_are_answered_while_others_are_served(pair) -> None:
    """fnmatch read a pattern of many '[' in quadratic time (20 KB: 12 s) while every client,
    NSQ's too, waited."""
    _, ours = _clients(pair)
    ours.set(b"somekey", 1)
    hostile = [b"[" * 200_000, b"*a" * 50_000 + b"b", b"a*" * 100_000, b"[a-" * 60_000]
    answered: list[object] = []

    def run() -> None:
        r = redis.Redis(port=ours.connection_pool.connection_kwargs["port"], db=DB)
        sub = r.pubsub()
        sub.psubscribe(*hostile)
        for pattern in hostile:
            answered.append(r.keys(pattern))
            answered.append(r.scan(0, match=pattern, count=100)[1])
            answered.append(r.pubsub_channels(pattern))
            answered.append(r.publish(b"somechannel", b"m"))  # against every pattern
        sub.close()

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    deadline = time.monotonic() + 120
    while worker.is_alive() and time.monotonic() < deadline:
        started = time.monotonic()
        assert ours.ping()
        assert time.monotonic() - started < 2, "a glob held the daemon"
        worker.join(0.05)
    assert not worker.is_alive()
    assert len(answered) == 4 * len(hostile)
    ours.flushdb()
