"""Run one wire-fuzz sequence (wire_fuzz_ops.py) against a daemon and render what came back, for
the differential comparison in test_wire_fuzz.py.

Steps go one at a time: after each, the runner waits for the frames a conforming daemon answers
(`Step.answers`: a response or an error), then until no frame arrives on any connection for
IDLE_S (deliveries, an E_FIN_FAILED, a close). A connection the daemon closed is opened again
(with the magic) by its next step. Every frame is kept with the index of the step it arrived
after; frames are parsed and masked by the conformance runner's conformance/wire.py (message ids
numbered in order of first sighting, also inside error texts; timestamps checked, not shown).

`python -m tests.e2e.wire_fuzz_run --seeds 0:200` runs many seeds on one pair of daemons
(the sequences' topics are named after their seed) and prints each mismatch."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass, field

import trio

from conformance import daemons
from conformance.wire import FRAME_MESSAGE, MESSAGE_HEADER, FrameReader, IdRegistry, render_frame

from .wire_fuzz_ops import FLAGS, Step, sequence

MAGIC = b"  V2"
IDLE_S = 0.05  # no frame for this long after a step: it is done (> the 30ms buffer timeout)
ANSWER_S = 1.0  # bound on waiting for a step's answer (an MPUB whose count runs past its body)
STEP_MAX_S = 2.0


@dataclass
class _Conn:
    name: str  # "a#1": connection a, first opening
    stream: trio.SocketStream
    reader: FrameReader = field(default_factory=FrameReader)
    held: list[bytes] = field(default_factory=list)  # ids of the messages it received
    closed: bool = False
    answers: int = 0  # non-message frames so far


@dataclass
class Run:
    """One daemon's side of a sequence: every event as (step index, connection, kind, frame)."""

    addr: tuple[str, int]
    # a connection's own address where it must land somewhere in particular (a group's worker:
    # tests/group/test_wire_fuzz.py); the others open to `addr`
    pins: dict[str, tuple[str, int]] = field(default_factory=dict)
    idle_s: float = IDLE_S  # a step is done after this long without a frame
    events: list[tuple[int, str, int, bytes]] = field(default_factory=list)
    conns: dict[str, _Conn] = field(default_factory=dict)
    openings: dict[str, int] = field(default_factory=dict)
    step: int = -1
    activity: trio.Event = field(default_factory=trio.Event)  # set (and renewed) per read

    def _woke(self) -> None:
        self.activity.set()
        self.activity = trio.Event()

    async def _read(self, conn: _Conn) -> None:
        while True:
            try:
                data = await conn.stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                data = b""
            self._woke()
            if not data:
                conn.closed = True
                garbage = conn.reader.take_garbage()
                if garbage:
                    self.events.append((self.step, conn.name, -2, garbage))
                self.events.append((self.step, conn.name, -1, b""))
                return
            for ftype, body in conn.reader.feed(data):
                self.events.append((self.step, conn.name, ftype, body))
                if ftype == FRAME_MESSAGE and len(body) >= MESSAGE_HEADER:
                    conn.held.append(body[10:MESSAGE_HEADER])
                else:
                    conn.answers += 1

    async def _open(self, nursery: trio.Nursery, name: str) -> _Conn:
        self.openings[name] = self.openings.get(name, 0) + 1
        stream = await trio.open_tcp_stream(*self.pins.get(name, self.addr))
        conn = _Conn(f"{name}#{self.openings[name]}", stream)
        self.conns[name] = conn
        await stream.send_all(MAGIC)
        nursery.start_soon(self._read, conn)
        return conn

    async def do(self, nursery: trio.Nursery, index: int, step: Step) -> None:
        self.step = index
        conn = self.conns.get(step.conn)
        if conn is None or conn.closed:
            conn = await self._open(nursery, step.conn)
        before = conn.answers
        try:
            owner = self.conns.get(step.held_by or step.conn, conn)
            await conn.stream.send_all(step.payload(owner.held))
        except (trio.BrokenResourceError, OSError):
            self.events.append((index, conn.name, -3, b""))  # the send failed
        with trio.move_on_after(ANSWER_S):
            while conn.answers - before < step.answers and not conn.closed:
                await self.activity.wait()
        with trio.move_on_after(STEP_MAX_S):  # then quiet on every connection for IDLE_S
            while True:
                with trio.move_on_after(self.idle_s) as quiet:
                    await self.activity.wait()
                if quiet.cancelled_caught:
                    break

    async def run(self, steps: list[Step]) -> None:
        async with trio.open_nursery() as nursery:
            for index, step in enumerate(steps):
                await self.do(nursery, index, step)
            nursery.cancel_scope.cancel()  # the readers first: our own close is no event
        for conn in self.conns.values():
            with trio.move_on_after(1):
                await conn.stream.aclose()

    def rendered(self) -> list[str]:
        """Events as text, ids masked: per connection (in the order they were opened)."""
        ids = IdRegistry()
        order = sorted({c for _, c, _, _ in self.events}, key=lambda c: (c[0], int(c[2:])))
        for conn in order:  # number ids per connection first, not in cross-connection arrival
            for _, c, ftype, body in self.events:
                if c == conn and ftype == FRAME_MESSAGE:
                    render_frame(c, ftype, body, ids)
        lines = []
        for conn in order:
            # within a step, a connection's answers come before its deliveries: in nsqd the
            # message pump and the command loop are two goroutines, and a PUB to a topic the
            # connection consumes has its OK and its own message arrive in either order
            mine = [e for e in self.events if e[1] == conn]
            mine.sort(key=lambda e: (e[0], e[2] == FRAME_MESSAGE))
            for step, c, ftype, body in mine:
                if ftype < 0:
                    text = {-1: "closed", -2: f"garbage {body!r}", -3: "send-failed"}[ftype]
                else:
                    text = render_frame(c, ftype, body, ids)[0].render()
                lines.append(f"{c} step {step}: {text}")
        return lines


async def run_both(addrs: dict[str, tuple[str, int]], steps: list[Step]) -> dict[str, Run]:
    return await run_all({name: Run(addr) for name, addr in addrs.items()}, steps)


async def run_all(runs: dict[str, Run], steps: list[Step]) -> dict[str, Run]:
    """Each run's daemon gets `steps` at once, beside the others'."""
    async with trio.open_nursery() as nursery:
        for r in runs.values():
            nursery.start_soon(r.run, steps)
    return runs


def compare(seed: int, steps: list[Step], runs: dict[str, Run]) -> str | None:
    """None when both rendered alike; else the sequence and both event lists."""
    ref, ours = runs["reference"].rendered(), runs["ours"].rendered()
    if ref == ours:
        return None
    out = [f"seed {seed}: the daemons differ", "sequence:"]
    out += [f"  {i}: {s.render()}" for i, s in enumerate(steps)]
    width = max(map(len, ref), default=10)
    out.append(f"  {'reference':<{width}} | ours")
    for i in range(max(len(ref), len(ours))):
        left = ref[i] if i < len(ref) else ""
        right = ours[i] if i < len(ours) else ""
        out.append(f"{'!' if left != right else ' '} {left:<{width}} | {right}")
    return "\n".join(out)


def start_pair() -> dict[str, daemons.Daemon]:
    return {t: daemons.start(t, FLAGS) for t in ("reference", "ours")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--seeds", default="0:50", help="start:stop")
    p.add_argument("--length", type=int, default=30)
    args = p.parse_args(argv)
    start, stop = map(int, args.seeds.split(":"))
    pair = start_pair()
    bad = 0
    try:
        addrs = {t: d.addr for t, d in pair.items()}
        for seed in range(start, stop):
            steps = sequence(seed, args.length)
            runs = trio.run(run_both, addrs, steps)
            report = compare(seed, steps, runs)
            kinds = Counter(line.split(": ", 1)[1].split()[0] for line in runs["ours"].rendered())
            print(f"seed {seed}: {'differs' if report else 'identical'} {dict(kinds)}", flush=True)
            if report:
                bad += 1
                print(report, flush=True)
    finally:
        for d in pair.values():
            d.stop()
    print(f"wire fuzz: {stop - start} seeds, {bad} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
