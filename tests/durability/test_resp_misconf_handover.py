"""A full disk (resp.log's write fails) and what hands something over inside a transaction or
a script: as a plain pop of that pass, a MULTI/EXEC or EVAL whose pop removed an element, and
a `SET key value GET` (the old value it overwrote), are answered with their replies, as
redis-server answers them beside ours on a full tmpfs; the pass's other writes, a transaction
whose pop found nothing included, are still answered -MISCONF. Answered -MISCONF, the element
(the old value) was gone from memory and, once the kept records were written, from the log:
lost to every client."""

from __future__ import annotations

from pathlib import Path

import redis

from protocol.resp.codec import command

from . import helpers
from .test_disk_faults import fill_up, small_disk
from .test_resp_misconf import BIG, FULL, _ours, _redis_server, _set_works

POP_SCRIPT = b"return redis.call('rpop', KEYS[1])"
# one send, so one pass of our reactor: its first write (a new page of resp.log) fails
PASS = [
    (b"SET", b"b", BIG.encode()),  # the failing write: Redis +OK, ours -MISCONF
    (b"MULTI",),
    (b"LPOP", b"list"),
    (b"SET", b"t", b"1"),
    (b"EXEC",),  # a pop in it: its replies, the SET's +OK included
    (b"EVAL", POP_SCRIPT, b"1", b"jobs"),
    (b"SET", b"old", b"new", b"GET"),
    (b"SET", b"plain", b"v"),
    (b"MULTI",),
    (b"SET", b"u", b"1"),
    (b"LPOP", b"empty"),
    (b"EXEC",),  # its pop removed nothing: a plain write's -MISCONF
]
HANDED = {4: [b"x", b"OK"], 5: b"j2", 6: b"before"}  # reply index: what it hands over


def _one_pass(port: int) -> list[object]:
    """PASS in one send, after the disk filled up; each reply (an error as its text)."""
    conn = redis.Connection(host=helpers.HOST, port=port, socket_timeout=5)
    conn.send_packed_command([b"".join(command(*args) for args in PASS)])
    replies: list[object] = []
    for _ in PASS:
        try:
            replies.append(conn.read_response())
        except redis.ResponseError as exc:
            replies.append(str(exc))
    conn.disconnect()
    return replies


def _setup(client: redis.Redis) -> None:
    client.rpush("list", "x", "y")
    client.rpush("jobs", "j1", "j2")
    client.set("old", "before")


def test_a_transaction_a_script_and_set_get_hand_over_in_the_pass_whose_write_failed(
    tmp_path: Path,
) -> None:
    """Ours and redis-server on a full tmpfs: the EXEC that popped, the EVAL that popped and
    SET ... GET get the same replies from both, the element or old value; ours answers the
    pass's other writes -MISCONF. After a restart ours agrees with what it answered: the
    elements are gone from the lists, the old value replaced, every change of the pass kept."""
    seen = {}
    for name in ("redis", "ours"):
        data = tmp_path / name
        data.mkdir()
        with small_disk(data, "2m"):
            if name == "redis":
                with _redis_server(data) as port:
                    _setup(redis.Redis(helpers.HOST, port))
                    fill_up(data, 0)
                    seen[name] = _one_pass(port)
                continue
            with _ours(data) as (_, port):
                client = redis.Redis(helpers.HOST, port, socket_timeout=5)
                _setup(client)
                fill_up(data, 0)
                seen[name] = _one_pass(port)
                (data / "filler").unlink()
                assert helpers.wait_for(lambda c=client: _set_works(c), 5)
            with _ours(data) as (_, port):
                again = redis.Redis(helpers.HOST, port, socket_timeout=5)
                assert again.lrange("list", 0, -1) == [b"y"]
                assert again.lrange("jobs", 0, -1) == [b"j1"]
                assert again.mget("old", "t", "b", "plain", "u") == [
                    b"new", b"1", BIG.encode(), b"v", b"1",
                ]  # fmt: skip
    for i, handed in HANDED.items():
        assert seen["redis"][i] == seen["ours"][i] == handed, (i, seen)
    assert seen["ours"] == [
        FULL, b"OK", b"QUEUED", b"QUEUED", HANDED[4], HANDED[5], HANDED[6], FULL,
        b"OK", b"QUEUED", b"QUEUED", FULL,
    ]  # fmt: skip
