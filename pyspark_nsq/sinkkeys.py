"""The sink's de-duplication keys: one prefix per task, stable across retries.

A message's key is `<prefix>/<n>`, n being the row's index among the task's rows for its topic
(nsqd keeps keys per topic), so the same row gets the same key however the rows are split
into requests. The prefix names the task's input, which Spark reproduces on a retry:

- streaming write: `<query id>:<batch id>:<partition>`. The query id is kept in the checkpoint,
  so it is the same after a restart; a micro-batch replayed after a failure has the same batch
  id and, for a deterministic plan, the same rows in each partition in the same order.
- batch write: `<dedupeKey>:<partition>`, dedupeKey being the option, else an id drawn once
  per write on the driver: a retried task keeps its keys, a write run again publishes again
  unless it sets the same `dedupeKey` (e.g. a date, or the batch id inside foreachBatch).

Spark sets the local properties `sql.streaming.queryId` and `streaming.sql.batchId` on every
task of a micro-batch; they are read from the task's context."""

from __future__ import annotations

import uuid

QUERY_ID = "sql.streaming.queryId"
BATCH_ID = "streaming.sql.batchId"


def new_write_key() -> str:
    """A batch write's own prefix, drawn on the driver and shipped to its tasks."""
    return uuid.uuid4().hex


def task_prefix(streaming: bool, option_key: str | None, write_key: str | None) -> str | None:
    """This task's key prefix, or None when the task cannot name its input (a streaming
    write without Spark's query and batch ids, or no task context at all)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return None
    partition = ctx.partitionId()
    if not streaming:
        base = option_key or write_key
        return f"{base}:{partition}" if base else None
    query_id, batch_id = ctx.getLocalProperty(QUERY_ID), ctx.getLocalProperty(BATCH_ID)
    if not query_id or batch_id is None:
        return None
    return f"{option_key or query_id}:{batch_id}:{partition}"
