"""Celery unchanged against a server (argv: port, a scratch file): a worker (solo pool) in a
subprocess; a task round trip; a task retried twice; a task whose worker is killed (-9) while
it runs, redelivered to the next worker once its visibility timeout has passed. Results come
through the Redis backend. Prints PASS."""

import os
import signal
import subprocess
import sys
import time

os.environ["PORT"] = sys.argv[1]

from tasks import add, flaky, slow

WORKER = [sys.executable, "-m", "celery", "-A", "tasks", "worker", "--pool=solo", "-c", "1",
          "--loglevel=WARNING", "--without-mingle", "--without-gossip"]  # fmt: skip

worker = subprocess.Popen(WORKER)
try:
    assert add.delay(2, 3).get(timeout=60) == 5
    assert flaky.delay(4).get(timeout=60) == 40
    scratch = sys.argv[2]
    hung = slow.delay(scratch)
    deadline = time.monotonic() + 60
    while not os.path.exists(scratch) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert os.path.exists(scratch), "the first worker never started the task"
finally:
    worker.send_signal(signal.SIGKILL)
    worker.wait(30)
time.sleep(4)  # past the visibility timeout: the next worker restores the task when it starts
worker = subprocess.Popen(WORKER)
try:
    assert hung.get(timeout=60) == 2  # run again, to its end
finally:
    worker.terminate()
    worker.wait(30)
print("PASS")
