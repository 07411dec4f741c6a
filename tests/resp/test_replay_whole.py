"""The records of one command (a *STORE's DEL and refill), one EXEC, one script reach resp.log as
one record (storage/resp_log.py `seal`): a tail torn inside it (power loss, a kill -9 that cut
a large write short) or a bit flipped in it loses all of its changes, never a part, as Redis
reverts an incomplete MULTI/EXEC of its AOF on load; the records after a damaged one apply."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import redis

from nsqd.storage import records
from nsqd.storage.resp_log import FILE, decode

from .helpers import client

PUSH_TWO = "redis.call('rpush', KEYS[1], 'a'); redis.call('rpush', KEYS[2], 'b')"


def _groups(path: Path) -> list[int]:
    """Where each grouped record's payload starts in the file."""
    data = path.read_bytes()
    payloads = records.read(data, FILE).payloads
    return [data.index(p) for p in payloads if decode(p)[0] == b"MULTI"]


def _transaction(r: redis.Redis) -> None:
    p = r.pipeline(transaction=True)
    p.rpush("t1", "a")
    p.rpush("t2", "b")
    p.execute()


def test_a_torn_move_transaction_or_script_is_replayed_not_at_all(ours, tmp_path: Path) -> None:
    data = tmp_path / "d"
    server = ours.start(data=data)
    r = client(server.port)
    r.rpush("src", "job")
    units: list[tuple[str, Callable[[redis.Redis], object], tuple[str, ...]]] = [
        ("LMOVE", lambda r: r.lmove("src", "dst", "LEFT", "RIGHT"), ("dst",)),
        ("EXEC", _transaction, ("t1", "t2")),
        ("EVAL", lambda r: r.eval(PUSH_TWO, 2, "t1", "t2"), ("t1", "t2")),
    ]
    for what, unit, made in units:
        unit(r)
        assert r.exists(*made) == len(made), what  # it ran
        server.stop()
        log = data / FILE
        with log.open("r+b") as f:  # a torn write: the last record lacks its last bytes
            f.truncate(log.stat().st_size - 3)
        server = ours.start(data=data)
        r = client(server.port)
        assert r.lrange("src", 0, -1) == [b"job"], what  # the pop without its push: lost
        assert r.exists("dst", "t1", "t2") == 0, what
    assert "torn or damaged tail" in server.log_path.read_text(errors="replace")
    r.close()


def test_a_damaged_group_is_skipped_whole_and_the_rest_applies(ours, tmp_path: Path) -> None:
    """Both groups damaged: a transaction's that moves, and one that changes database; the
    push after them lands in its own database all the same."""
    data = tmp_path / "d"
    server = ours.start(data=data)
    r = client(server.port)
    r.rpush("src", "job")
    p = r.pipeline(transaction=True)
    p.lmove("src", "dst", "LEFT", "RIGHT")
    p.set("moved", "1")
    p.execute()
    r.set("between", "1")
    p = r.pipeline(transaction=True)
    p.rpush("t", "a")
    p.execute_command("SELECT", "1")
    p.rpush("t", "b")
    p.execute()
    r1 = client(server.port, db=1)
    r1.rpush("after", "x")
    server.stop()
    log = data / FILE
    damaged = bytearray(log.read_bytes())
    groups = _groups(log)
    assert len(groups) == 2, groups
    for start in groups:
        damaged[start + 10] ^= 0x40
    log.write_bytes(bytes(damaged))
    server = ours.start(data=data)
    r, r1 = client(server.port), client(server.port, db=1)
    assert r.lrange("src", 0, -1) == [b"job"] and r.get("between") == b"1"
    assert r.exists("dst", "moved", "t") == 0 and r1.exists("t") == 0
    assert r1.lrange("after", 0, -1) == [b"x"] and r.exists("after") == 0
    assert server.log_path.read_text(errors="replace").count("damaged record(s)") == 2
    r.close()
    r1.close()
