"""WATCH's bookkeeping: each keyspace maps a watched key to its sessions, each session holds
its (keyspace, key) pairs, and a logged change to a watched key (a write, a pop, a DEL, an
expiry, a FLUSHALL of a key that existed, a RENAME's, an SMOVE's and a move's two keys, an
MSET's keys, a SET's value with its expiry) marks those sessions dirty, so their EXEC answers
the null array."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .records import MOVES

if TYPE_CHECKING:
    from .keyspace import Keyspace, Record


# where a record's keys are (its first argument is its key unless named here): a DEL names
# several, a RENAME, an SMOVE and a move (records.MOVES) two, an MSET every other argument
_TWO = slice(1, 3)
_KEYS = {
    b"DEL": slice(1, None),
    b"RENAME": _TWO,
    b"SMOVE": _TWO,
    b"MSET": slice(1, None, 2),
    **dict.fromkeys(MOVES.values(), _TWO),
}
_ONE = slice(1, 2)


def watch(ks: Keyspace, session: Any, keys: list[bytes]) -> None:
    for key in keys:
        ks.watchers.setdefault(key, set()).add(session)
        session.watching.add((ks, key))


def unwatch(session: Any) -> None:
    """Forget every key the session WATCHes, in whichever database it watched it."""
    for ks, key in session.watching:
        sessions = ks.watchers.get(key)
        if sessions is not None:
            sessions.discard(session)
            if not sessions:
                del ks.watchers[key]
    session.watching.clear()
    session.dirty = False


def touch(ks: Keyspace, rec: Record) -> None:
    """A change to a WATCHed key spoils its watchers' next EXEC."""
    op = rec[0]
    if op == b"FLUSHALL":  # Keyspace.flush touched the watched keys that existed (as Redis's
        return  # touchAllWatchedKeysInDb: a watched key that was not there is not spoiled)
    for key in rec[_KEYS.get(op, _ONE)]:
        for session in ks.watchers.get(key, ()):
            session.dirty = True
