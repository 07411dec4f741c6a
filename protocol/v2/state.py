"""Client states and which commands each allows.

Rule: nsqd's V2 connection goes INIT -> SUBSCRIBED (SUB) -> CLOSING (CLS) and never back;
IDENTIFY and AUTH leave the state alone. A command outside its row is a fatal
`E_INVALID cannot <CMD> in current state`; RDY in CLOSING is silently ignored."""

from __future__ import annotations

from enum import IntEnum

from .errors import ErrorCode, NSQError


class ClientState(IntEnum):
    # The numbers are what /stats reports.
    INIT = 0
    DISCONNECTED = 1
    CONNECTED = 2
    SUBSCRIBED = 3
    CLOSING = 4


_ANY = frozenset(ClientState)
ALLOWED: dict[bytes, frozenset[ClientState]] = {
    b"IDENTIFY": frozenset({ClientState.INIT}),
    b"AUTH": frozenset({ClientState.INIT}),
    b"SUB": frozenset({ClientState.INIT}),
    b"RDY": frozenset({ClientState.SUBSCRIBED, ClientState.CLOSING}),
    b"FIN": frozenset({ClientState.SUBSCRIBED, ClientState.CLOSING}),
    b"REQ": frozenset({ClientState.SUBSCRIBED, ClientState.CLOSING}),
    b"TOUCH": frozenset({ClientState.SUBSCRIBED, ClientState.CLOSING}),
    b"CLS": frozenset({ClientState.SUBSCRIBED}),
    b"PUB": _ANY,
    b"MPUB": _ANY,
    b"DPUB": _ANY,
    b"NOP": _ANY,
}

TRANSITIONS: dict[tuple[ClientState, bytes], ClientState] = {
    (ClientState.INIT, b"SUB"): ClientState.SUBSCRIBED,
    (ClientState.SUBSCRIBED, b"CLS"): ClientState.CLOSING,
}


def check_state(verb: bytes, state: ClientState) -> None:
    if state not in ALLOWED[verb]:
        raise NSQError(ErrorCode.E_INVALID, f"cannot {verb.decode()} in current state")
