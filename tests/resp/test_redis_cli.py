"""redis-cli unchanged against ours: the same commands (as arguments, and piped on stdin as
an operator would) print the same output as against redis-server."""

from __future__ import annotations

import shutil
import subprocess

import pytest

COMMANDS = [
    ["RPUSH", "cli:q", "a", "b c", "d"],
    ["LRANGE", "cli:q", "0", "-1"],
    ["BLPOP", "cli:none", "cli:q", "0"],
    ["LMOVE", "cli:q", "cli:p", "RIGHT", "LEFT"],
    ["HSET", "cli:h", "f", "v"],
    ["HGETALL", "cli:h"],
    ["GET", "cli:q"],
    ["TTL", "cli:h"],
    ["NOSUCH", "x"],
]
STDIN = "RPUSH cli:s x y\nLPOP cli:s 5\nBRPOP cli:s 0.1\nPING\n"


def cli() -> str:
    found = shutil.which("redis-cli")
    if found is None:
        pytest.fail("redis-cli missing: scripts/install_redis.sh installs redis-tools")
    return found


def outputs(port: int) -> list[str]:
    tool = cli()
    run = [tool, "-p", str(port)]
    subprocess.run([*run, "FLUSHALL"], capture_output=True, timeout=10, check=True)
    out = []
    for cmd in COMMANDS:
        done = subprocess.run([*run, *cmd], capture_output=True, text=True, timeout=10)
        out.append(done.stdout + done.stderr)
    piped = subprocess.run(run, input=STDIN, capture_output=True, text=True, timeout=10)
    out.append(piped.stdout + piped.stderr)
    return out


def test_redis_cli_same_output(pair) -> None:
    redis_server, ours = pair.by_kind["plain"]
    want, got = outputs(redis_server.port), outputs(ours.port)
    assert "b c" in want[1] and "WRONGTYPE" in want[6]  # the commands did what they say
    assert got == want
