"""The Celery app of the Celery check: broker and results on the server under test (PORT)."""

import os

from celery import Celery

PORT = os.environ["PORT"]
app = Celery("tasks", broker=f"redis://127.0.0.1:{PORT}/3", backend=f"redis://127.0.0.1:{PORT}/4")
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
