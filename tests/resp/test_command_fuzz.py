"""The seeded command fuzz (command_fuzz.py, fuzz_compare.py) against redis-server 7.0.15,
bounded: fixed seeds of random command sequences over six keys (strings, keys with COPY,
lists, hashes, sets, sorted sets, streams, transactions), every reply compared with
redis-server's (TTLs within a drift, unordered replies sorted). Over RESP2, and over RESP3
(both connections open with HELLO 3; maps and sets compared order-free, doubles as Redis
prints them) with the connection's own commands added: HELLO 2/3/4 with AUTH and SETNAME,
CLIENT SETNAME/GETNAME, one channel's SUBSCRIBE/UNSUBSCRIBE push frames. A mismatch names
the seed, the command and both replies; `python -m tests.resp.fuzz_compare FIRST COUNT
[LENGTH [PROTOCOL]]` runs more seeds."""

from __future__ import annotations

from collections import Counter

from conformance.resp.servers import Pair

from .fuzz_compare import run_seed

SEEDS = range(20261210, 20261210 + 70)
LENGTH = 200


def test_random_commands_answer_as_redis(pair: Pair) -> None:
    redis, ours = pair.by_kind["plain"]
    seen: Counter[bytes] = Counter()
    for seed in SEEDS:
        miss = run_seed(seed, redis.port, ours.port, LENGTH, seen)
        assert miss is None, str(miss)
    # the sequences reach what they are for: every type's paths, errors, transactions
    for kind, least in {
        b":": 1500, b"$": 400, b"*": 400, b"+": 1000, b"-WRONGTYPE": 2000, b"-ERR": 800,
        b"-EXECABORT": 10, b"EXEC*": 100,
        # streams and COPY answered (not only refused): XADD's IDs, ranges, counts
        b"XADD $": 60, b"XRANGE *": 30, b"XREVRANGE *": 30, b"XDEL :": 30, b"XTRIM :": 25,
        b"XLEN :": 25, b"COPY :": 40,
    }.items():  # fmt: skip
        assert seen[kind] >= least, (kind, seen)


def test_random_commands_answer_as_redis_over_resp3(pair: Pair) -> None:
    redis, ours = pair.by_kind["plain"]
    seen: Counter[bytes] = Counter()
    for seed in SEEDS:
        miss = run_seed(seed, redis.port, ours.port, LENGTH, seen, protocol=3)
        assert miss is None, str(miss)
    # RESP3's types come (nulls, maps, sets, doubles, push frames), and the HELLO paths
    for kind, least in {
        b"_": 400, b"%": 100, b"~": 20, b",": 10, b">": 200, b"*": 400, b"EXEC*": 100,
        b"-NOPROTO": 30, b"-WRONGPASS": 30, b"-WRONGTYPE": 2000, b"XADD $": 50,
        b"XRANGE *": 25, b"COPY :": 40,
    }.items():  # fmt: skip
        assert seen[kind] >= least, (kind, seen)
