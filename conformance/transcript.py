"""What one daemon sent during one scenario, step by step; comparison and side-by-side view."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Final

from .wire import Event

COLUMN: Final = 72


@dataclass
class StepRecord:
    """One scripted step and every event any connection observed during its collect window
    (grouped by connection name, each connection's events in arrival order)."""

    line: int
    conn: str
    source: str
    events: list[Event] = field(default_factory=list)
    note: str = ""

    def header(self) -> str:
        note = f"   ({self.note})" if self.note else ""
        return f"{self.line:>4} {self.conn}> {self.source}{note}"

    def event_lines(self) -> list[str]:
        return [f"{e.conn}< {e.render()}" for e in self.events]


@dataclass
class Transcript:
    target: str
    scenario: str
    steps: list[StepRecord] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # expectations that did not hold
    error: str | None = None  # the runner itself failed
    any_order: bool = False  # the scenario's `order: any`: each step's events as a set

    def key(self) -> list[tuple[str, ...]]:
        """What is compared: every step's rendered events (notes and sources are not)."""
        arrange = sorted if self.any_order else list
        keys = [tuple(arrange(s.event_lines())) for s in self.steps]
        if self.error:
            keys.append(("runner error",))
        return keys

    def lines(self) -> list[str]:
        out: list[str] = []
        for step in self.steps:
            out.append(step.header())
            out.extend("       " + line for line in step.event_lines())
        if self.error:
            out.append(f"  runner error: {self.error}")
        return out


def same(a: Transcript, b: Transcript) -> bool:
    return a.key() == b.key() and not a.error and not b.error


def _wrap(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width, break_long_words=True, drop_whitespace=False) or [""]


def side_by_side(left: Transcript, right: Transcript, width: int = COLUMN) -> list[str]:
    """Both transcripts in two columns, one block per step; `!` marks differing events."""
    out = [f"       {left.target:<{width}}   {right.target}"]
    for ls, rs in zip_longest(left.steps, right.steps):
        step = ls or rs
        assert step is not None
        out.append(step.header())
        lnotes = ls.note if ls else "(step not run)"
        rnotes = rs.note if rs else "(step not run)"
        if lnotes != rnotes:
            out.append(f"     ~ {lnotes:<{width}}   {rnotes}")
        l_events = ls.event_lines() if ls else []
        r_events = rs.event_lines() if rs else []
        for le, re_ in zip_longest(l_events, r_events, fillvalue=""):
            mark = " " if le == re_ else "!"
            for lw, rw in zip_longest(_wrap(le, width), _wrap(re_, width), fillvalue=""):
                out.append(f"     {mark} {lw:<{width}} {mark} {rw}")
                mark = " " if le == re_ else "."
    out.extend(f"  {t.target}: runner error: {t.error}" for t in (left, right) if t.error)
    return out
