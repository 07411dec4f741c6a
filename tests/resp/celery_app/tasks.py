"""The Celery app of the Celery check: broker and results on the server under test (PORT)."""

import os
import time

from celery import Celery

PORT = os.environ["PORT"]
app = Celery("tasks", broker=f"redis://127.0.0.1:{PORT}/3", backend=f"redis://127.0.0.1:{PORT}/4")
app.conf.broker_transport_options = {"visibility_timeout": 3}  # redelivery after a kill
app.conf.task_acks_late = True
app.conf.worker_prefetch_multiplier = 1


@app.task
def add(a: int, b: int) -> int:
    return a + b


@app.task(bind=True, max_retries=3)
def flaky(self, n: int) -> int:  # type: ignore[no-untyped-def]
    if self.request.retries < 2:
        raise self.retry(countdown=0.2)
    return n * 10


@app.task
def slow(path: str) -> int:
    """Counts its runs in `path`; the first run hangs (its worker is killed there)."""
    first = not os.path.exists(path)
    with open(path, "a") as f:
        f.write("run\n")
    if first:
        time.sleep(60)
    with open(path) as f:
        return f.read().count("run")
