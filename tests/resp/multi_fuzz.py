"""A seeded generator of interleaved steps over several connections (multi_fuzz_run.py sends
each step to redis-server and to ours and compares what every connection receives). What it
is for is what happens between clients: blocking pops and moves woken by another client's
push (several waiters on one key: the longest waiting is served first), sorted-set pops
(BZPOPMIN/BZPOPMAX/BZMPOP) woken by ZADD/ZINCRBY, stream reads (XREAD BLOCK, `$` or an ID)
woken by an XADD past their ID (every waiter of the stream, not one), consumer groups (XGROUP
CREATE and DESTROY, XREADGROUP `>` with BLOCK woken by an XADD: one waiter of a group served
per new entry, the others left waiting; a destroyed group answers its waiters -NOGROUP;
history by ID 0, NOACK, XACK, XPENDING's summary, XCLAIM and XAUTOCLAIM with min-idle-time
0), waiters of several types
on one key (a key serves the waiters of its type and leaves the others in place), a blocked client
timing out, unblocked by CLIENT UNBLOCK, killed or closing its connection; WATCH spoiled by
another client's write (not by a read) or by its key expiring; PUBLISH to several SUBSCRIBE
and PSUBSCRIBE clients (the count, the order of messages).

The generator reads the state the runner saw on redis-server (`View`: which connections wait
for a reply, are in MULTI, are subscribed) so that it never sends on a blocked connection,
and in RESP2 sends a subscribed connection what subscribed mode allows (mostly).

What is left out, and why:
- a blocking command's timeout is 0 (for ever) or 30 s (never reached in a seed), or TIMED:
  then the next step, if the client did block, is a SLEEP past it, so that both servers have
  timed it out before anything else can serve it (a timeout racing a push has no fixed answer).
- short expiries only in the expiry scenario (`_expiring`): SET ... PX 200, a WATCH of the key,
  a SLEEP past it, then that client's MULTI/EXEC; nothing else touches the key meanwhile.
- XADD *: its ID is the server's clock; the fuzz gives IDs of its own (increasing).
- replies whose order is the server's hash table's (SMEMBERS, HGETALL, PUBSUB CHANNELS).
- what holds an idle time or a clock: XINFO, XPENDING's extended form (only with IDLE huge,
  which answers the empty array), XCLAIM/XAUTOCLAIM's min-idle-time other than 0."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

CONNS = 4
LISTS = [b"q0", b"q1", b"q2", b"q3"]
OTHER = [b"s0", b"z0"]  # a string and a sorted set: WRONGTYPE for waiters and pushers
# what sorted-set pops wait on: the sorted sets, and a list now and then (WRONGTYPE, or a key
# with waiters of both types)
ZKEYS = [b"z0", b"z1", b"z1", b"q0"]
CHANNELS = [b"ch0", b"ch1", b"news.a"]
PATTERNS = [b"ch*", b"news.*", b"*", b"ch[01]"]
TIMED = b"0.05"  # a blocking command's short timeout; SLEEP_PAST of sleep follows it
SLEEP_PAST = 0.09
# the expiry scenario's PX: long enough that the WATCH two steps later comes before it on both
# servers on a busy machine (then the watch is of a live key; one already expired would not
# be spoiled by its expiry), and the SLEEP that follows it
EXPIRES, SLEEP_EXPIRED = b"200", 0.25
# what stream reads wait on: the streams, and a list now and then (WRONGTYPE, or a missing key
# whose waiters of two types each wait for their own)
XKEYS = [b"x0", b"x0", b"x1", b"q1"]
XTIMED = b"50"  # XREAD's BLOCK is in milliseconds: TIMED's
ZBLOCKING = {b"BZPOPMIN", b"BZPOPMAX", b"BZMPOP"}
XBLOCKING = {b"XREAD", b"XREADGROUP"}
# consumer groups and consumers (two groups on a key: XADD serves the waiters of each)
GROUPS = [b"g0", b"g0", b"g1"]
CONSUMERS = [b"c0", b"c1", b"c2"]
BLOCKING = {b"BLPOP", b"BRPOP", b"BLMOVE", b"BRPOPLPUSH", b"BLMPOP", *ZBLOCKING, *XBLOCKING}
SUBSCRIBING = {b"SUBSCRIBE", b"UNSUBSCRIBE", b"PSUBSCRIBE", b"PUNSUBSCRIBE"}


@dataclass
class Step:
    """`conn`'s command `argv` ("{id:N}" in it: connection N's CLIENT ID on each server), or
    `op` "close" (close `conn` and open a new one in its place), "sleep" (`seconds`)."""

    conn: int
    argv: list[bytes] = field(default_factory=list)
    op: str = "cmd"
    seconds: float = 0.0
    tag: str = ""  # the scenario it belongs to, for the runner's counts


@dataclass
class View:
    """What the runner saw on redis-server, per connection: replies still owed (a blocked
    client owes one), in MULTI, the number of channels and patterns subscribed."""

    owed: list[int] = field(default_factory=lambda: [0] * CONNS)
    multi: list[bool] = field(default_factory=lambda: [False] * CONNS)
    subs: list[int] = field(default_factory=lambda: [0] * CONNS)


@dataclass
class Gen:
    rng: random.Random
    resp3: bool = False
    queued: list[Step] = field(default_factory=list)  # a scenario's remaining steps
    sleep_if_blocked: int = -1  # the connection of a TIMED blocking command just sent
    serial: int = 0
    xids: list[bytes] = field(default_factory=list)  # the XADD IDs given, for XACK and XCLAIM

    def step(self, view: View) -> Step:
        if self.sleep_if_blocked >= 0:
            blocked, self.sleep_if_blocked = view.owed[self.sleep_if_blocked] > 0, -1
            if blocked:
                return Step(-1, op="sleep", seconds=SLEEP_PAST, tag="timeout")
        if self.queued:
            return self.queued.pop(0)
        free = [i for i in range(CONNS) if view.owed[i] == 0]
        if not free or self.rng.random() < 0.03:  # a client goes away, blocked or not
            blocked = [i for i in range(CONNS) if view.owed[i]] or list(range(CONNS))
            return Step(self.rng.choice(blocked), op="close")
        blocked = [i for i in range(CONNS) if view.owed[i]]
        if blocked and self.rng.random() < 0.04:  # pipelined behind a blocked command
            return Step(self.rng.choice(blocked), self.rng.choice(PIPELINED)(self))
        # a RESP2 subscriber does little else: the others are picked first, half the time
        plain = [i for i in free if not view.subs[i]]
        i = self.rng.choice(plain if plain and self.rng.random() < 0.5 else free)
        if view.subs[i] and not self.resp3 and self.rng.random() < 0.9:
            return Step(i, _subscribed(self))
        if not view.multi[i] and self.rng.random() < 0.012:
            return self._expiring(i, free)
        others = [j for j in free if j != i and not view.multi[j]]
        if others and not view.multi[i] and self.rng.random() < 0.04:
            return self._watching(i, self.rng.choice(others))
        make = self.rng.choices([m for _, m in ACTIONS], weights=[w for w, _ in ACTIONS])[0]
        argv = make(self, i, view)
        if argv[0] in BLOCKING and (TIMED in argv or XTIMED in argv) and not view.multi[i]:
            self.sleep_if_blocked = i
        return Step(i, argv)

    def _expiring(self, i: int, free: list[int]) -> Step:
        """A key with a short expiry, WATCHed by a free connection, a SLEEP past the expiry,
        then that connection's MULTI/EXEC (Redis 7.0: a watched key that expires spoils it)."""
        key = b"e%d" % self.rng.randint(0, 1)
        j = self.rng.choice(free)
        write = self.rng.choice([[b"SET", key, b"v", b"PX", EXPIRES],
                                 [b"RPUSH", key, b"v"]])  # fmt: skip
        steps = [Step(i, write, tag="expiry")]
        if write[0] == b"RPUSH":
            steps.append(Step(i, [b"PEXPIRE", key, EXPIRES], tag="expiry"))
        steps += [
            Step(j, [b"WATCH", key], tag="expiry"),
            Step(-1, op="sleep", seconds=SLEEP_EXPIRED, tag="expiry"),
            Step(j, [b"MULTI"], tag="expiry"),
            Step(j, self.rng.choice([[b"EXISTS", key], [b"INCR", b"s0"], [b"LLEN", key]])),
            Step(j, [b"EXEC"], tag="expiry-exec"),
            # a lookup, which deletes the key on redis-server too: its DBSIZE counts an
            # expired key until then or its expiry cycle, ours not (docs/redis.md)
            Step(i, [b"EXISTS", key]),
        ]
        self.queued = steps[1:]
        return steps[0]

    def _watching(self, i: int, j: int) -> Step:
        """i WATCHes a key or two, j writes or reads one of them (a write that changes
        nothing too: a pop or DEL of a missing key, an LPUSHX to one), i's MULTI/EXEC."""
        keys = self.lists(2)
        k = keys[0]
        touch = self.rng.choice([
            [b"LPUSH", k, b"w"], [b"DEL", k], [b"LPOP", k], [b"LPUSHX", k, b"w"], [b"LLEN", k],
            [b"LRANGE", k, b"0", b"-1"], [b"EXISTS", k], [b"SET", k, b"w"], [b"RENAME", k, k],
            [b"LMOVE", k, k, b"LEFT", b"RIGHT"], [b"LTRIM", k, b"0", b"-1"], [b"EXPIRE", k, b"100"],
            [b"PERSIST", k], [b"RPOPLPUSH", self.lst(), k], [b"FLUSHDB"],
        ])  # fmt: skip
        self.queued = [
            Step(j, touch),
            Step(i, [b"MULTI"]),
            Step(i, [b"LLEN", self.lst()]),
            Step(i, [b"EXEC"], tag="watch-exec"),
        ]
        return Step(i, [b"WATCH", *keys])

    def lst(self) -> bytes:
        return self.rng.choice(LISTS) if self.rng.random() < 0.93 else self.rng.choice(OTHER)

    def lists(self, most: int = 3) -> list[bytes]:
        keys = self.rng.sample(LISTS, self.rng.randint(1, most))
        return keys if self.rng.random() < 0.95 else [*keys, self.rng.choice(OTHER)]

    def zkeys(self, most: int = 2) -> list[bytes]:
        return list(dict.fromkeys(self.rng.choice(ZKEYS) for _ in range(self.rng.randint(1, most))))

    def members(self) -> list[bytes]:
        """ZADD's score and member pairs: new members, now and then `m` (perhaps already
        there: a new score); scores 0-9, so that ties go by member, as Redis orders them."""
        out = []
        for item in self.items():
            out += [b"%d" % self.rng.randint(0, 9), item if self.rng.random() < 0.8 else b"m"]
        return out

    def items(self) -> list[bytes]:
        out = []
        for _ in range(self.rng.choice([1, 1, 1, 2, 3])):
            self.serial += 1
            out.append(b"j%d" % self.serial)
        return out

    def xkeys(self) -> list[bytes]:
        return list(dict.fromkeys(self.rng.choice(XKEYS) for _ in range(self.rng.randint(1, 2))))

    def xid(self) -> bytes:
        """An XADD ID past every one given before (the serial), or now and then an old one
        (refused by a stream past it)."""
        self.serial += 1
        xid = b"%d-1" % (self.serial if self.rng.random() < 0.9 else self.serial // 2)
        self.xids = [*self.xids[-5:], xid]
        return xid

    def seen_xids(self) -> list[bytes]:
        """One to three of the last XADD IDs (delivered to a group, most likely), now and then
        one no stream holds."""
        pool = self.xids or [b"1-1"]
        ids = self.rng.sample(pool, min(len(pool), self.rng.randint(1, 3)))
        return ids if self.rng.random() < 0.9 else [*ids, b"%d-9" % self.serial]

    def timeout(self) -> bytes:
        return self.rng.choices([b"0", b"30", TIMED], weights=[6, 2, 2])[0]

    def side(self) -> bytes:
        return self.rng.choice([b"LEFT", b"RIGHT"])

    def other(self, i: int) -> bytes:
        """CLIENT UNBLOCK/KILL's target: another connection's id (placeholder)."""
        return b"{id:%d}" % self.rng.randrange(CONNS)


def _subscribed(g: Gen) -> list[bytes]:
    """What a RESP2 subscribed connection may send, now and then something it may not."""
    return g.rng.choice([
        lambda: [b"SUBSCRIBE", *g.rng.sample(CHANNELS, g.rng.randint(1, 2))],
        lambda: [b"PSUBSCRIBE", g.rng.choice(PATTERNS)],
        lambda: [b"UNSUBSCRIBE", *g.rng.sample(CHANNELS, g.rng.randint(0, 2))],
        lambda: [b"PUNSUBSCRIBE", *g.rng.sample(PATTERNS, g.rng.randint(0, 1))],
        lambda: [b"UNSUBSCRIBE"],
        lambda: [b"PUNSUBSCRIBE"],
        lambda: [b"PING", b"hi"],
        lambda: [b"LPUSH", g.lst(), *g.items()],
    ])()  # fmt: skip


def _push(g: Gen, i: int, view: View) -> list[bytes]:
    name = g.rng.choice([b"LPUSH", b"RPUSH", b"RPUSH", b"LPUSHX", b"RPUSHX"])
    return [name, g.lst(), *g.items()]


def _block(g: Gen, i: int, view: View) -> list[bytes]:
    t = g.timeout()
    return g.rng.choice([
        lambda: [g.rng.choice([b"BLPOP", b"BRPOP"]), *g.lists(), t],
        lambda: [g.rng.choice([b"BLPOP", b"BRPOP"]), *g.lists(), t],
        lambda: [b"BLMOVE", g.lst(), g.lst(), g.side(), g.side(), t],
        lambda: [b"BRPOPLPUSH", g.lst(), g.lst(), t],
        lambda: [b"BLMPOP", t, *_numkeys(g), g.side(),
                 *g.rng.choice([[], [b"COUNT", b"2"], [b"COUNT", b"1"]])],
        lambda: [g.rng.choice([b"BZPOPMIN", b"BZPOPMAX"]), *g.zkeys(), t],
        lambda: [g.rng.choice([b"BZPOPMIN", b"BZPOPMAX"]), *g.zkeys(), t],
        lambda: [b"BZMPOP", t, *_znumkeys(g), g.rng.choice([b"MIN", b"MAX"]),
                 *g.rng.choice([[], [b"COUNT", b"2"], [b"COUNT", b"3"]])],
    ])()  # fmt: skip


def _zpush(g: Gen, i: int, view: View) -> list[bytes]:
    k = g.rng.choice(ZKEYS)
    return g.rng.choice([
        lambda: [b"ZADD", k, *g.members()],
        lambda: [b"ZADD", k, *g.members()],
        lambda: [b"ZINCRBY", k, b"1", b"m"],
        lambda: [b"ZPOPMIN", k],
        lambda: [b"ZMPOP", *_znumkeys(g), b"MAX"],
        lambda: [b"ZRANGE", k, b"0", b"-1", b"WITHSCORES"],
    ])()  # fmt: skip


def _xread(g: Gen, i: int, view: View) -> list[bytes]:
    """XREAD BLOCK on one or two keys from `$` or an ID (perhaps one the stream is past: then
    it answers at once), COUNT now and then."""
    keys = g.xkeys()
    ids = [g.rng.choice([b"$", b"$", b"0", b"%d" % g.serial]) for _ in keys]
    t = g.rng.choices([b"0", b"30000", XTIMED], weights=[6, 2, 2])[0]
    count = g.rng.choice([[], [], [b"COUNT", b"1"]])
    return [b"XREAD", *count, b"BLOCK", t, b"STREAMS", *keys, *ids]


def _xadd(g: Gen, i: int, view: View) -> list[bytes]:
    k = g.rng.choice(XKEYS)
    return g.rng.choice([
        lambda: [b"XADD", k, g.xid(), b"f", b"v"],
        lambda: [b"XADD", k, g.xid(), b"f", b"v"],
        lambda: [b"XADD", k, b"MAXLEN", b"2", g.xid(), b"f", b"v"],
        lambda: [b"XDEL", k, b"%d-1" % g.serial],
        lambda: [b"XSETID", k, b"%d-1" % (g.serial + g.rng.choice([0, 5]))],
        lambda: [b"XTRIM", k, g.rng.choice([b"MAXLEN", b"MINID"]), b"~",
                 b"%d" % g.rng.randint(0, 3), b"LIMIT", b"%d" % g.rng.randint(0, 2)],
        lambda: [b"XADD", k, b"MINID", b"=", b"%d" % (g.serial // 2), g.xid(), b"f", b"v"],
        lambda: [b"XREAD", b"STREAMS", k, b"0"],
    ])()  # fmt: skip


def _xreadgroup(g: Gen, i: int, view: View) -> list[bytes]:
    """XREADGROUP of a group (perhaps not there: -NOGROUP) on one or two keys: `>` with BLOCK
    (for ever, 30 s or XTIMED) or without, now and then 0 (the consumer's pending history,
    answered at once); COUNT and NOACK now and then."""
    keys = g.xkeys()
    ids = [b">" if g.rng.random() < 0.85 else b"0" for _ in keys]
    block = g.rng.choices([[], [b"BLOCK", b"0"], [b"BLOCK", b"30000"], [b"BLOCK", XTIMED]],
                          weights=[3, 5, 2, 2])[0]  # fmt: skip
    count = g.rng.choice([[], [], [b"COUNT", b"1"], [b"COUNT", b"2"]])
    head = [b"XREADGROUP", b"GROUP", g.rng.choice(GROUPS), g.rng.choice(CONSUMERS), *count]
    if XTIMED in block or g.rng.random() < 0.55:
        noack = [b"NOACK"] if g.rng.random() < 0.15 else []
        return [*head, *block, *noack, b"STREAMS", *keys, *ids]
    return _group_wakeup(g, i, view, head, keys[0])


def _group_wakeup(g: Gen, i: int, view: View, head: list[bytes], key: bytes) -> list[bytes]:
    """Most groups are gone (FLUSHDB, DESTROY) or never made, so now and then: the group is
    made, read with `>` and BLOCK (not TIMED: the SLEEP past it follows only a step drawn by
    `step`), then another client adds to the stream (a wake-up, mostly; the reader then
    XACKs it, now and then) or destroys the group."""
    block = [b"BLOCK", g.rng.choice([b"0", b"30000"])]
    g.queued.append(Step(i, [*head, *block, b"STREAMS", key, b">"]))
    pushers = [
        j for j in range(CONNS) if j != i and not (view.owed[j] or view.subs[j] or view.multi[j])
    ]
    draw = g.rng.random()
    if pushers and draw < 0.7:
        xid = g.xid()
        g.queued.append(Step(g.rng.choice(pushers), [b"XADD", key, xid, b"f", b"v"]))
        if draw < 0.35:  # the reader acknowledges it (pipelined, if it still waits)
            g.queued.append(Step(i, [b"XACK", key, head[2], xid]))
    elif pushers and draw < 0.85:  # or the group goes: its waiters answer -NOGROUP
        g.queued.append(Step(g.rng.choice(pushers), [b"XGROUP", b"DESTROY", key, head[2]]))
    return [b"XGROUP", b"CREATE", key, head[2], g.rng.choice([b"$", b"$", b"0"]), b"MKSTREAM"]


def _xgroup(g: Gen, i: int, view: View) -> list[bytes]:
    """What else groups do: CREATE (`$` or 0, MKSTREAM now and then: else a missing key is an
    error), DESTROY, XACK of IDs given, XPENDING's summary, XCLAIM and XAUTOCLAIM (0 idle)."""
    k, grp, c = g.rng.choice(XKEYS), g.rng.choice(GROUPS), g.rng.choice(CONSUMERS)
    return g.rng.choice([
        lambda: [b"XGROUP", b"CREATE", k, grp, g.rng.choice([b"$", b"0"]),
                 *g.rng.choice([[], [b"MKSTREAM"], [b"MKSTREAM"]])],
        lambda: [b"XGROUP", b"CREATE", k, grp, b"$", b"MKSTREAM"],
        lambda: [b"XGROUP", b"DESTROY", k, grp],
        lambda: [b"XACK", k, grp, *g.seen_xids()],
        lambda: [b"XACK", k, grp, *g.seen_xids()],
        lambda: [b"XPENDING", k, grp],
        lambda: [b"XPENDING", k, grp, b"IDLE", b"99999999", b"-", b"+", b"10"],
        lambda: [b"XCLAIM", k, grp, c, b"0", *g.seen_xids()],
        lambda: [b"XAUTOCLAIM", k, grp, c, b"0", b"0", b"COUNT", b"2"],
    ])()  # fmt: skip


def _znumkeys(g: Gen) -> list[bytes]:
    keys = g.zkeys()
    return [b"%d" % len(keys), *keys]


def _numkeys(g: Gen) -> list[bytes]:
    keys = g.lists(2)
    return [b"%d" % len(keys), *keys]


def _read(g: Gen, i: int, view: View) -> list[bytes]:
    k = g.lst()
    return g.rng.choice([
        [b"LRANGE", k, b"0", b"-1"], [b"LLEN", k], [b"TYPE", k], [b"EXISTS", k], [b"GET", k],
    ])  # fmt: skip


def _write(g: Gen, i: int, view: View) -> list[bytes]:
    k = g.lst()
    return g.rng.choice([
        lambda: [g.rng.choice([b"LPOP", b"RPOP"]), k],
        lambda: [b"LMOVE", k, g.lst(), g.side(), g.side()],
        lambda: [b"DEL", *g.lists(2)],
        lambda: [b"SET", g.rng.choice([k, b"s0"]), b"v"],
        lambda: [b"INCR", b"s0"],
        lambda: [b"ZADD", g.rng.choice([k, b"z0"]), b"1", b"m"],
        lambda: [b"LTRIM", k, b"0", b"0"],
        lambda: [b"LSET", k, b"0", b"x"],
        lambda: [b"RENAME", k, g.lst()],
        lambda: [b"COPY", *g.rng.choice([[k, g.lst()], [g.rng.choice(ZKEYS), g.rng.choice(ZKEYS)],
                                  [g.rng.choice(XKEYS), g.rng.choice(XKEYS)]]),
                 *g.rng.choice([[], [b"REPLACE"]])],  # waiters on the copy's key answer
        lambda: [b"SELECT", g.rng.choice([b"0", b"0", b"1"])],
        lambda: [b"EVAL", SCRIPT_PUSH_POP, b"2", k, g.lst(), *g.items()],
        lambda: [b"FLUSHDB"] if g.rng.random() < 0.3 else [b"DBSIZE"],
    ])()  # fmt: skip


# a script that pushes and then pops: the pop takes the element before any waiter (waiters
# are served after the script, as after a command)
SCRIPT_PUSH_POP = (
    b"redis.call('rpush', KEYS[1], ARGV[1]); "
    b"return {redis.call('lpop', KEYS[2]), redis.call('llen', KEYS[1])}"
)


def _transaction(g: Gen, i: int, view: View) -> list[bytes]:
    if view.multi[i]:
        return g.rng.choice([[b"EXEC"], [b"EXEC"], [b"EXEC"], [b"DISCARD"]])
    return g.rng.choice([
        [b"WATCH", *g.lists(2)], [b"WATCH", *g.lists(2)], [b"MULTI"], [b"MULTI"], [b"UNWATCH"],
        [b"WATCH", b"s0"],
    ])  # fmt: skip


def _pubsub(g: Gen, i: int, view: View) -> list[bytes]:
    g.serial += 1
    if view.multi[i]:  # see _in_multi
        return _in_multi(g, view.subs[i])
    return g.rng.choice([
        lambda: [b"PUBLISH", g.rng.choice(CHANNELS), b"m%d" % g.serial],
        lambda: [b"PUBLISH", g.rng.choice(CHANNELS), b"m%d" % g.serial],
        lambda: [b"PUBLISH", g.rng.choice(CHANNELS), b"m%d" % g.serial],
        lambda: [b"SUBSCRIBE", *g.rng.sample(CHANNELS, g.rng.randint(1, 2))],
        lambda: [b"SUBSCRIBE", *g.rng.sample(CHANNELS, g.rng.randint(1, 2))],
        lambda: [b"PSUBSCRIBE", g.rng.choice(PATTERNS)],
        lambda: [b"PSUBSCRIBE", g.rng.choice(PATTERNS)],
        lambda: [b"UNSUBSCRIBE", *g.rng.sample(CHANNELS, g.rng.randint(0, 1))],
        lambda: [b"PUNSUBSCRIBE"],
        lambda: [b"PUBSUB", b"NUMSUB", *g.rng.sample(CHANNELS, 2)],
        lambda: [b"PUBSUB", b"NUMPAT"],
    ])()  # fmt: skip


def _in_multi(g: Gen, subscribed: int) -> list[bytes]:
    """Inside MULTI no SUBSCRIBE or PSUBSCRIBE, and no PUBLISH by a subscribed client: Redis
    7.0 writes a message to the client running EXEC in the middle of EXEC's array (one
    element too many: the array's last element reads as the next reply), where ours sends it
    before EXEC's reply (docs/redis.md)."""
    if subscribed:
        return [b"PUBSUB", b"NUMPAT"]
    return [b"PUBLISH", g.rng.choice(CHANNELS), b"m%d" % g.serial]


def _client(g: Gen, i: int, view: View) -> list[bytes]:
    return g.rng.choice([
        lambda: [b"CLIENT", b"UNBLOCK", g.other(i)],
        lambda: [b"CLIENT", b"UNBLOCK", g.other(i), g.rng.choice([b"TIMEOUT", b"ERROR"])],
        lambda: [b"CLIENT", b"UNBLOCK", g.other(i), b"ERROR"],
        lambda: [b"CLIENT", b"KILL", b"ID", g.other(i)],
    ])()  # fmt: skip


# what a client pipelines behind its blocked command (run once it is answered)
PIPELINED: list[Callable[[Gen], list[bytes]]] = [
    lambda g: [b"PING"],
    lambda g: [b"LLEN", g.lst()],
    lambda g: [b"RPUSH", g.lst(), *g.items()],
    lambda g: [b"BLPOP", *g.lists(), b"0"],
    lambda g: [b"BZPOPMIN", *g.zkeys(), b"0"],
    lambda g: [b"XREAD", b"BLOCK", b"0", b"STREAMS", b"x0", b"$"],
]

ACTIONS: list[tuple[int, Callable[[Gen, int, View], list[bytes]]]] = [
    (14, _push), (28, _block), (8, _read), (8, _write), (12, _transaction), (16, _pubsub),
    (4, _client), (8, _zpush), (8, _xread), (8, _xadd), (8, _xreadgroup), (6, _xgroup),
]  # fmt: skip
