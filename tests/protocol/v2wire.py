"""Helpers for the protocol tests: build client bytes, feed them to V2Connection in any
chunking, and describe how a stream ended.

The expectations in the tables (nsq_cases.py) are what the real nsqd v1.3.0 answers; the
same tables are replayed against the real binary by test_against_nsqd.py when it is present."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from protocol.v2 import (
    CLOSED,
    NEED_DATA,
    PAUSED,
    ClientSettings,
    Command,
    Fin,
    Identify,
    Limits,
    NSQError,
    ProtocolClosed,
    ServerFeatures,
    V2Connection,
)

MAGIC = b"  V2"
MSG_ID = b"0123456789abcdef"  # any 16 bytes are a valid id for the parser
DEFAULT_LIMITS = Limits()
DEFAULT_SETTINGS = ClientSettings.defaults(DEFAULT_LIMITS)


# -- building client bytes ---------------------------------------------------------------------


def i32(n: int) -> bytes:
    return struct.pack(">i", n)


def sized(data: bytes) -> bytes:
    """[int32 size][data], the way every command body is sent."""
    return i32(len(data)) + data


def as_bytes(data: bytes | str | dict[str, Any]) -> bytes:
    if isinstance(data, dict):
        return json.dumps(data, separators=(",", ":")).encode()
    if isinstance(data, str):
        return data.encode()
    return data


def identify(data: bytes | str | dict[str, Any]) -> bytes:
    return b"IDENTIFY\n" + sized(as_bytes(data))


def pub(topic: bytes, data: bytes) -> bytes:
    return b"PUB " + topic + b"\n" + sized(data)


def dpub(topic: bytes, delay: int | bytes, data: bytes) -> bytes:
    raw = delay if isinstance(delay, bytes) else str(delay).encode()
    return b"DPUB " + topic + b" " + raw + b"\n" + sized(data)


def mpub_body(bodies: Sequence[bytes], count: int | None = None) -> bytes:
    """[int32 count]([int32 size][msg])*; count defaults to len(bodies)."""
    n = len(bodies) if count is None else count
    return i32(n) + b"".join(sized(b) for b in bodies)


def mpub(topic: bytes, bodies: Sequence[bytes], *, declared: int | None = None) -> bytes:
    payload = mpub_body(bodies)
    size = len(payload) if declared is None else declared
    return b"MPUB " + topic + b"\n" + i32(size) + payload


def settings(**changes: Any) -> ClientSettings:
    return replace(DEFAULT_SETTINGS, **changes)


def identified(limits: Limits | None = None, **changes: Any) -> Identify:
    base = ClientSettings.defaults(limits) if limits else DEFAULT_SETTINGS
    return Identify(replace(base, **changes))


# -- outcomes ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Err:
    """nsqd sends this error frame body and closes (every parser error is fatal)."""

    text: bytes

    def __repr__(self) -> str:
        return f"Err({self.text!r})"


class _End:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


EOF = _End("EOF")  # the stream ended cleanly between commands: next_command() gave CLOSED
HANGUP = _End("HANGUP")  # nsqd drops the connection without an error frame: ProtocolClosed

Outcome = Err | _End


@dataclass(frozen=True)
class Case:
    """Client bytes (after the magic unless magic=False) and what nsqd makes of them."""

    id: str
    data: bytes
    events: tuple[Command, ...]
    end: Outcome
    limits: Limits = DEFAULT_LIMITS
    tls_required: bool = False
    magic: bool = True
    server: ServerFeatures = field(default_factory=ServerFeatures)
    oracle: bool = True  # False: not reproducible with nsqd's flags (e.g. a custom line limit)

    @property
    def wire(self) -> bytes:
        return (MAGIC if self.magic else b"") + self.data


# -- feeding -----------------------------------------------------------------------------------


def run(
    chunks: Iterable[bytes],
    *,
    limits: Limits | None = None,
    tls_required: bool = False,
    conn: V2Connection | None = None,
) -> tuple[list[Command], Outcome]:
    """Feed the chunks then EOF, draining next_command() after each; return the commands and
    how the stream ended. Checks the sentinel contract on the way: NEED_DATA only before EOF,
    CLOSED only after it, PAUSED right after every IDENTIFY until resume()."""
    if conn is None:
        conn = V2Connection(limits, tls_required=tls_required)
    events: list[Command] = []

    def drain(at_eof: bool) -> Outcome | None:
        while True:
            event = conn.next_command()
            if event is NEED_DATA:
                assert not at_eof, "NEED_DATA after end of stream"
                return None
            if event is CLOSED:
                assert at_eof, "CLOSED before end of stream"
                return EOF
            assert event is not PAUSED, "PAUSED without an IDENTIFY"
            if isinstance(event, Fin):
                # A run of FIN lines may come as one Fin: count it as one Fin per line.
                assert event.msg_ids, "Fin without ids"
                events.extend(Fin([msg_id]) for msg_id in event.msg_ids)
                continue
            events.append(event)
            if isinstance(event, Identify):
                assert conn.next_command() is PAUSED
                assert conn.next_command() is PAUSED  # stays paused until resume()
                conn.resume()

    try:
        for chunk in chunks:
            assert chunk, "an empty chunk would mean EOF"
            conn.receive_data(chunk)
            drain(at_eof=False)
        conn.receive_data(b"")
        end = drain(at_eof=True)
        assert end is EOF
    except NSQError as err:
        assert err.fatal, f"parser error {err} should be fatal"
        assert bytes(err).startswith(err.code.value.encode())
        return events, Err(bytes(err))
    except ProtocolClosed:
        return events, HANGUP
    return events, end


def whole(data: bytes) -> list[bytes]:
    return [data] if data else []


def splits(data: bytes) -> Iterator[list[bytes]]:
    """Every way to cut data into two non-empty chunks."""
    for i in range(1, len(data)):
        yield [data[:i], data[i:]]


def bytewise(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


def run_case(case: Case, chunks: Iterable[bytes]) -> tuple[list[Command], Outcome]:
    return run(chunks, limits=case.limits, tls_required=case.tls_required)
