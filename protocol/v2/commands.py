"""What the parser hands the daemon: one record per client command.

Everything a command needs is already validated (names, sizes, counts, state); the daemon only
does what needs the engine (topics, in-flight lookups, auth)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .identify import ClientSettings


@dataclass(slots=True)
class Identify:
    settings: ClientSettings  # the client's settings after this IDENTIFY


@dataclass(slots=True)
class Auth:
    secret: bytes


@dataclass(slots=True)
class Sub:
    topic: str
    channel: str


@dataclass(slots=True)
class Pub:
    topic: str
    body: bytes


@dataclass(slots=True)
class MPubStart:
    """MPUB's line was valid: nsqd checks auth and creates the topic before reading the body."""

    topic: str


@dataclass(slots=True)
class MPub:
    topic: str
    bodies: Sequence[bytes]  # a list, or the batch's bytes for a uniform one (PackedBodies)


@dataclass(slots=True)
class DPub:
    topic: str
    delay_ms: int
    body: bytes


@dataclass(slots=True)
class Rdy:
    count: int


@dataclass(slots=True)
class Fin:
    """One FIN, or a run of consecutive FINs parsed in one go (consumers send them in bulk)."""

    msg_ids: list[bytes]


@dataclass(slots=True)
class Req:
    msg_id: bytes
    delay_ms: int  # already clamped to [0, max-req-timeout] as nsqd does


@dataclass(slots=True)
class Touch:
    msg_id: bytes


@dataclass(slots=True)
class Cls:
    pass


@dataclass(slots=True)
class Nop:
    pass


Command = (
    Identify | Auth | Sub | Pub | MPubStart | MPub | DPub | Rdy | Fin | Req | Touch | Cls | Nop
)
