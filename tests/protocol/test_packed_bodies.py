"""PackedBodies, the uniform MPUB's bodies kept in the batch's bytes, reads as the list of
bodies the message-by-message parser makes; HTTP /mpub's lines the same as split and filter."""

from __future__ import annotations

import random
import struct

import pytest

from nsqd.http.publish import _uniform_lines
from protocol.v2 import V2Connection
from protocol.v2.bodies import PackedBodies
from protocol.v2.commands import MPub


def _mpub(bodies: list[bytes]) -> bytes:
    parts = [struct.pack(">i", len(bodies))]
    for body in bodies:
        parts += [struct.pack(">i", len(body)), body]
    payload = b"".join(parts)
    return b"MPUB t\n" + struct.pack(">i", len(payload)) + payload


def _parse(wire: bytes, chunks: int) -> MPub:
    conn = V2Connection(expect_magic=False)
    step = max(1, len(wire) // chunks)
    events = []
    for i in range(0, len(wire), step):
        conn.receive_data(wire[i : i + step])
        while (event := conn.next_command()).__class__.__name__ != "_Sentinel":
            events.append(event)
    return events[-1]


@pytest.mark.parametrize("size,count", [(1, 2), (7, 3), (200, 200)])
def test_uniform_batch_is_packed_and_reads_as_its_bodies(size: int, count: int) -> None:
    bodies = [bytes([65 + i % 26]) * size for i in range(count)]
    whole = _parse(_mpub(bodies), 1)
    assert type(whole.bodies) is PackedBodies
    assert whole.bodies == bodies and list(whole.bodies) == bodies
    assert whole.bodies.nbytes == size * count
    cut = _parse(_mpub(bodies), 5)  # arrives in pieces: waited for, then packed the same
    assert type(cut.bodies) is PackedBodies and cut.bodies == bodies


@pytest.mark.parametrize("chunks", [1, 3, 7, 50])
@pytest.mark.parametrize("odd", [0, 1, 5, 9])
def test_a_batch_with_one_other_size_is_read_a_body_at_a_time(chunks: int, odd: int) -> None:
    """A body of another size anywhere (the last one too: a batch shorter than the first
    size suggests) is found as soon as its header is in, and the batch read message by
    message: never waited on for bytes that are not coming."""
    bodies = [bytes([65 + i]) * 7 for i in range(10)]
    bodies[odd] = bodies[odd][:3]
    cut = _parse(_mpub(bodies), chunks)
    assert type(cut.bodies) is list and cut.bodies == bodies


def test_packed_items_and_slices_match_a_list() -> None:
    rng = random.Random(7)
    bodies = [bytes([rng.randrange(256)]) * 5 for _ in range(40)]
    packed = PackedBodies(b"".join(struct.pack(">i", 5) + b for b in bodies), 5, 40)
    assert len(packed) == 40
    for _ in range(300):
        a, b = rng.randrange(-45, 45), rng.randrange(-45, 45)
        step = rng.choice([None, 1, 2, 3, -1, -3])
        assert packed[a:b:step] == bodies[a:b:step]
        i = rng.randrange(-40, 40)
        assert packed[i] == bodies[i] and type(packed[i]) is bytes
    with pytest.raises(IndexError):
        packed[40]
    with pytest.raises(IndexError):
        packed[-41]


def _split_lines(body: bytes) -> list[bytes]:
    blocks = body.split(b"\n")
    if body.endswith(b"\n"):
        blocks.pop()
    return [b for b in blocks if b]


def test_uniform_lines_are_the_split_bodies() -> None:
    rng = random.Random(3)
    packed_seen = 0
    for _ in range(20000):
        size = rng.randint(1, 3)
        lines = [
            rng.choice([b"a" * size, b"b" * size, b"c" * max(0, size + rng.choice([0, 1, -1]))])
            for _ in range(rng.randint(0, 5))
        ]
        body = b"\n".join(lines) + rng.choice([b"", b"\n", b"\n\n"])
        if rng.random() < 0.1:
            body = b"\n" + body
        packed = _uniform_lines(body, 2)
        if packed is None:
            continue
        packed_seen += 1
        assert list(packed) == _split_lines(body)
        assert max(map(len, packed)) <= 2  # never past max_msg: that is the slow path's 413
        assert packed.nbytes == sum(map(len, packed))
    assert packed_seen > 1000
