"""The command fuzz's runner: one seed's sequence (command_fuzz.py) sent to redis-server and
to ours, one connection each, raw RESP2 or (HELLO 3 first) RESP3, every reply compared; the
first that differs is the seed's mismatch (the two states part there).

What is masked, and why:
- TTL, PTTL, EXPIRETIME, PEXPIRETIME: the two servers read the clock at different instants
  (or set a relative expiry at different ones): compared within DRIFT.
- HGETALL, HKEYS, HVALS, SMEMBERS, SINTER/SUNION/SDIFF, KEYS, SPOP with a count: Redis's
  order depends on its encoding (a hash table past listpack sizes): compared sorted, in
  EXEC's replies too.
- RESP3's maps and sets, at any depth (HGETALL, SMEMBERS, SPOP's count, inside EXEC's
  reply): compared with their pairs or members sorted (`canonical`); arrays keep their order,
  doubles are compared byte for byte (Redis 7.0's %.17g, inf, -inf).
- HELLO: its map (or RESP2 array) less `version` and `id`, the server's own.
- a reply that does not come within 3 s on either side is a mismatch: from there on the
  connection would read each reply one command late.

Run many seeds by hand: `python -m tests.resp.fuzz_compare FIRST COUNT [LENGTH [PROTOCOL]]`."""

from __future__ import annotations

import random
import sys
import time
from collections import Counter
from dataclasses import dataclass

from conformance.resp.wire import NO_REPLY, Conn, encode

from .command_fuzz import EXPIRY_POOL, Gen

# in units of each reply: the two reads' distance at most
DRIFT = {b"TTL": 2, b"PTTL": 2000, b"EXPIRETIME": 2, b"PEXPIRETIME": 2000}
# compared with their elements sorted, in groups of this many (HGETALL: field and value)
SORTED_FLAT = {
    b"SMEMBERS": 1, b"KEYS": 1, b"HGETALL": 2, b"SINTER": 1, b"SUNION": 1, b"SDIFF": 1,
    b"HKEYS": 1, b"HVALS": 1, b"SPOP": 1,
}  # fmt: skip


def split(raw: bytes, pos: int = 0) -> tuple[list[bytes], int]:
    """A reply's top-level elements (raw) if it is an aggregate (array, RESP3's map, set or
    push: a map's keys and values in turn); [raw] otherwise."""
    end = raw.index(b"\r\n", pos)
    kind, head = raw[pos : pos + 1], raw[pos + 1 : end]
    if kind not in AGGREGATES or int(head) < 0:
        return [raw[pos:]], len(raw)
    out, nxt = [], end + 2
    for _ in range(int(head) * AGGREGATES[kind]):
        one = _end(raw, nxt)
        out.append(raw[nxt:one])
        nxt = one
    return out, nxt


# RESP3's aggregates: how many elements each counted one stands for (a map's: key and value)
AGGREGATES = {b"*": 1, b"~": 1, b">": 1, b"%": 2, b"|": 2}
BLOBS = (b"$", b"=", b"!")  # bulk, verbatim text, bulk error: a length, then the bytes


def _end(raw: bytes, pos: int) -> int:
    end = raw.index(b"\r\n", pos)
    kind, head = raw[pos : pos + 1], raw[pos + 1 : end]
    if kind in BLOBS:
        return end + 2 + (int(head) + 2 if int(head) >= 0 else 0)
    if kind in AGGREGATES:
        nxt = end + 2
        for _ in range(max(int(head), 0) * AGGREGATES[kind]):
            nxt = _end(raw, nxt)
        return _end(raw, nxt) if kind == b"|" else nxt  # an attribute precedes its reply
    return end + 2


def canonical(raw: bytes) -> bytes:
    """The reply with every map's pairs and every set's members (RESP3) in sorted order, at
    any depth: Redis's order of both is its hash table's. Arrays keep their order."""
    kind = raw[:1]
    if kind not in AGGREGATES or kind == b"|" or raw.startswith((b"*-1", b"*0\r\n")):
        return raw
    head, items = raw[: raw.index(b"\r\n") + 2], [canonical(x) for x in split(raw)[0]]
    group = AGGREGATES[kind]
    pairs = [b"".join(items[i : i + group]) for i in range(0, len(items), group)]
    return head + b"".join(sorted(pairs) if kind in (b"%", b"~") else pairs)


def same(argv: list[bytes], want: bytes, got: bytes) -> bool:
    """Whether ours's reply `got` to `argv` matches redis-server's `want`, with the masks."""
    if want == got:
        return True
    name = argv[0].upper()
    drift = DRIFT.get(name)
    if drift and want[:1] == got[:1] == b":" and min(int(want[1:-2]), int(got[1:-2])) >= 0:
        return abs(int(want[1:-2]) - int(got[1:-2])) <= drift
    group = SORTED_FLAT.get(name)
    if group and want[:1] == got[:1] == b"*":
        return _sorted(want, group) == _sorted(got, group)
    if name == b"HELLO" and want[:1] == got[:1] and want[:1] in b"*%":
        return _hello(want) == _hello(got)
    return canonical(want) == canonical(got)


def _hello(raw: bytes) -> list[bytes]:
    """HELLO's fields less the two that are the server's own: its version and the client id."""
    items = split(raw)[0]
    return [x for k, v in zip(items[::2], items[1::2], strict=True) for x in (k, v)
            if k not in (b"$7\r\nversion\r\n", b"$2\r\nid\r\n")]  # fmt: skip


def _sorted(raw: bytes, group: int) -> list[list[bytes]]:
    items = split(raw)[0]
    return sorted(items[i : i + group] for i in range(0, len(items), group))


def same_exec(queued: list[list[bytes]], want: bytes, got: bytes) -> bool:
    if want[:1] != b"*" or got[:1] != b"*" or want.startswith(b"*-1"):
        return want == got
    w, g = split(want)[0], split(got)[0]
    return len(w) == len(g) and all(same(a, x, y) for a, x, y in zip(queued, w, g, strict=True))


@dataclass
class Mismatch:
    seed: int
    step: int
    argv: list[bytes]
    redis: bytes
    ours: bytes

    def __str__(self) -> str:
        cmd = b" ".join(a if a else b'""' for a in self.argv).decode(errors="replace")
        replies = f"\n  redis: {self.redis!r}\n  ours:  {self.ours!r}"
        return f"seed {self.seed} step {self.step}: {cmd}{replies}"


def run_seed(
    seed: int,
    redis_port: int,
    ours_port: int,
    length: int = 200,
    seen: Counter[bytes] | None = None,
    protocol: int = 2,
) -> Mismatch | None:
    """Send seed's sequence to both; the first reply that differs (the states part there).
    `seen` counts redis-server's replies by kind (its first word for an error), and by
    command and kind (b"XADD $"). With
    protocol 3 both connections open with HELLO 3 and the sequence has the connection's
    own commands too (HELLO, CLIENT SETNAME/GETNAME, SUBSCRIBE/UNSUBSCRIBE)."""
    seen = Counter() if seen is None else seen
    g = Gen(random.Random(seed), int(time.time()), resp3=protocol == 3)
    g.expiries = g.rng.sample(EXPIRY_POOL, length + 10)
    conns = [Conn(redis_port), Conn(ours_port)]
    try:
        for c in conns:
            c.send(encode([b"FLUSHALL"]))
            assert c.reply() == b"+OK\r\n"
            c.send(encode([b"HELLO", b"%d" % protocol]))
            assert c.reply().startswith(b"%7\r\n" if protocol == 3 else b"*14\r\n")
        queued: list[list[bytes]] | None = None
        for step in range(length):
            argv = g.command()
            name = argv[0].upper()
            if name == b"SPOP" and (queued is not None or not _small_set(conns, argv)):
                continue
            want, got = (_ask(c, argv) for c in conns)
            kind = _kind(name, want)
            seen[kind] += 1
            seen[name + b" " + kind] += 1
            if name == b"EXEC" and queued is not None:
                ok = same_exec(queued, want, got)
            else:
                ok = same(argv, want, got)
            if not ok or NO_REPLY in (want, got):  # one reply behind from there on
                return _mismatch(seed, step, argv, want, got, queued if name == b"EXEC" else None)
            if name == b"MULTI" and queued is None and want == b"+OK\r\n":
                queued = []
            elif name in (b"EXEC", b"DISCARD"):
                queued = None
            elif queued is not None and want == b"+QUEUED\r\n":
                queued.append(argv)
        return None
    finally:
        for c in conns:
            c.close()


def _kind(name: bytes, reply: bytes) -> bytes:
    if reply[:1] == b"-":
        return reply.split(b" ", 1)[0]
    return b"EXEC" + reply[:1] if name == b"EXEC" else reply[:1]


def _mismatch(
    seed: int,
    step: int,
    argv: list[bytes],
    want: bytes,
    got: bytes,
    queued: list[list[bytes]] | None,
) -> Mismatch:
    """For EXEC, the first queued command whose reply differs, with its replies."""
    if queued and want[:1] == got[:1] == b"*":
        for n, (a, x, y) in enumerate(zip(queued, split(want)[0], split(got)[0], strict=False)):
            if not same(a, x, y):
                return Mismatch(seed, step, [b"EXEC:%d" % n, *a], x, y)
    return Mismatch(seed, step, argv, want, got)


def _ask(conn: Conn, argv: list[bytes]) -> bytes:
    conn.send(encode(argv))
    return conn.reply(3.0)


def _small_set(conns: list[Conn], argv: list[bytes]) -> bool:
    """SCARD of the key on both (compared as any reply): whether SPOP's answer is fixed."""
    scard = [b"SCARD", argv[1]] if len(argv) > 1 else [b"SCARD", b"k0"]
    want, got = (_ask(c, scard) for c in conns)
    return (want == got and want in (b":0\r\n", b":1\r\n")) or want.startswith(b"-")


def main(argv: list[str]) -> int:
    from conformance.resp import servers

    first, count = int(argv[0]), int(argv[1])
    length = int(argv[2]) if len(argv) > 2 else 200
    protocol = int(argv[3]) if len(argv) > 3 else 2
    pair = servers.Pair()
    pair.start()
    found = 0
    try:
        redis, ours = pair.by_kind["plain"]
        for seed in range(first, first + count):
            miss = run_seed(seed, redis.port, ours.port, length, protocol=protocol)
            if miss:
                found += 1
                print(miss, flush=True)
    finally:
        print(pair.stop())
    print(f"{found} of {count} seeds from {first} differ")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
