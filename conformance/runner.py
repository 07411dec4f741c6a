"""Run one scenario against one daemon over raw sockets and record its transcript.

After every sending step (and `close`, `shutdown_write`), the runner reads from every open
connection of the scenario for a fixed window (default 400ms, `window:` overrides it), so each
step's record holds what the daemon sent in reaction to it. `sleep: D` reads for D. Every wait is
bounded; connections are plain blocking sockets polled with select(). (suite.py reruns a scenario
that differed with the window doubled: a loaded machine's late reply lands in a longer one.)
"""

from __future__ import annotations

import select
import socket
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Final

from .expect import parse_expectation
from .scenario import DEFAULT_CONN, Scenario, Step, build_bytes, parse_duration, substitute
from .transcript import StepRecord, Transcript
from .wire import Event, FrameReader, IdRegistry, render_frame, show_bytes

DEFAULT_WINDOW: Final = 0.4
CONNECT_TIMEOUT_S: Final = 5.0
SEND_TIMEOUT_S: Final = 5.0
SPLIT_GAP_S: Final = 0.002
RECV_SIZE: Final = 65536


@dataclass
class _Conn:
    name: str
    sock: socket.socket | None = None
    reader: FrameReader = field(default_factory=FrameReader)
    closed: bool = False  # by the server (observed) or by the script
    pending: deque[Event] = field(default_factory=deque)  # not yet checked by `expect:`
    last_id: bytes | None = None
    frames: list[tuple[int, bytes]] = field(default_factory=list)  # this window, not rendered

    def close_socket(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass


class ScenarioRunner:
    def __init__(
        self,
        scenario: Scenario,
        addr: tuple[str, int],
        target: str,
        window: float = DEFAULT_WINDOW,
    ) -> None:
        self.scenario = scenario
        self.addr = addr
        self.window = scenario.window if scenario.window is not None else window
        self.transcript = Transcript(target, scenario.id, any_order=scenario.any_order)
        self.ids = IdRegistry()
        self.conns: dict[str, _Conn] = {}
        self.current = DEFAULT_CONN

    # -- public -------------------------------------------------------------------------------

    def run(self) -> Transcript:
        try:
            for step in self.scenario.steps:
                self._step(step)
        except Exception as exc:  # a runner bug or an unexpected OS error: report, don't hang
            self.transcript.error = f"{type(exc).__name__}: {exc}"
        finally:
            for conn in self.conns.values():
                conn.close_socket()
        return self.transcript

    # -- steps --------------------------------------------------------------------------------

    def _step(self, step: Step) -> None:
        if step.kind == "conn":
            self.current = step.arg
            return
        if step.kind == "expect":
            self._expect(step)
            return
        conn = self._conn(self.current)
        record = StepRecord(step.line, conn.name, step.source)
        self.transcript.steps.append(record)
        if step.kind == "sleep":
            self._collect(record, parse_duration(step.arg))
            return
        if conn.closed:
            record.note = "not done: connection closed"
        elif step.kind == "close":
            conn.close_socket()
            conn.closed = True
        elif step.kind == "shutdown_write":
            assert conn.sock is not None
            try:
                conn.sock.shutdown(socket.SHUT_WR)
            except OSError as exc:
                record.note = f"shutdown failed: {exc.strerror or exc}"
        else:
            data = build_bytes(step.kind, substitute(step.arg, self.scenario, self._id_text))
            record.note = self._send(conn, data, split=step.kind == "send_split")
        self._collect(record, self.window)

    def _expect(self, step: Step) -> None:
        exp = parse_expectation(step.arg)
        conn = self._conn(self.current)
        if exp.kind == "nothing" and exp.wait is not None:
            record = StepRecord(step.line, conn.name, step.source)
            self.transcript.steps.append(record)
            self._collect(record, exp.wait)
        failure = ""
        if exp.kind == "open":
            if conn.closed:
                failure = "connection is closed"
        elif exp.kind == "nothing":
            if conn.pending:
                failure = f"got {conn.pending[0].render()}"
        elif not conn.pending:
            failure = "got nothing"
        else:
            event = conn.pending[0]
            if self.scenario.any_order:
                event = next((e for e in conn.pending if exp.matches(e)), event)
            conn.pending.remove(event)
            if not exp.matches(event):
                failure = f"got {event.render()}"
        if failure:
            self.transcript.failures.append(
                f"{self.scenario.path.name}:{step.line} {conn.name}: expect {step.arg}: {failure}"
            )

    # -- helpers ------------------------------------------------------------------------------

    def _id_text(self, n: int | None) -> str:
        """Text for `$id` (last message ID on the current connection) or `$idN`."""
        raw = self._conn(self.current).last_id if n is None else self.ids.lookup(n)
        return raw.decode("latin-1") if raw is not None else f"$id{'' if n is None else n}"

    def _conn(self, name: str) -> _Conn:
        conn = self.conns.get(name)
        if conn is None:
            conn = self.conns[name] = _Conn(name)
            try:
                sock = socket.create_connection(self.addr, timeout=CONNECT_TIMEOUT_S)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.settimeout(SEND_TIMEOUT_S)
                conn.sock = sock
            except OSError as exc:
                conn.closed = True
                self._record(conn, Event(name, "connect-failed", str(exc)), None)
        return conn

    def _send(self, conn: _Conn, data: bytes, split: bool) -> str:
        assert conn.sock is not None
        codec = conn.reader.codec  # compression negotiated by IDENTIFY applies both ways
        chunks = [data[i : i + 1] for i in range(len(data))] if split else [data]
        try:
            for chunk in chunks:
                conn.sock.sendall(codec.encode(chunk) if codec else chunk)
                if split:
                    time.sleep(SPLIT_GAP_S)
        except OSError as exc:  # the frames/close already sent are still read by _collect
            return f"send failed: {exc.strerror or exc}"
        return ""

    def _record(self, conn: _Conn, event: Event, record: StepRecord | None) -> None:
        conn.pending.append(event)
        if record is not None:
            record.events.append(event)
        elif self.transcript.steps:
            self.transcript.steps[-1].events.append(event)

    def _collect(self, record: StepRecord, duration: float) -> None:
        """Read every open connection for `duration` seconds; render what arrived."""
        deadline = time.monotonic() + duration
        ended: set[str] = set()
        garbage: dict[str, bytes] = {}
        while True:
            live = {c.sock: c for c in self.conns.values() if not c.closed and c.sock}
            remaining = deadline - time.monotonic()
            if not live or remaining <= 0:
                break
            readable, _, _ = select.select(list(live), [], [], remaining)
            for sock in readable:
                conn = live[sock]
                try:
                    data = sock.recv(RECV_SIZE)
                except (ConnectionResetError, ConnectionAbortedError, TimeoutError, OSError):
                    data = b""
                if not data:
                    conn.closed = True
                    ended.add(conn.name)
                    rest = conn.reader.take_garbage()
                    if rest:
                        garbage[conn.name] = garbage.get(conn.name, b"") + rest
                    continue
                conn.frames.extend(conn.reader.feed(data))
                if conn.reader.broken:
                    garbage[conn.name] = garbage.get(conn.name, b"") + conn.reader.take_garbage()
        # Render in connection-name order so `$idN` numbering does not depend on timing.
        for name in sorted(self.conns):
            conn = self.conns[name]
            for ftype, body in conn.frames:
                event, raw_id = render_frame(name, ftype, body, self.ids)
                if raw_id is not None:
                    conn.last_id = raw_id
                self._record(conn, event, record)
            conn.frames.clear()
            if name in garbage:
                self._record(conn, Event(name, "garbage", show_bytes(garbage[name], 64)), record)
            if name in ended:
                self._record(conn, Event(name, "closed"), record)


def run_scenario(
    scenario: Scenario, addr: tuple[str, int], target: str, window: float = DEFAULT_WINDOW
) -> Transcript:
    return ScenarioRunner(scenario, addr, target, window).run()
