"""XSETID's counters (last ID, entries added, largest deleted ID: one XMETA record) kept
across a kill -9 and the log's rewrite, with the lag a group's XINFO estimates from them;
compared with what redis-server 7.0.15 holds after the same commands (the replies, byte for
byte: conformance/resp/scripts/29_xsetid.txt)."""

from __future__ import annotations

from pathlib import Path

import redis

from conformance.resp.servers import Pair
from nsqd.resp.databases import Databases
from nsqd.storage.resp_log import RespLog

from .helpers import client


def _fill(r: redis.Redis) -> None:
    x = r.execute_command
    x("FLUSHALL")
    for i in range(1, 6):
        x("XADD", "s", f"1-{i}", "f", str(i))
    x("XGROUP", "CREATE", "s", "g", "0")
    x("XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "s", ">")
    x("XDEL", "s", "1-5")
    x("XSETID", "s", "1-4", "ENTRIESADDED", "40", "MAXDELETEDID", "1-3")
    x("XGROUP", "CREATE", "e", "g", "$", "MKSTREAM")
    x("XSETID", "e", "7-7", "ENTRIESADDED", "3", "MAXDELETEDID", "7-0")
    x("XADD", "t", "5-5", "f", "v")
    x("XSETID", "t", "9-0")


def _state(r: redis.Redis) -> list[object]:
    x = r.execute_command
    out: list[object] = []
    for key in ("s", "e", "t"):
        info = x("XINFO", "STREAM", key)
        for internal in (b"radix-tree-keys", b"radix-tree-nodes"):
            info.pop(internal)
        out += [info, x("XINFO", "GROUPS", key) if info[b"groups"] else []]
    return out


def test_xsetid_survives_kill9_and_a_rewrite(ours, pair: Pair, tmp_path: Path) -> None:
    r = client(pair.by_kind["plain"][0].port)
    _fill(r)
    want = _state(r)
    r.close()
    assert want[0][b"last-generated-id"] == b"1-4" and want[0][b"entries-added"] == 40, want
    assert want[2][b"entries-added"] == 3 and want[4][b"last-generated-id"] == b"9-0", want
    data = tmp_path / "d"
    server = ours.start("--sync-every=1", data=data)
    r = client(server.port)
    _fill(r)
    assert _state(r) == want
    r.close()
    server.kill()
    server = ours.start(data=data)
    r = client(server.port)
    assert _state(r) == want
    r.close()
    assert server.stop() == 0
    log = RespLog(str(data), sync_every=1, sync_timeout=1.0, sync_due=lambda: None)
    log.load(Databases())  # type: ignore[arg-type]
    log.rewrite()
    log.close()
    server = ours.start(data=data)
    r = client(server.port)
    assert _state(r) == want
    r.close()
