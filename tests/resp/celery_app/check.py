"""Celery unchanged against a server (argv: port): a worker (solo pool) started in a
subprocess, a task round trip and a task retried twice, results through the Redis backend.
Prints PASS."""

import os
import subprocess
import sys

os.environ["PORT"] = sys.argv[1]

from tasks import add, flaky

worker = subprocess.Popen(
    [sys.executable, "-m", "celery", "-A", "tasks", "worker", "--pool=solo", "-c", "1",
     "--loglevel=WARNING", "--without-mingle", "--without-gossip"],
)  # fmt: skip
try:
    assert add.delay(2, 3).get(timeout=60) == 5
    assert flaky.delay(4).get(timeout=60) == 40
finally:
    worker.terminate()
    worker.wait(30)
print("PASS")
