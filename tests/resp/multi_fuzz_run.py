"""The multi-client fuzz's runner: one seed's steps (multi_fuzz.py) sent to redis-server and
to ours, CONNS connections each (a fifth, the control, only syncs), one step at a time, and
after each step everything every connection received compared, frame by frame (raw RESP,
connection closes included).

Why it is deterministic: after a step's bytes are sent, the control connection sends PING
twice on each server. redis-server reads every ready socket in one pass of its event loop and
writes every reply of a pass before its next, so the second PONG means that what the step
made any connection receive (a reply, a blocked client's wake-up, a published message) is in
the sockets. On ours, the same counts are then awaited (up to PATIENCE: a wake-up that comes
late is not a difference), and a short QUIET wait catches what ours sends that redis-server
did not (anything later shows at the next step, still a difference). A blocking command's
reply is read only in the step that should wake it: a TIMED one's SLEEP step, another
client's push, CLIENT UNBLOCK.

Counts (`seen`, from redis-server's frames, so that a test can check the sequences reached
what they are for): wakeup (a blocked client answered by another's step), wakeup-queued
(with two or more clients blocked), wakeup-several (two or more in one step), timeout,
unblocked, closed-blocked, killed, exec, exec-spoiled, expiry-exec-spoiled (EXEC after the
expiry scenario), watch-exec and watch-exec-spoiled (after the WATCH scenario), message,
publish-several, wrongtype, wakeup-zset, wakeup-stream and wakeup-group (a sorted-set pop, an
XREAD or an XREADGROUP woken with entries), nogroup-woken (a blocked XREADGROUP answered
-NOGROUP: its group destroyed), group-read (an XREADGROUP answered entries, blocked or not),
xack (an XACK that acknowledged one or more).

Run many seeds by hand: `python -m tests.resp.multi_fuzz_run FIRST COUNT [LENGTH [PROTOCOL]]`."""

from __future__ import annotations

import itertools
import random
import select
import sys
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass

from conformance.resp.wire import CLOSED, Conn, encode

from .multi_fuzz import CONNS, SUBSCRIBING, XBLOCKING, ZBLOCKING, Gen, Step, View

PATIENCE = 2.0  # s: how long ours may take to send what redis-server sent
QUIET = 0.002  # s: the wait for frames ours sends and redis-server did not
PUSH_KINDS = (b"message", b"pmessage", b"subscribe", b"unsubscribe", b"psubscribe",
              b"punsubscribe")  # fmt: skip


class Side:
    """One server's connections: CONNS clients, their CLIENT IDs, and the control."""

    def __init__(self, port: int, protocol: int) -> None:
        self.port, self.protocol = port, protocol
        self.control = self._open()
        self.control.send(encode([b"FLUSHALL"]))
        assert self.control.reply() == b"+OK\r\n"
        self.conns: list[Conn] = []
        self.ids: list[bytes] = []
        for _ in range(CONNS):
            self.conns.append(self._open())
            self.ids.append(b"")
        for i in range(CONNS):
            self.ids[i] = self._id(self.conns[i])

    def _open(self) -> Conn:
        conn = Conn(self.port)
        if self.protocol == 3:
            conn.send(encode([b"HELLO", b"3"]))
            assert conn.reply().startswith(b"%7\r\n")
        return conn

    def _id(self, conn: Conn) -> bytes:
        conn.send(encode([b"CLIENT", b"ID"]))
        return conn.reply()[1:-2]

    def reopen(self, i: int) -> None:
        self.conns[i].close()
        self.conns[i] = self._open()
        self.ids[i] = self._id(self.conns[i])

    def send(self, step: Step) -> None:
        if step.op == "close":
            self.conns[step.conn].close()
        elif step.op == "cmd":
            argv = [self.ids[int(a[4:-1])] if a.startswith(b"{id:") else a for a in step.argv]
            self.conns[step.conn].send(encode(argv))

    def barrier(self) -> None:
        for _ in range(2):
            self.control.send(encode([b"PING"]))
            assert self.control.reply(PATIENCE) == b"+PONG\r\n"

    def collect(self, want: list[int] | None, closed: int) -> list[list[bytes]]:
        """Each connection's frames: at least want[i] of them if ours (waited up to
        PATIENCE), then whatever else comes within QUIET. `closed`: a connection this step
        closed itself (nothing to read)."""
        got: list[list[bytes]] = [[] for _ in range(CONNS)]
        deadline = time.monotonic() + PATIENCE
        while True:
            for i, conn in enumerate(self.conns):
                while i != closed and (frame := _frame(conn)):
                    got[i].append(frame)
            short = want is not None and any(len(g) < w for g, w in zip(got, want, strict=True))
            left = deadline - time.monotonic() if short else QUIET
            live = [c.sock for i, c in enumerate(self.conns) if i != closed and not c.eof]
            if left <= 0 or not live:
                return got
            ready, _, _ = select.select(live, [], [], left)
            if not ready and not short:
                return got
            for conn in self.conns:
                if conn.sock in ready:
                    conn._fill(time.monotonic() + 0.5)

    def close(self) -> None:
        for conn in [*self.conns, self.control]:
            conn.close()


def _frame(conn: Conn) -> bytes:
    """One whole frame already read (no waiting), CLOSED once at EOF, or b""."""
    if conn.buf:
        frame = conn.reply(0)
        return b"" if frame.startswith(b"<") else frame
    if conn.eof and not getattr(conn, "told", False):
        conn.told = True  # type: ignore[attr-defined]
        return CLOSED
    return b""


def is_push(frame: bytes) -> bool:
    """A pub/sub frame (RESP3's push; RESP2's message and (un)subscribe arrays), which
    answers no command of the client's."""
    if frame[:1] == b">":
        return True
    if frame[:2] not in (b"*3", b"*4"):
        return False
    return frame.split(b"\r\n", 3)[2] in PUSH_KINDS


@dataclass
class Mismatch:
    seed: int
    step: int
    what: str
    redis: list[list[bytes]]
    ours: list[list[bytes]]

    def __str__(self) -> str:
        rows = "".join(
            f"\n  conn {i}: redis {r!r}\n          ours  {o!r}"
            for i, (r, o) in enumerate(zip(self.redis, self.ours, strict=True))
            if r or o
        )
        return f"seed {self.seed} step {self.step}: {self.what}{rows}"


class Tracker:
    """The View from redis-server's frames (what each connection owes, MULTI, subscribed),
    and the counts of what happened."""

    def __init__(self, seen: Counter[str]) -> None:
        self.view = View()
        self.sent: list[deque[list[bytes]]] = [deque() for _ in range(CONNS)]
        self.seen = seen

    def sending(self, step: Step) -> None:
        i = step.conn
        if step.op == "close":
            self.seen["closed-blocked"] += bool(self.view.owed[i])
            self.forget(i)
        elif step.op == "cmd" and (step.argv[0] not in SUBSCRIBING or self.view.multi[i]):
            self.sent[i].append(step.argv)
            self.view.owed[i] += 1

    def forget(self, i: int) -> None:
        self.sent[i].clear()
        self.view.owed[i], self.view.multi[i], self.view.subs[i] = 0, False, 0

    def received(self, step: Step, frames: list[list[bytes]]) -> list[int]:
        """Update from one step's frames; the connections closed by the server."""
        blocked = [i for i in range(CONNS) if self.view.owed[i] and i != step.conn]
        woken, closed = 0, []
        for i, got in enumerate(frames):
            for frame in got:
                if frame == CLOSED:
                    self.seen["killed"] += 1
                    closed.append(i)
                elif is_push(frame):
                    self._push(i, frame)
                elif self.sent[i]:
                    woken += i in blocked
                    self._reply(step, i, self.sent[i].popleft(), frame, i in blocked)
        if woken and step.op == "cmd" and step.argv[:2] != [b"CLIENT", b"UNBLOCK"]:
            self.seen["wakeup"] += woken
            self.seen["wakeup-queued"] += woken * (len(blocked) >= 2)
            self.seen["wakeup-several"] += woken >= 2
        for i in closed:
            self.forget(i)
        return closed

    def _push(self, i: int, frame: bytes) -> None:
        kind = frame.split(b"\r\n", 3)[2]
        if kind in (b"message", b"pmessage"):
            self.seen["message"] += 1
        else:  # (un)subscribe: its count is the last element
            self.view.subs[i] = int(frame.rsplit(b":", 1)[1][:-2])

    def _reply(self, step: Step, i: int, argv: list[bytes], frame: bytes, blocked: bool) -> None:
        self.view.owed[i] -= 1
        name, null = argv[0].upper(), frame in (b"*-1\r\n", b"_\r\n", b"$-1\r\n")
        if blocked and step.op == "sleep" and null:
            self.seen["timeout"] += 1
        if blocked and step.argv[:2] == [b"CLIENT", b"UNBLOCK"]:
            self.seen["unblocked"] += 1
        if blocked and name in ZBLOCKING and not null and frame[:1] != b"-":
            self.seen["wakeup-zset"] += 1
        if blocked and name in XBLOCKING and not null and frame[:1] != b"-":
            self.seen["wakeup-group" if name == b"XREADGROUP" else "wakeup-stream"] += 1
        if blocked and name == b"XREADGROUP" and frame.startswith(b"-NOGROUP"):
            self.seen["nogroup-woken"] += 1
        if name == b"XREADGROUP" and frame[:1] in b"*%" and not null:
            self.seen["group-read"] += 1
        if name == b"XACK" and frame[:1] == b":" and frame != b":0\r\n":
            self.seen["xack"] += 1
        if frame.startswith(b"-WRONGTYPE"):
            self.seen["wrongtype"] += 1
        if name == b"MULTI" and frame == b"+OK\r\n":
            self.view.multi[i] = True
        elif name in (b"EXEC", b"DISCARD"):
            self.view.multi[i] = False
            if name == b"EXEC" and not frame.startswith(b"-"):
                key = "exec-spoiled" if null else "exec"
                self.seen[step.tag.replace("exec", "") + key] += 1
        elif name == b"PUBLISH" and frame[:1] == b":" and int(frame[1:-2]) >= 2:
            self.seen["publish-several"] += 1


def run_seed(
    seed: int,
    redis_port: int,
    ours_port: int,
    length: int = 120,
    seen: Counter[str] | None = None,
    protocol: int = 2,
) -> Mismatch | None:
    """Send seed's steps to both; the first step after which a connection's frames differ."""
    g = Gen(random.Random(seed), resp3=protocol == 3)
    left = iter(range(length))
    return run(lambda view: g.step(view) if next(left, None) is not None else None,
               redis_port, ours_port, seen, protocol, seed)  # fmt: skip


def fixed(steps: list[Step]) -> Callable[[View], Step | None]:
    """A source of steps that are given (a case the fuzz found)."""
    left = iter(steps)
    return lambda view: next(left, None)


def run(
    source: Callable[[View], Step | None],
    redis_port: int,
    ours_port: int,
    seen: Counter[str] | None = None,
    protocol: int = 2,
    seed: int = -1,
    log: list[list[list[bytes]]] | None = None,
) -> Mismatch | None:
    """Send the source's steps (it sees the Tracker's view before each) to both, one at a
    time, until it gives None, then a last short wait; the first step after which the frames
    differ. `log` gets redis-server's frames of each step."""
    track = Tracker(Counter() if seen is None else seen)
    sides = [Side(redis_port, protocol), Side(ours_port, protocol)]
    redis, ours = sides
    last = Step(-1, op="sleep", seconds=0.05)
    try:
        for n in itertools.count():
            step = source(track.view) or last
            track.sending(step)
            if step.op == "sleep":
                time.sleep(step.seconds)
            closed = step.conn if step.op == "close" else -1
            redis.send(step)
            redis.barrier()
            want = redis.collect(None, closed)
            ours.send(step)
            ours.barrier()
            got = ours.collect([len(w) for w in want], closed)
            if log is not None:
                log.append(want)
            if not all(same(step, i, w, o) for i, (w, o) in enumerate(zip(want, got, strict=True))):
                return Mismatch(seed, n, _describe(step), want, got)
            for i in {*track.received(step, want), closed} - {-1}:
                for side in sides:
                    side.reopen(i)
            if step is last:
                return None
        return None
    finally:
        for side in sides:
            side.close()


def same(step: Step, conn: int, want: list[bytes], got: list[bytes]) -> bool:
    """Whether one connection's frames of a step match, less two orders that are Redis's
    dicts' (a random hash seed orders them):
    - one message matching several of a client's patterns: a pmessage per pattern, in the
      order of the server's dict of patterns: compared in any order (`_patterns`);
    - UNSUBSCRIBE and PUNSUBSCRIBE without arguments: one frame per channel, in the order of
      the client's dict of channels: compared as channels in any order, with the counts (the
      last element) in order."""
    if want == got or _patterns(want) == _patterns(got):
        return True
    if (
        step.conn != conn
        or step.argv[1:]
        or step.argv[:1] not in ([b"UNSUBSCRIBE"], [b"PUNSUBSCRIBE"])
    ):
        return False  # fmt: skip
    counts = [[f.rsplit(b":", 1)[1] for f in frames] for frames in (want, got)]
    names = [sorted(f.rsplit(b":", 1)[0] for f in frames) for frames in (want, got)]
    return counts[0] == counts[1] and names[0] == names[1]


def _patterns(frames: list[bytes]) -> list[bytes]:
    """The frames with each run of pmessages of one message (the same channel and payload,
    after the pattern) sorted."""
    out: list[bytes] = []
    run: list[bytes] = []
    for frame in [*frames, b""]:
        if run and not (_pmessage(frame) and _tail(frame) == _tail(run[0])):
            out += sorted(run)
            run = []
        (run if _pmessage(frame) else out).append(frame)
    return out[:-1]


def _pmessage(frame: bytes) -> bool:
    return frame[:1] in b"*>" and frame[1:].startswith(b"4\r\n$8\r\npmessage\r\n")


def _tail(frame: bytes) -> bytes:
    """A pmessage's channel and payload (what follows its pattern)."""
    return frame.split(b"\r\n", 6)[6]


def _describe(step: Step) -> str:
    if step.op != "cmd":
        return f"{step.op} {step.conn if step.op == 'close' else step.seconds}"
    return f"conn {step.conn}: " + " ".join(a.decode(errors="replace") for a in step.argv)


def main(argv: list[str]) -> int:
    from conformance.resp import servers

    first, count = int(argv[0]), int(argv[1])
    length = int(argv[2]) if len(argv) > 2 else 120
    protocol = int(argv[3]) if len(argv) > 3 else 2
    pair = servers.Pair()
    pair.start()
    found, seen = 0, Counter[str]()
    try:
        redis, ours = pair.by_kind["plain"]
        for seed in range(first, first + count):
            miss = run_seed(seed, redis.port, ours.port, length, seen, protocol)
            if miss:
                found += 1
                print(miss, flush=True)
    finally:
        print(pair.stop())
    print(dict(seen))
    print(f"{found} of {count} seeds from {first} differ")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
