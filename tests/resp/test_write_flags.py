"""The commands ours refuses with -MISCONF while resp.log cannot be written
(nsqd/resp/commands/flags.py) are those of ours that redis-server 7.0.15's COMMAND flags
`write`, subcommands included: the list is Redis's, not a guess."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from conformance.resp import servers
from nsqd.resp.commands import registry
from nsqd.resp.commands.flags import DISK_BOUND, HANDS_OVER, WRITE


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _redis_writes(port: int) -> tuple[set[str], set[str]]:
    """Every command and subcommand redis-server knows, and those flagged `write`."""
    conn = redis.Redis("127.0.0.1", port).connection_pool.get_connection()
    conn.send_command("COMMAND")
    known, writes = set(), set()

    def walk(entry: list) -> None:
        name = _text(entry[0])
        known.add(name)
        if "write" in {_text(flag) for flag in entry[2]}:
            writes.add(name)
        for sub in entry[9] if len(entry) > 9 and entry[9] else []:
            walk(sub)

    for entry in conn.read_response():
        walk(entry)
    return known, writes


def test_the_commands_refused_on_a_failed_log_write_are_redis_write_commands(
    tmp_path: Path,
) -> None:
    try:
        servers.redis_server()
    except servers.MissingRedis as exc:
        pytest.fail(str(exc), pytrace=False)
    server = servers.start_redis(tmp_path)
    try:
        known, writes = _redis_writes(server.port)
    finally:
        server.stop()
    ours = set()
    for cmd in registry.TABLE.values():
        ours.add(cmd.name)
        ours.update(sub.name for sub in (cmd.subcommands or {}).values())
    assert writes & ours == WRITE
    assert ours >= WRITE  # (none of Redis's beyond ours)
    assert {"ping"} == DISK_BOUND - WRITE  # processCommand refuses PING as well
    table = {cmd.name: cmd for cmd in registry.TABLE.values()}
    for cmd in list(table.values()):
        table.update((sub.name, sub) for sub in (cmd.subcommands or {}).values())
    assert all(table[name].disk_bound for name in WRITE)
    # a write's reply is refused when its log write fails, but a pop's (it hands over)
    assert {name for name in WRITE if not table[name].writes} == HANDS_OVER
    assert known  # (the walk saw Redis's table)
