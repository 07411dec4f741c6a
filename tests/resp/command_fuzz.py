"""A seeded generator of command sequences for the Redis front-end (fuzz_compare.py sends
them to redis-server and to ours). Keys are few (KEYS) so types collide and WRONGTYPE paths
are hit; arguments come from small pools with bad integers, bad floats and wrong arities
mixed in; a MULTI is followed by a few commands and its EXEC or DISCARD.

What is left out, and why (what is masked in the replies: fuzz_compare.py):
- SPOP picks at random: sent only on sets of 0 or 1 member (fuzz_compare asks SCARD first).
  SRANDMEMBER, HRANDFIELD, RANDOMKEY are not generated.
- expiry times are distinct multiples of 10 s (EXPIRY_POOL), so that GT/LT, which compare
  absolute times taken at two different milliseconds, have the same answer on both servers
  whatever the pace; no key expires during a run (the least is 100 s), so nothing depends on
  when a server's expiry cycle runs. A time of 0 or less deletes at once on both.
- BLPOP and the other blocking commands wait 0.01 s at most (one connection can serve
  nothing else), and a BLPOP/BRPOP/BZPOP* never gets a word appended (its timeout).
- XADD's IDs are explicit (`*` takes the clock): mostly past every earlier one (one counter
  for all keys), sometimes an old, a zero or a bad one, or `<ms>-*`."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

KEYS = [b"k0", b"k1", b"k2", b"k3", b"k4", b"k5"]
MEMBERS = [b"a", b"b", b"c", b"d", b"1", b"2", b"-3", b"10", b""]
INTS = [b"0", b"1", b"2", b"-1", b"3", b"-5", b"10", b"100"]
BAD_INTS = [b"abc", b"1.5", b"", b" 1", b"9223372036854775808", b"0x10", b"+1", b"1e3"]
# doubles print as %.17g: 0.10000000000000001, 1e+20, -1.4999999999999999e-07
FLOATS = [b"0", b"1", b"-2", b"1.5", b"-0.25", b"10", b"3e2", b"inf", b"-inf", b"0.1", b"1e20",
          b"-1.5e-7"]  # fmt: skip
BAD_FLOATS = [b"abc", b"nan", b"", b"1.5.2", b"(1", b"1e"]
RANGES = [b"-inf", b"+inf", b"(1", b"(-2", b"1.5", b"0", b"10", b"(10"]
EDGE_INTS = [b"9223372036854775807", b"-9223372036854775808", b"9223372036854775806"]
VALUES = [b"v", b"x", b"10", b"-7", b"3.5", b"", b"abc", b"9223372036854775807", b"007"]
EXPIRY_POOL = range(100, 100_000, 10)


@dataclass
class Gen:
    """One seed's generator: `command()` gives the next command's arguments."""

    rng: random.Random
    start: int = 0  # unix seconds at the run's start, for EXAT and EXPIREAT
    expiries: list[int] = field(default_factory=list)
    in_multi: int = 0  # the commands left before the EXEC or DISCARD of a MULTI sent
    clock: int = 1  # the milliseconds of the next stream ID (streams' IDs only grow)
    resp3: bool = False  # the connection's own commands too (HELLO, CLIENT, SUBSCRIBE)

    def key(self) -> bytes:
        return self.rng.choice(KEYS)

    def keys(self, most: int = 3) -> list[bytes]:
        return [self.key() for _ in range(self.rng.randint(1, most))]

    def pick(self, good: list[bytes], bad: list[bytes], bad_odds: float = 0.08) -> bytes:
        return self.rng.choice(bad if self.rng.random() < bad_odds else good)

    def int_(self) -> bytes:
        return self.pick(INTS, BAD_INTS)

    def float_(self) -> bytes:
        return self.pick(FLOATS, BAD_FLOATS)

    def member(self) -> bytes:
        return self.rng.choice(MEMBERS)

    def members(self, most: int = 3) -> list[bytes]:
        return [self.member() for _ in range(self.rng.randint(1, most))]

    def value(self) -> bytes:
        return self.rng.choice(VALUES)

    def seconds(self) -> bytes:
        """A time in seconds, distinct from every other one of the run (see the docstring);
        now and then 0, a negative or a bad integer."""
        r = self.rng.random()
        if r < 0.06:
            return self.rng.choice([b"0", b"-1", b"abc", b"9223372036854775807", b"1.5"])
        return b"%d" % self.expiries.pop()

    def millis(self) -> bytes:
        s = self.seconds()
        return s + b"000" if s.isdigit() and s != b"0" else s

    def side(self) -> bytes:
        return self.rng.choice([b"LEFT", b"RIGHT", b"left", b"UP"] if self.rng.random() < 0.05
                               else [b"LEFT", b"RIGHT"])  # fmt: skip

    def at(self) -> bytes:
        """A unix time in seconds, as `seconds()` from the run's start (the same on both)."""
        s = self.seconds()
        return b"%d" % (self.start + int(s)) if s.isdigit() and s != b"0" else s

    def pairs(self, first: Callable[[], bytes], second: Callable[[], bytes]) -> list[bytes]:
        return [x for _ in range(self.rng.randint(1, 3)) for x in (first(), second())]

    def opt(self, odds: float, *words: bytes) -> list[bytes]:
        return list(words) if self.rng.random() < odds else []

    def command(self) -> list[bytes]:
        if self.in_multi == 1:  # a transaction ends after a few commands
            self.in_multi = 0
            return [b"EXEC"] if self.rng.random() < 0.85 else [b"DISCARD"]
        self.in_multi = max(self.in_multi - 1, 0)
        families = FAMILIES_RESP3 if self.resp3 else FAMILIES
        make = self.rng.choices([m for _, m in families], weights=[w for w, _ in families])[0]
        argv = make(self)
        if argv == [b"MULTI"]:
            self.in_multi = self.in_multi or self.rng.randint(2, 8)
        r = self.rng.random()
        if r < 0.03 and len(argv) > 1:  # wrong arity, or a variadic one cut short
            return argv[: self.rng.randint(1, len(argv) - 1)]
        if r < 0.05 and argv[0] not in LAST_WORD_FIXED:
            return [*argv, self.value()]
        return argv


# -- strings ---------------------------------------------------------------------------------


def _set(g: Gen) -> list[bytes]:
    argv = [b"SET", g.key(), g.value()]
    argv += g.opt(0.2, g.rng.choice([b"NX", b"XX"]))
    argv += g.opt(0.2, b"GET")
    ttl = g.rng.random()
    if ttl < 0.15:
        argv += [b"EX", g.seconds()]
    elif ttl < 0.25:
        argv += [b"PX", g.millis()]
    elif ttl < 0.32:
        argv += [b"KEEPTTL"]
    elif ttl < 0.36:
        argv += [b"EXAT", g.at()]
    elif ttl < 0.40:
        argv += [b"PXAT", g.at() + b"000"]
    if g.rng.random() < 0.15:
        g.rng.shuffle(argv[3:])
    return argv


def _strings(g: Gen) -> list[bytes]:
    k = g.key()
    return g.rng.choice([
        lambda: _set(g),
        lambda: [b"GET", k],
        lambda: [b"GETDEL", k],
        lambda: [b"GETEX", k, *g.rng.choice([[], [b"PERSIST"], [b"EX", g.seconds()],
                                              [b"PX", g.millis()], [b"EX"], [b"FOO"],
                                              [b"EXAT", g.at()], [b"PERSIST", b"EX", b"1"]])],
        lambda: [b"INCR", k],
        lambda: [b"DECR", k],
        lambda: [b"INCRBY", k, g.int_()],
        lambda: [b"DECRBY", k, g.int_()],
        lambda: [b"APPEND", k, g.value()],
        lambda: [b"STRLEN", k],
        lambda: [b"MGET", *g.keys()],
        lambda: [b"MSET", *g.pairs(g.key, g.value)],
        lambda: [b"MSETNX", *g.pairs(g.key, g.value)],
        lambda: [b"SETNX", k, g.value()],
        lambda: [b"GETSET", k, g.value()],
        lambda: [b"SETEX", k, g.seconds(), g.value()],
        lambda: [b"PSETEX", k, g.millis(), g.value()],
        lambda: [b"INCRBYFLOAT", k, g.float_()],
        lambda: [b"INCRBY", k, g.rng.choice(EDGE_INTS)],
    ])()  # fmt: skip


# -- keys ------------------------------------------------------------------------------------


def _keys(g: Gen) -> list[bytes]:
    k = g.key()
    expire_flags = g.opt(0.4, g.rng.choice([b"NX", b"XX", b"GT", b"LT", b"gt", b"FOO"]))
    expire_flags += g.opt(0.05, g.rng.choice([b"NX", b"XX", b"GT", b"LT"]))
    return g.rng.choice([
        lambda: [b"DEL", *g.keys()],
        lambda: [b"EXISTS", *g.keys()],
        lambda: [b"EXPIRE", k, g.seconds(), *expire_flags],
        lambda: [b"PEXPIRE", k, g.millis(), *expire_flags],
        lambda: [b"TTL", k],
        lambda: [b"PTTL", k],
        lambda: [b"PERSIST", k],
        lambda: [b"TYPE", k],
        lambda: [b"RENAME", k, g.key()],
        lambda: [b"RENAMENX", k, g.key()],
        lambda: [b"KEYS", b"*"],
        lambda: [b"EXPIREAT", k, g.at(), *expire_flags],
        lambda: [b"PEXPIREAT", k, g.at() + b"000", *expire_flags],
        lambda: [b"EXPIRETIME", k],
        lambda: [b"PEXPIRETIME", k],
        lambda: [b"UNLINK", *g.keys()],
        lambda: [b"DBSIZE"],
        lambda: [b"COPY", k, g.key(), *g.opt(0.3, b"REPLACE"),
                 *g.opt(0.15, b"DB", g.rng.choice([b"0", b"1", b"16", b"x"]))],
    ])()  # fmt: skip


# -- lists -----------------------------------------------------------------------------------


def _count(g: Gen) -> list[bytes]:
    return g.opt(0.4, g.rng.choice([b"1", b"2", b"5", b"0", b"-1", b"abc"]))


def _lists(g: Gen) -> list[bytes]:
    k = g.key()
    pos = g.rng.choice([b"0", b"1", b"-1", b"2", b"-3", b"10"]) if g.rng.random() > 0.05 else b"x"
    return g.rng.choice([
        lambda: [b"LPUSH", k, *g.members()],
        lambda: [b"LPUSHX", k, *g.members()],
        lambda: [b"RPUSHX", k, *g.members()],
        lambda: [b"RPUSH", k, *g.members()],
        lambda: [b"LPOP", k, *_count(g)],
        lambda: [b"RPOP", k, *_count(g)],
        lambda: [b"LRANGE", k, pos, g.rng.choice([b"-1", b"0", b"2", b"-2", b"100"])],
        lambda: [b"LLEN", k],
        lambda: [b"LINDEX", k, pos],
        lambda: [b"LSET", k, pos, g.member()],
        lambda: [b"LREM", k, g.rng.choice([b"0", b"1", b"-1", b"2", b"-2", b"z"]), g.member()],
        lambda: [b"LTRIM", k, pos, g.rng.choice([b"-1", b"0", b"1", b"-2", b"5"])],
        lambda: [b"LINSERT", k, g.rng.choice([b"BEFORE", b"AFTER", b"MIDDLE"]), g.member(),
                 g.member()],
        lambda: [b"LPOS", k, g.member(), *g.opt(0.4, b"RANK", g.rng.choice(
                 [b"1", b"-1", b"2", b"0", b"-2"])), *g.opt(0.4, b"COUNT", g.rng.choice(
                 [b"0", b"1", b"2", b"-1"])), *g.opt(0.2, b"MAXLEN", g.rng.choice(
                 [b"0", b"1", b"3", b"-1"]))],
        lambda: [b"LMOVE", k, g.key(), g.side(), g.side()],
        lambda: [b"RPOPLPUSH", k, g.key()],
        lambda: _mpop(g, b"LMPOP", []),
        lambda: _mpop(g, b"BLMPOP", [b"0.01"]),
        lambda: [g.rng.choice([b"BLPOP", b"BRPOP"]), *g.keys(2), b"0.01"],
        lambda: [b"BLMOVE", k, g.key(), g.side(), g.side(), b"0.01"],
        lambda: [b"BRPOPLPUSH", k, g.key(), b"0.01"],
    ])()  # fmt: skip


def _numkeys(g: Gen) -> list[bytes]:
    keys = g.keys(2)
    n = b"%d" % len(keys) if g.rng.random() > 0.05 else g.rng.choice([b"0", b"5", b"x", b"-1"])
    return [n, *keys]


def _mpop(g: Gen, name: bytes, timeout: list[bytes]) -> list[bytes]:
    count = g.opt(0.4, b"COUNT", g.rng.choice([b"1", b"2", b"0", b"-1"]))
    return [name, *timeout, *_numkeys(g), g.rng.choice([b"LEFT", b"RIGHT", b"UP"]), *count]


# -- hashes, sets, sorted sets ---------------------------------------------------------------


def _hashes(g: Gen) -> list[bytes]:
    k = g.key()
    return g.rng.choice([
        lambda: [b"HSET", k] + [x for _ in range(g.rng.randint(1, 3)) for x in (g.member(),
                                                                              g.value())],
        lambda: [b"HGET", k, g.member()],
        lambda: [b"HDEL", k, *g.members()],
        lambda: [b"HINCRBY", k, g.member(), g.int_()],
        lambda: [b"HGETALL", k],
        lambda: [b"HLEN", k],
        lambda: [b"HEXISTS", k, g.member()],
        lambda: [b"HSETNX", k, g.member(), g.value()],
        lambda: [b"HMGET", k, *g.members()],
        lambda: [b"HKEYS", k],
        lambda: [b"HVALS", k],
        lambda: [b"HSTRLEN", k, g.member()],
        lambda: [b"HINCRBYFLOAT", k, g.member(), g.float_()],
        lambda: [b"HINCRBY", k, g.member(), g.rng.choice(EDGE_INTS)],
        lambda: [b"HMSET", k, *g.pairs(g.member, g.value)],
    ])()  # fmt: skip


def _sets(g: Gen) -> list[bytes]:
    k = g.key()
    return g.rng.choice([
        lambda: [b"SADD", k, *g.members()],
        lambda: [b"SREM", k, *g.members()],
        lambda: [b"SMEMBERS", k],
        lambda: [b"SISMEMBER", k, g.member()],
        lambda: [b"SCARD", k],
        lambda: [b"SPOP", k, *g.opt(0.5, g.rng.choice([b"1", b"0", b"2", b"-1", b"x"]))],
        lambda: [b"SMISMEMBER", k, *g.members()],
        lambda: [b"SMOVE", k, g.key(), g.member()],
        lambda: [g.rng.choice([b"SINTER", b"SUNION", b"SDIFF"]), *g.keys()],
        lambda: [g.rng.choice([b"SINTERSTORE", b"SUNIONSTORE", b"SDIFFSTORE"]), *g.keys()],
        lambda: [b"SINTERCARD", *_numkeys(g), *g.opt(0.3, b"LIMIT", g.rng.choice(
                 [b"0", b"1", b"-1", b"x"]))],
    ])()  # fmt: skip


def _zadd(g: Gen) -> list[bytes]:
    argv = [b"ZADD", g.key()]
    argv += g.opt(0.25, g.rng.choice([b"NX", b"XX"]))
    argv += g.opt(0.25, g.rng.choice([b"GT", b"LT"]))
    argv += g.opt(0.25, b"CH")
    argv += g.opt(0.15, b"INCR")
    pairs = g.rng.randint(1, 3) if g.rng.random() > 0.05 else 0
    return argv + [x for _ in range(pairs) for x in (g.float_(), g.member())]


def _zrange(g: Gen) -> list[bytes]:
    k = g.key()
    if g.rng.random() < 0.5:
        ends = [g.rng.choice(RANGES), g.rng.choice(RANGES)]
        by = [b"BYSCORE"]
    else:
        ends = [g.rng.choice([b"0", b"1", b"-1", b"-2", b"5"]) for _ in range(2)]
        by = g.opt(0.05, b"BYSCORE")
    rev = g.opt(0.3, b"REV")
    limit = g.opt(0.3, b"LIMIT", g.rng.choice([b"0", b"1", b"-1"]),
                  g.rng.choice([b"1", b"2", b"-1", b"0"]))  # fmt: skip
    scores = g.opt(0.4, b"WITHSCORES")
    tail = [*by, *rev, *limit, *scores]
    g.rng.shuffle(tail) if g.rng.random() < 0.1 else None
    return [b"ZRANGE", k, *ends, *tail]


def _zsets(g: Gen) -> list[bytes]:
    k = g.key()
    return g.rng.choice([
        lambda: _zadd(g),
        lambda: _zadd(g),
        lambda: [b"ZSCORE", k, g.member()],
        lambda: _zrange(g),
        lambda: [b"ZREM", k, *g.members()],
        lambda: [b"ZCARD", k],
        lambda: [b"ZINCRBY", k, g.float_(), g.member()],
        lambda: [b"ZRANK", k, g.member()],
        lambda: [b"ZREVRANK", k, g.member()],
        lambda: [b"ZCOUNT", k, g.rng.choice(RANGES), g.rng.choice(RANGES)],
        lambda: [b"ZMSCORE", k, *g.members()],
        lambda: [g.rng.choice([b"ZRANGEBYSCORE", b"ZREVRANGEBYSCORE"]), k,
                 g.rng.choice(RANGES), g.rng.choice(RANGES), *g.opt(0.3, b"WITHSCORES"),
                 *g.opt(0.3, b"LIMIT", g.rng.choice([b"0", b"1"]), g.rng.choice([b"1", b"-1"]))],
        lambda: [b"ZREVRANGE", k, g.rng.choice([b"0", b"1", b"-1"]),
                 g.rng.choice([b"-1", b"0", b"2"]), *g.opt(0.3, b"WITHSCORES")],
        lambda: [b"ZREMRANGEBYSCORE", k, g.rng.choice(RANGES), g.rng.choice(RANGES)],
        lambda: [b"ZREMRANGEBYRANK", k, g.rng.choice([b"0", b"1", b"-1"]),
                 g.rng.choice([b"-1", b"0", b"2"])],
        lambda: [b"ZPOPMAX", k, *g.opt(0.4, g.rng.choice([b"1", b"2", b"0", b"-1", b"x"]))],
        lambda: [b"ZPOPMIN", k, *g.opt(0.4, g.rng.choice([b"1", b"2", b"0", b"-1", b"x"]))],
        lambda: [g.rng.choice([b"BZPOPMIN", b"BZPOPMAX"]), *g.keys(2),
                 g.rng.choice([b"0.01", b"0.01", b"0.01", b"-1", b"x", b"inf"])],
        lambda: _zmpop(g, b"ZMPOP", []),
        lambda: _zmpop(g, b"BZMPOP", [g.rng.choice([b"0.01", b"0.01", b"-2", b"nan"])]),
    ])()  # fmt: skip


def _zmpop(g: Gen, name: bytes, timeout: list[bytes]) -> list[bytes]:
    count = g.opt(0.4, b"COUNT", g.rng.choice([b"1", b"2", b"5", b"0", b"-1", b"x"]))
    where = g.rng.choice([b"MIN", b"MAX", b"max", b"LEFT"])
    return [name, *timeout, *_numkeys(g), where, *count, *g.opt(0.05, b"COUNT", b"1")]


# -- streams -------------------------------------------------------------------------------


def _stream_id(g: Gen) -> bytes:
    """An ID for XADD: mostly the next one, sometimes an old or a bad one."""
    r = g.rng.random()
    if r < 0.1:
        return g.rng.choice(
            [b"0-0", b"0-1", b"1", b"1-1", b"x", b"-1", b"1-x", b"18446744073709551616"]
        )
    g.clock += g.rng.choice([0, 1, 1, 2])
    if r < 0.2:
        return b"%d-*" % g.clock
    return b"%d-%d" % (g.clock, g.rng.randrange(0, 3) if r < 0.9 else g.rng.randrange(3, 200))


def _old_id(g: Gen) -> bytes:
    """An ID XADD may have given (or, now and then, not an ID)."""
    if g.rng.random() < 0.05:
        return g.rng.choice([b"-", b"x", b"1-"])
    return b"%d-%d" % (max(0, g.clock - g.rng.randrange(0, 4)), g.rng.randrange(0, 3))


def _range_id(g: Gen) -> bytes:
    return g.rng.choice([
        b"-", b"+", b"0", b"1", b"2-1", b"(1-1", b"(3", b"%d" % g.clock, b"%d-1" % g.clock,
        b"(%d" % g.clock, b"x", b"(+",
    ])  # fmt: skip


def _stream_trim(g: Gen) -> list[bytes]:
    how = g.opt(0.5, g.rng.choice([b"~", b"="]))
    if g.rng.random() < 0.5:
        trim = [b"MAXLEN", *how, g.rng.choice([b"0", b"1", b"2", b"5", b"-1", b"x"])]
    else:
        trim = [b"MINID", *how, g.rng.choice([b"0", b"1-1", b"%d" % g.clock, b"%d-1" % g.clock])]
    return trim + g.opt(0.15, b"LIMIT", g.rng.choice([b"0", b"1", b"100", b"-1"]))


def _streams(g: Gen) -> list[bytes]:
    k = g.key()
    fields = g.pairs(g.member, g.value) if g.rng.random() > 0.05 else [g.member()]
    count = g.opt(0.3, b"COUNT", g.rng.choice([b"0", b"1", b"2", b"-1", b"x"]))
    return g.rng.choice([
        lambda: [b"XADD", k, *g.opt(0.1, b"NOMKSTREAM"), _stream_id(g), *fields],
        lambda: [b"XADD", k, *g.opt(0.2, *_stream_trim(g)), _stream_id(g), *fields],
        lambda: [b"XRANGE", k, _range_id(g), _range_id(g), *count],
        lambda: [b"XREVRANGE", k, _range_id(g), _range_id(g), *count],
        lambda: [b"XLEN", k],
        lambda: [b"XDEL", k, *[_old_id(g) for _ in range(g.rng.randint(1, 3))]],
        lambda: [b"XTRIM", k, *_stream_trim(g)],
    ])()  # fmt: skip


def _transactions(g: Gen) -> list[bytes]:
    return g.rng.choice([
        [b"MULTI"], [b"MULTI"], [b"MULTI"], [b"EXEC"], [b"DISCARD"], [b"WATCH", *g.keys(2)],
        [b"WATCH", *g.keys(2)], [b"UNWATCH"],
    ])  # fmt: skip


# -- the connection's own (RESP3 runs only) ------------------------------------------------


def _connection(g: Gen) -> list[bytes]:
    """HELLO (3 mostly: a HELLO 2 puts the connection on RESP2 until the next HELLO 3), its
    AUTH (the default user has no password: any password passes) and SETNAME options, CLIENT
    SETNAME/GETNAME, and one channel's SUBSCRIBE/UNSUBSCRIBE (no PUBLISH: replies only)."""
    name = g.rng.choice([b"fuzz", b"", b"a b", b"x\n", b"\xc3\xa9", b"n-1"])
    hello = [b"HELLO", g.rng.choice([b"3", b"3", b"3", b"3", b"3", b"2", b"4", b"1", b"x"])]
    return g.rng.choice([
        lambda: hello,
        lambda: [b"HELLO"],
        lambda: [*hello, b"SETNAME", name],
        lambda: [*hello, b"AUTH", g.rng.choice([b"default", b"nobody"]), g.value()],
        lambda: [*hello, b"SETNAME", name, *g.rng.choice([[b"FOO"], [b"AUTH", b"nobody", b"p"],
                                                        [b"AUTH", b"default", b"p"]])],
        lambda: [b"HELLO", b"3", b"SETNAME", name, b"AUTH", b"nobody", b"p"],
        lambda: [b"CLIENT", b"SETNAME", name],
        lambda: [b"CLIENT", b"GETNAME"],
        lambda: [b"CLIENT", b"GETNAME"],
        lambda: [b"SUBSCRIBE", b"ch"],
        lambda: [b"UNSUBSCRIBE", *g.opt(0.6, b"ch")],  # thrice: out of RESP2's subscribed
        lambda: [b"UNSUBSCRIBE", *g.opt(0.6, b"ch")],  # mode, where nearly every command
        lambda: [b"UNSUBSCRIBE", *g.opt(0.6, b"ch")],  # is refused, sooner
    ])()  # fmt: skip


# commands not to append a word to: a BLPOP/BRPOP/BZPOPMIN/BZPOPMAX's last word is its
# timeout (a word appended would wait that long); one channel
LAST_WORD_FIXED = (b"BLPOP", b"BRPOP", b"BZPOPMIN", b"BZPOPMAX", b"SUBSCRIBE", b"UNSUBSCRIBE")
FAMILIES: list[tuple[int, Callable[[Gen], list[bytes]]]] = [
    (5, _strings), (4, _keys), (7, _lists), (3, _hashes), (3, _sets), (4, _zsets),
    (3, _streams), (2, _transactions),
]  # fmt: skip
FAMILIES_RESP3 = [*FAMILIES, (3, _connection)]
