"""COMMAND INFO of each of our commands is redis-server 7.0.15's entry (flags, key positions,
ACL categories, tips, key specs; subcommands ours only), in RESP2 and RESP3, byte for byte:
nsqd/resp/commands/command_table.py, captured by scripts/gen_command_table.py. The entries
were empty (no flags, no categories, no key specs), which clients read (redis-py's cluster
routing and `readonly`)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.resp import servers
from nsqd.resp.commands import registry
from scripts import gen_command_table as gen

SAMPLE = ("get", "set", "blpop", "eval", "nosuchcommand")


@pytest.fixture(scope="module")
def ports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int]]:
    """redis-server's port and ours."""
    try:
        servers.redis_server()
    except servers.MissingRedis as exc:
        pytest.fail(str(exc), pytrace=False)
    tmp: Path = tmp_path_factory.mktemp("command-info")
    redis = servers.start_redis(tmp)
    try:
        ours = servers.start_ours(tmp / "ours")
        try:
            yield redis.port, ours.port
        finally:
            ours.stop()
    finally:
        redis.stop()


def _ask(port: int, protocol: int, *args: str) -> tuple[gen.Node, bytes]:
    """A command's reply under HELLO `protocol`: as a tree, and its bytes."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        reader = gen.Reader(sock)
        gen.ask(sock, reader, "HELLO", str(protocol))
        reader.taken.clear()
        got = gen.ask(sock, reader, *args)
        return got, bytes(reader.taken)


@pytest.mark.parametrize("protocol", [2, 3])
def test_command_info_of_a_sample_is_redis_servers_byte_for_byte(
    ports: tuple[int, int], protocol: int
) -> None:
    redis_port, our_port = ports
    theirs = _ask(redis_port, protocol, "COMMAND", "INFO", *SAMPLE)[1]
    assert _ask(our_port, protocol, "COMMAND", "INFO", *SAMPLE)[1] == theirs


def _in_order(entry: gen.Node) -> gen.Node:
    """`entry` with its subcommands by name: Redis lists them in its hash table's order,
    which differs from one start to the next."""
    assert isinstance(entry, list)
    if len(entry) > 10 and isinstance(entry[10], list) and len(entry[10]) > 1:
        subs = sorted(entry[10][1:], key=lambda sub: sub[1])
        entry = [*entry[:10], [entry[10][0], *subs]]
    return entry


@pytest.mark.parametrize("protocol", [2, 3])
def test_command_info_of_each_of_our_commands_is_redis_servers(
    ports: tuple[int, int], protocol: int
) -> None:
    """Every command of ours, its subcommands those of ours among Redis's."""
    redis_port, our_port = ports
    names, every = gen.our_names()
    theirs = _ask(redis_port, protocol, "COMMAND", "INFO", *names)[0]
    ours = _ask(our_port, protocol, "COMMAND", "INFO", *names)[0]
    assert isinstance(theirs, list) and isinstance(ours, list)
    expected = [gen.keep_ours(entry, every) for entry in theirs[1:]]  # type: ignore[arg-type]
    for name, mine, redis_entry in zip(names, ours[1:], expected, strict=True):
        assert _in_order(mine) == _in_order(redis_entry), name
    # COMMAND (every entry) holds the same, one per command of ours
    everything = _ask(our_port, protocol, "COMMAND")[0]
    assert isinstance(everything, list)
    assert sorted(map(str, everything[1:])) == sorted(map(str, ours[1:]))
    assert _ask(our_port, protocol, "COMMAND", "COUNT")[0] == len(registry.TABLE)
