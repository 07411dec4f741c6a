"""One consumer of the consumer fuzz (fuzz_driver.py): a blocking V2 connection pinned to a
worker, what it holds, and what its commands came to.

A FIN, REQ or TOUCH answers nothing when it succeeds, so each batch of commands is followed by a
marker: a FIN of an id no message has (`mark...`), which the daemon refuses in order, after every
command before it. A refusal names its verb and id; every command before a marker's refusal that
was not refused itself succeeded, and a RDY before it is in effect."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tests.durability import helpers

if TYPE_CHECKING:
    from .fuzz_driver import Fuzz

LAT = 0.4  # s: how late a frame may be read, or a command served, after it was sent (2 cores)
MARK = b"mark%012d"


@dataclass(eq=False)
class Copy:
    """One delivery of a message to one consumer."""

    id: bytes
    attempts: int
    recv: float  # when the consumer read it
    owner: Consumer
    timeout: float  # the consumer's msg_timeout, s
    touched: float = 0.0  # when its last TOUCH was sent
    acted: str = ""  # "FIN" or "REQ" once sent
    late: bool = False  # the consumer means to hold it past its timeout
    req_due: float = 0.0  # REQ'd: not delivered again before this

    def deadline_lo(self) -> float:
        """The earliest the daemon may time it out: its delivery was at most LAT before it
        was read, a TOUCH was served after it was sent."""
        return max(self.recv - LAT, self.touched) + self.timeout

    def safe(self, now: float) -> bool:
        """Whether a command sent now is served while the daemon still has it in flight."""
        return now + LAT < self.deadline_lo()


@dataclass(eq=False)
class Sent:
    verb: str  # FIN, REQ, TOUCH, RDY, MARK, PAUSE
    key: bytes = b""  # the message's id, or the marker's
    copy: Copy | None = None
    safe: bool = False  # sent while the copy was surely in flight to this consumer
    value: int = 0  # RDY's count, PAUSE's epoch


@dataclass(eq=False)
class Consumer:
    fuzz: Fuzz
    worker: int
    timeout: float
    client: helpers.Client
    held: dict[bytes, Copy] = field(default_factory=dict)
    pending: deque[Sent] = field(default_factory=deque)
    unmarked: bool = False
    marks: int = 0
    settled: int = 0  # the RDY a marker confirmed
    stalled: bool = False  # a marker confirmed the channel's pause here
    stale_ok: set[bytes] = field(default_factory=set)  # ids a command on an older copy took
    closing: bool = False

    def __repr__(self) -> str:
        return f"c{id(self) % 1000}@w{self.worker}"

    # -- commands -------------------------------------------------------------------------

    def act(self, verb: str, copy: Copy, now: float, delay_ms: int = 0) -> None:
        """FIN, REQ or TOUCH `copy`."""
        self.pending.append(Sent(verb, copy.id, copy, copy.safe(now)))
        if verb == "TOUCH":
            copy.touched = now
            line = b"TOUCH %s\n" % copy.id
        else:
            copy.acted = verb
            self.held.pop(copy.id, None)
            line = b"%s %s\n" % (verb.encode(), copy.id)
            if verb == "REQ":
                copy.req_due = now + delay_ms / 1000
                line = b"REQ %s %d\n" % (copy.id, delay_ms)
        self.fuzz.trace(f"{self} {verb} {copy.id.decode()} a{copy.attempts} {delay_ms or ''}")
        self._send(line)

    def rdy(self, n: int) -> None:
        self.pending.append(Sent("RDY", value=n))
        self.fuzz.trace(f"{self} RDY {n}")
        self._send(b"RDY %d\n" % n)

    def note_pause(self, epoch: int) -> None:
        """The channel was paused (the HTTP answer came): the next marker confirms it here."""
        self.pending.append(Sent("PAUSE", value=epoch))
        self.unmarked = True

    def mark(self) -> None:
        if self.unmarked:
            self.marks += 1
            key = MARK % self.marks
            self.pending.append(Sent("MARK", key))
            self._send(b"FIN %s\n" % key)

    def _send(self, data: bytes) -> None:
        self.unmarked = True
        self.client.send(data)

    def rdy_max(self) -> int:
        """The highest RDY the daemon may be using: the confirmed one or one on its way."""
        return max([self.settled] + [s.value for s in self.pending if s.verb == "RDY"])

    # -- answers --------------------------------------------------------------------------

    def refused(self, text: str, now: float) -> None:
        """An error frame: a marker's refusal settles what was sent before it; a command's
        refusal is judged (fuzz.refused)."""
        parts = text.split()
        verb, key = (parts[1], parts[2].encode()) if len(parts) > 2 else ("", b"")
        if key.startswith(b"mark"):
            self._settle(key, now)
            return
        for sent in self.pending:
            if sent.verb == verb and sent.key == key:
                self.pending.remove(sent)
                self.fuzz.refused(self, sent, text, now)
                return
        self.fuzz.violation(f"{self}: an error for no command of its own: {text}")

    def _settle(self, key: bytes, now: float) -> None:
        while self.pending:
            sent = self.pending.popleft()
            if sent.verb == "MARK":
                if sent.key != key:
                    self.fuzz.violation(f"{self}: marker {key!r} answered before {sent.key!r}")
                return
            if sent.verb == "RDY":
                self.settled = sent.value
                self.fuzz.counts["RDY 0 confirmed"] += not sent.value
            elif sent.verb == "PAUSE":
                self.stalled = self.fuzz.pause_epoch == sent.value
                self.fuzz.counts["pause confirmed"] += self.stalled
            else:
                self.fuzz.succeeded(self, sent, now)
        self.fuzz.violation(f"{self}: marker {key!r} answered but never sent")

    def held_in_flight(self, now: float) -> int:
        """The copies it holds that the daemon surely still counts in flight to it."""
        return sum(1 for copy in self.held.values() if copy.deadline_lo() > now)
