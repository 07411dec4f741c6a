"""Seeded sequences of valid-framed V2 commands for the differential wire fuzz
(test_wire_fuzz.py): what each step sends, drawn from one _Rng(seed).

A sequence is a list of `Step`s on connections `a` and `b`. A step's bytes are made when it is
sent, because FIN/REQ/TOUCH may name a message the connection holds (`HELD`): each daemon's own
id for the k-th message that connection received. Everything else is fixed bytes, the same for
both daemons. The values keep clear of the daemons' timers (see FLAGS): valid defers and REQ
delays are 0 or several seconds, heartbeat intervals and msg timeouts long, output buffer
timeouts short, sample rates 0 or 99 (nsqd drops a message when rand(100) > rate: never at 99);
no IDENTIFY asks for TLS, snappy or deflate (an upgrade needs the negotiation)."""

from __future__ import annotations

import json
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass

_I32 = struct.Struct(">i")
# both daemons run with these: small limits to cross, timers far from a run's ~1 s
FLAGS = (
    "--max-msg-size=100",
    "--max-body-size=1000",
    "--max-rdy-count=50",
    "--msg-timeout=60s",
    "--max-req-timeout=10s",
    "--output-buffer-timeout=10ms",
    "--min-output-buffer-timeout=10ms",
    "--max-output-buffer-timeout=30ms",
)
HELD = "held"  # a FIN/REQ/TOUCH argument: the id of a message this connection received
NOT_HELD = b"0123456789abcdef"


@dataclass(frozen=True)
class Step:
    conn: str
    line: bytes  # the command line, without "\n"
    body: bytes | None = None  # framed with its int32 size after the line
    raw_body: bytes | None = None  # sent as is after the line (a wrong size field)
    held: int | None = None  # replace HELD in `line` with the id of this message (index)
    held_by: str = ""  # ... that this connection received (default: the step's own)
    answers: int = 0  # frames a conforming daemon answers when the command succeeds

    def payload(self, held_ids: list[bytes]) -> bytes:
        line = self.line
        if self.held is not None:
            ref = held_ids[self.held % len(held_ids)] if held_ids else NOT_HELD
            line = line.replace(HELD.encode(), ref)
        data = line + b"\n"
        if self.body is not None:
            data += _I32.pack(len(self.body)) + self.body
        if self.raw_body is not None:
            data += self.raw_body
        return data

    def render(self) -> str:
        shown = self.line.decode("latin-1")
        if self.held is not None:
            shown = shown.replace(HELD, f"<held {self.held} by {self.held_by or self.conn}>")
        if self.body is not None:
            shown += f" +body({len(self.body)}) {self.body[:60]!r}"
        if self.raw_body is not None:
            shown += f" +raw {self.raw_body[:60]!r}"
        return f"{self.conn}: {shown}"


# -- values ---------------------------------------------------------------------------------

_IDENTIFY_FIELDS: dict[str, tuple[object, ...]] = {
    "client_id": ("fz", "", 5, None, ["x"]),
    "hostname": ("h", "", 1.5, True),
    "user_agent": ("fuzz/1.0", "", {}, 7),
    "heartbeat_interval": (-1, 0, 10000, 60000, 60001, 999, -2, "10000", 1.5, None, True),
    "output_buffer_size": (-1, 0, 64, 63, 1024, 65536, 65537, "x", 1e3),
    # not -1 (timed flushes off): nsqd then holds a delivery until its next flush (a response,
    # an error, RDY reached or lowered), ours sends it at once; docs/compatibility.md
    "output_buffer_timeout": (0, 10, 30, 31, 9, "x", -2),
    "sample_rate": (0, 99, 100, -1, "x", 2**31),
    "msg_timeout": (0, 30000, 900000, 900001, 999, -5, "x", 2**40),
    "feature_negotiation": (True, False, "true", 1, None),
    "tls_v1": (False, "no", 0),
    "snappy": (False, None, "x"),
    "deflate": (False, 1),
    "deflate_level": (0, 1, 9, 10, -1, "x"),
    "long_id": ("long", 3),
    "short_id": ("short",),
    "unknown_key": (1, "v", [1, 2], {"a": 1}),
}
_IDENTIFY_RAW = (b"{", b"[]", b"null", b"1", b'"x"', b"{}", b'{"a":}', b"{} x", b" {} ", b"\xff")
_IDENTIFY_SIZES = (0, -1, 1001)  # framed sizes that are not a body's: invalid, too big


def _identify(rng: _Rng, conn: str) -> Step:
    rng.bad = True  # fatal once subscribed, and many of these fields are wrong
    roll = rng.random()
    if roll < 0.1:
        return Step(conn, b"IDENTIFY", body=rng.choice(_IDENTIFY_RAW), answers=1)
    if roll < 0.15:
        return Step(conn, b"IDENTIFY", raw_body=_I32.pack(rng.choice(_IDENTIFY_SIZES)), answers=1)
    keys = rng.sample(sorted(_IDENTIFY_FIELDS), rng.randint(0, 4))
    fields = {k: rng.choice(_IDENTIFY_FIELDS[k]) for k in keys}
    if rng.random() < 0.6:
        fields["feature_negotiation"] = True
    return Step(conn, b"IDENTIFY", body=json.dumps(fields).encode(), answers=1)


class _Rng(random.Random):
    """The sequence's random source; `bad` says the step drew a value nsqd may reject (and
    close the connection for), so the generator stops assuming the connection is subscribed."""

    bad = False

    def flag(self, p: float) -> bool:
        hit = self.random() < p
        self.bad |= hit
        return hit


def _pick(rng: _Rng, good: tuple[bytes, ...], bad: tuple[bytes, ...]) -> bytes:
    """Mostly a good value: a bad one (often fatal) one time in sixteen."""
    return rng.choice(bad if rng.flag(0.06) else good)


def _topic(rng: _Rng, topics: tuple[bytes, ...]) -> bytes:
    # invalid names, and valid edge ones named after the seed: the daemons serve many seeds,
    # and a shared valid name (".", "t#ephemeral") would deliver one seed's messages to another
    edge = (topics[0].ljust(64, b"."), topics[0].ljust(65, b"_"), topics[0] + b"#ephemeral#x")
    spaced = topics[0] + b" !"  # an extra argument (never a valid topic and channel: shared)
    return _pick(rng, topics, (b"", b"bad*name", b"#ephemeral", spaced, *edge))


def _channel(rng: _Rng, conn: str) -> bytes:
    # one channel set per connection: two consumers of one channel would race for its messages
    good = (f"c{conn}".encode(), f"c{conn}#ephemeral".encode(), f"d{conn}".encode())
    edge = (conn.encode().ljust(64, b"z"), b"y" * 65, b"e#ephemeral#x")  # 64: valid, its own
    return _pick(rng, good, (b"", b"c!", b"#ephemeral", *edge))


def _body(rng: _Rng, n: int) -> bytes:
    if n < 0:
        small = b"%d" % rng.randint(2, 20)
        n = int(_pick(rng, (b"1", small, b"99", b"100"), (b"0", b"101", b"1001")))
    return (b"m%d-" % rng.randrange(1000) * (n // 4 + 1))[:n]


def _sub(rng: _Rng, conn: str, topics: tuple[bytes, ...]) -> Step:
    line = b"SUB " + _topic(rng, topics) + b" " + _channel(rng, conn)
    if rng.flag(0.08):
        line = rng.choice((b"SUB", b"SUB " + topics[0], line + b" extra"))
    return Step(conn, line, answers=1)


def _pub(rng: _Rng, conn: str, topics: tuple[bytes, ...]) -> Step:
    if rng.flag(0.05):
        return Step(conn, rng.choice((b"PUB", b"PUB " + topics[0] + b" x")), body=b"x", answers=1)
    return Step(conn, b"PUB " + _topic(rng, topics), body=_body(rng, -1), answers=1)


def _mpub(rng: _Rng, conn: str, topics: tuple[bytes, ...]) -> Step:
    bodies = [_body(rng, rng.choice((-1, 3, 5, 8))) for _ in range(rng.randint(1, 4))]
    count = len(bodies)
    roll = rng.random()
    rng.bad |= roll < 0.15
    if roll < 0.1:
        count = rng.choice((0, -1, count + 1, 250))  # wrong counts inside the framed body
    elif roll < 0.15:
        count = max(1, count - 1)  # the last message is left over after the count
    msgs = _I32.pack(count) + b"".join(_I32.pack(len(b)) + b for b in bodies)
    line = b"MPUB " + _topic(rng, topics)
    if rng.flag(0.05):
        return Step(conn, b"MPUB", body=msgs, answers=1)
    if rng.flag(0.05):
        return Step(conn, line, raw_body=_I32.pack(rng.choice((0, -4, 1001))), answers=1)
    return Step(conn, line, body=msgs, answers=1)


def _dpub(rng: _Rng, conn: str, topics: tuple[bytes, ...]) -> Step:
    defer = _pick(rng, (b"0", b"5000", b"9000", b"10000"), (b"10001", b"-1", b"x", b"1e3", b""))
    line = b"DPUB " + _topic(rng, topics) + (b" " + defer if defer else b"")
    return Step(conn, line, body=_body(rng, -1), answers=1)


def _rdy(rng: _Rng, conn: str, _: tuple[bytes, ...]) -> Step:
    count = _pick(rng, (b"0", b"1", b"2", b"3", b"5", b"50", b""), (b"51", b"-1", b"x", b"9" * 12))
    return Step(conn, b"RDY" + (b" " + count if count else b""))


def _ref(rng: _Rng) -> tuple[bytes, int | None]:
    roll = rng.random()
    if roll < 0.85:
        return HELD.encode(), rng.randrange(8)
    if roll < 0.95:
        return rng.choice((NOT_HELD, b"zzzzzzzzzzzzzzzz")), None
    rng.bad = True
    return rng.choice((b"short", b"0123456789abcdef0")), None


def _fin(rng: _Rng, conn: str, _: tuple[bytes, ...]) -> Step:
    ref, held = _ref(rng)
    verb = rng.choice((b"FIN", b"FIN", b"FIN", b"TOUCH"))
    line = verb if rng.flag(0.05) else verb + b" " + ref
    return Step(conn, line, held=held if line != verb else None, held_by=_owner(rng, conn))


def _req(rng: _Rng, conn: str, _: tuple[bytes, ...]) -> Step:
    ref, held = _ref(rng)
    delay = _pick(rng, (b"0", b"0", b"5000", b"-1", b"10001"), (b"x", b""))
    line = b"REQ " + ref + (b" " + delay if delay else b"")
    return Step(conn, line, held=held, held_by=_owner(rng, conn))


def _owner(rng: _Rng, conn: str) -> str:
    """Mostly a message the connection holds, sometimes one the other connection holds."""
    return {"a": "b", "b": "a"}[conn] if rng.random() < 0.15 else conn


def _other(rng: _Rng, conn: str, _: tuple[bytes, ...]) -> Step:
    choice = rng.randrange(6)
    rng.bad = choice in (1, 2, 3)  # CLS, AUTH (disabled), an unknown command
    if choice == 0:
        return Step(conn, b"NOP")
    if choice == 1:
        return Step(conn, b"CLS", answers=1)
    if choice == 2:
        return Step(conn, b"AUTH", body=rng.choice((b"secret", b"")), answers=1)
    if choice == 3:
        return Step(conn, rng.choice((b"FOO", b"pub x", b"", b"IDENTIFY x", b"NOP x")), answers=1)
    return Step(conn, rng.choice((b"NOP", b"RDY 1")))


_Maker = Callable[[_Rng, str, tuple[bytes, ...]], Step]
# (weight, maker) once a connection is subscribed / before: RDY, FIN, REQ and TOUCH before SUB
# are fatal, so they come rarely there, and a run goes on past its first mistakes
_SUBSCRIBED: tuple[tuple[int, _Maker], ...] = (
    (1, lambda r, c, t: _identify(r, c)),
    (1, _sub),
    (6, _pub),
    (3, _mpub),
    (2, _dpub),
    (4, _rdy),
    (6, _fin),
    (3, _req),
    (2, _other),
)
_FRESH: tuple[tuple[int, _Maker], ...] = (
    (8, lambda r, c, t: _identify(r, c)),
    (16, _sub),
    (6, _pub),
    (2, _mpub),
    (2, _dpub),
    (1, _rdy),
    (1, _fin),
    (2, _other),
)


_PUBLISHERS = (_pub, _mpub, _dpub)


def sequence(seed: int, length: int, own_topics: bool = False) -> list[Step]:
    """`length` steps for `seed`; topics are named after the seed, so runs do not share them.
    `own_topics`: each connection publishes into topics of its own (a: wf<seed>..., b:
    wf<seed>b...), both subscribe to either; a group of workers pinned one per connection then
    holds each topic's messages in one partition, whose order nsqd's must match."""
    rng = _Rng(seed)
    topics = (b"wf%d" % seed, b"wf%db" % seed, b"wf%d#ephemeral" % seed)
    published = dict.fromkeys("ab", topics)
    if own_topics:
        mine = {c: b"wf%d%s" % (seed, b"b" if c == "b" else b"") for c in "ab"}
        published = {c: (t, t + b"#ephemeral", t) for c, t in mine.items()}
        topics = (*topics, mine["b"] + b"#ephemeral")
    subscribed = {"a": False, "b": False}  # a guess: the daemon decides
    steps = []
    while len(steps) < length:
        conn = "a" if rng.random() < 0.6 else "b"
        table = _SUBSCRIBED if subscribed[conn] else _FRESH
        rng.bad = False
        make = rng.choices([m for _, m in table], [w for w, _ in table])[0]
        step = make(rng, conn, published[conn] if make in _PUBLISHERS else topics)
        if step.line.startswith(b"SUB "):
            subscribed[conn] = True
            if rng.random() < 0.8:  # a consumer: deliveries to FIN, REQ and TOUCH
                steps.append(step)
                step = Step(conn, b"RDY %d" % rng.choice((1, 2, 3, 10, 50)))
        if rng.bad:
            subscribed[conn] = False
        steps.append(step)
    return steps
