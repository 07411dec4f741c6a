"""BullMQ (Node, the most used Redis job queue) unchanged against ours and against
redis-server: tests/resp/bullmq/check.js (installed with `npm ci` from its lock file) runs a
Queue and a Worker: the worker blocks on its queue's marker with BZPOPMIN, BullMQ's Lua
scripts unpack their options with cmsgpack and keep them as JSON with cjson; jobs added one
by one and in bulk, a delayed job, a retry (attempts), a job that fails for good; a
QueueEvents blocks on the queue's events stream (XREAD BLOCK from `$`) and hears every job's
completed/failed event, and job.waitUntilFinished resolves (or rejects) through it. The summary
it prints (each job's state, attempts, result and failure, what ran, the counts, the worker's
and QueueEvents' events) must be the same on both servers."""

from __future__ import annotations

import subprocess
from pathlib import Path

from .helpers import node_project

HERE = Path(__file__).with_name("bullmq")


def _setup() -> str:
    return node_project(HERE, "BullMQ")


def _summary(node: str, port: int) -> str:
    done = subprocess.run(
        [node, "check.js", str(port)],
        cwd=HERE, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines[-1:] == ["PASS"], done.stdout + done.stderr
    return lines[-2]


def test_bullmq_queue_and_worker_as_on_redis(pair) -> None:
    node = _setup()
    redis_server, ours = pair.by_kind["plain"]
    assert _summary(node, ours.port) == _summary(node, redis_server.port)
