"""The differential suite (conformance/resp): every script against the real redis-server 7
and ours, raw RESP replies compared byte for byte, error texts included."""

from __future__ import annotations

import re

import pytest

from conformance.resp import script
from conformance.resp.servers import Pair
from conformance.resp.wire import Conn, encode

SCRIPTS = script.load_all()


def test_scripts_found() -> None:
    assert len(SCRIPTS) >= 10
    assert sum(len(s.steps) for s in SCRIPTS) > 400


@pytest.mark.parametrize("sc", SCRIPTS, ids=lambda s: s.name)
def test_script_reference(pair: Pair, sc: script.Script) -> None:
    redis, ours = pair.by_kind[sc.server]
    want = script.run(sc, redis.port)
    got = script.run(sc, ours.port)
    # the script says something: most steps that read got a real reply from Redis
    answered = [r for _, _, r in want.events if r and not r.startswith(b"<")]
    assert len(answered) >= len(sc.steps) // 2, want.events
    problems = script.diff(want, got)
    assert not problems, "\n".join(problems)


# one connection each: what it sends; CLIENT LIST's cmd= is then its c->lastcmd's full name
LAST_COMMANDS = [
    [b"SET k v"], [b"GET"], [b"FOO"], [b"CLIENT FOO"], [b"CLIENT"], [b"CONFIG GET maxmemory"],
    [b"MULTI", b"SET x 1"], [b"MULTI", b"INCR x", b"EXEC"], [b"MULTI", b"FOO"],
    [b"EVAL return 1 0"], [b"SUBSCRIBE ch", b"GET k"], [b"HELLO 3"], [b"XADD str 0-0 a 1"],
    [b"BLPOP nolist 0"],
]  # fmt: skip


def _last_commands(port: int) -> list[bytes]:
    conns, ids = [], []
    try:
        for commands in LAST_COMMANDS:
            conn = Conn(port)
            conns.append(conn)
            conn.send(encode([b"CLIENT", b"ID"]))
            ids.append(conn.reply()[1:-2])
            for line in commands:
                conn.send(encode(line.split()))
                if not line.startswith(b"BLPOP"):
                    conn.reply()
        conns.append(me := Conn(port))
        me.send(encode([b"CLIENT", b"ID"]))
        ids.append(me.reply()[1:-2])
        me.send(encode([b"CLIENT", b"LIST"]))
        rows = dict(re.findall(rb"id=(\d+) .*?cmd=(\S+)", me.reply()))
        return [rows.get(i, b"?") for i in ids]
    finally:
        for conn in conns:
            conn.close()


def test_client_list_cmd(pair: Pair) -> None:
    """`cmd=` of every client, not only the caller's: NULL after an unknown command or
    subcommand, the container alone (`client`), `exec` and `eval` for what they ran."""
    redis, ours = pair.by_kind["plain"]
    want = _last_commands(redis.port)
    assert want[-1] == b"client|list" and b"NULL" in want, want
    assert _last_commands(ours.port) == want
