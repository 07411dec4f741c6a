"""Active expiry and seed 003's expiry events.

`run` expires keys on time without their being read (the seed's consumers depend on it): it
sleeps until the keyspace's earliest deadline, woken early when an earlier one is set. With
--resp-expiry-topic, every string or hash key that expires (on time, or found expired when
read) is published as one NSQ message to that topic, in the seed's frame layout, little-endian
as the seed's x86 server wrote it:

    u16 db (the key's database, 0-15) | u16 type (0 string, 1 hash)
    u32 key length | key
    string: u32 value length | value
    hash:   u32 number of keys + values (2 x fields) | per field: u32 len | name | u32 len | value

Lists expire silently, as in the seed (it sends events for strings and hashes only)."""

from __future__ import annotations

import struct
from collections.abc import Callable

import trio

from ..engine.api import Refused
from ..engine.broker import Broker
from ..log import log
from .keyspace import Keyspace, Value, now_ms

_HEADER = struct.Struct("<HH")
_U32 = struct.Struct("<I")
STRING, HASH = 0, 1


def frame(key: bytes, value: bytes | dict, db: int = 0) -> bytes:
    """The seed's three frames, one after the other, as one message body."""
    if isinstance(value, bytes):
        parts = [_HEADER.pack(db, STRING), _U32.pack(len(key)), key, _U32.pack(len(value)), value]
    else:
        parts = [_HEADER.pack(db, HASH), _U32.pack(len(key)), key, _U32.pack(2 * len(value))]
        for field, val in value.items():
            parts += [_U32.pack(len(field)), field, _U32.pack(len(val)), val]
    return b"".join(parts)


def parse(body: bytes) -> tuple[int, int, bytes, bytes | dict[bytes, bytes]]:
    """(db, type, key, value): the inverse of `frame`, for consumers and tests."""
    db, kind = _HEADER.unpack_from(body, 0)
    pos = 4

    def chunk() -> bytes:
        nonlocal pos
        (n,) = _U32.unpack_from(body, pos)
        pos += 4 + n
        return body[pos - n : pos]

    key = chunk()
    if kind == STRING:
        return db, kind, key, chunk()
    (count,) = _U32.unpack_from(body, pos)
    pos += 4
    pairs = {}
    for _ in range(count // 2):
        field = chunk()
        pairs[field] = chunk()
    return db, kind, key, pairs


def publisher(broker: Broker, topic: str) -> Callable[..., None]:
    def expired(key: bytes, value: Value, db: int = 0) -> None:
        if isinstance(value, bytes | dict):
            try:
                broker.publish(topic, [frame(key, value, db)])
            except Refused as exc:  # a full or failing topic: the event is lost, logged
                log.error("RESP: expiry event for a key lost - publish failed %s", exc)

    return expired


class Expirer:
    """The active expiry task of one keyspace."""

    def __init__(self, keyspace: Keyspace, after_pass: Callable[[], None]) -> None:
        self.ks = keyspace
        self.after_pass = after_pass  # write the DEL records, serve nothing else
        self._wakeup = trio.Event()
        self.active = True  # DEBUG SET-ACTIVE-EXPIRE 0: keys expire only when read
        keyspace.deadline_moved = self._wake

    def _wake(self) -> None:
        self._wakeup.set()

    def set_active(self, active: bool) -> None:
        self.active = active
        self._wake()

    async def run(self) -> None:
        ks = self.ks
        while True:
            self._wakeup = trio.Event()
            deadline = ks.next_deadline() if self.active else None
            if deadline is None:
                await self._wakeup.wait()
                continue
            wait = (deadline - now_ms()) / 1000
            if wait > 0:
                with trio.move_on_after(wait):
                    await self._wakeup.wait()
                continue
            done = ks.expire_due(now_ms())
            if done:
                self.after_pass()
            await trio.lowlevel.checkpoint()  # a big batch in slices: clients go on
