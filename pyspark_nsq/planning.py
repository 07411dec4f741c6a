"""A micro-batch's Spark partitions, and the Arrow rows an executor makes of one.

This is the seam where "who holds the bodies" is decided. Today the driver-side consumer holds
them and `driver_partitions` ships them inside the tasks (`NsqPartition`), each task kept
under maxBytesPerPartition (a task is serialized whole and must stay below
spark.rpc.message.maxSize). An executor-side reader would add a second partition type that
names an nsqd and what to take from it (a lease), with `read` pulling the bodies there; the
stream reader picks the plan per nsqd, and `record_batch` stays the one place rows are built."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import InputPartition

if TYPE_CHECKING:
    from .consumer import Held


@dataclass
class NsqPartition(InputPartition):
    """The rows of one Spark task, columnar (ids are nsqd's 16 hex characters; each row's
    nsqd is `nsqds[nsqd_index[i]]`, or `nsqds[0]` without an index). Columns are lists, or
    Arrow arrays on an executor that decoded nsqd's answer column-wise (frames.py)."""

    ids: Sequence[str]
    bodies: Sequence[bytes]
    timestamps_us: Sequence[int]
    attempts: Sequence[int]
    topic: str
    channel: str
    nsqds: list[str] | None = None
    nsqd_index: list[int] | None = None


def split(held: Sequence[Held], num_partitions: int, max_bytes: int) -> list[list[Held]]:
    """Contiguous groups: about len/num_partitions messages each, none above max_bytes unless
    one message alone is (a message is never split)."""
    if not held:
        return []
    total = sum(len(h.body) for h in held)
    n = max(1, min(len(held), max(num_partitions, -(-total // max_bytes))))
    per_count = -(-len(held) // n)
    groups: list[list[Held]] = []
    current: list[Held] = []
    size = 0
    for h in held:
        length = len(h.body)
        if current and (len(current) >= per_count or size + length > max_bytes):
            groups.append(current)
            current, size = [], 0
        current.append(h)
        size += length
    groups.append(current)
    return groups


def driver_partitions(
    held: Sequence[Held], topic: str, channel: str, num_partitions: int, max_bytes: int
) -> list[NsqPartition]:
    return [
        make_partition(group, topic, channel) for group in split(held, num_partitions, max_bytes)
    ]


def make_partition(held: Sequence[Held], topic: str, channel: str) -> NsqPartition:
    names: dict[str, int] = {}
    index = [names.setdefault(str(h.nsqd), len(names)) for h in held]
    return NsqPartition(
        ids=[h.id.decode("ascii", "replace") for h in held],
        bodies=[h.body for h in held],
        timestamps_us=[h.timestamp_ns // 1000 for h in held],
        attempts=[h.attempts for h in held],
        topic=topic,
        channel=channel,
        nsqds=list(names),
        nsqd_index=index,
    )


def record_batch(partition: NsqPartition, arrow_schema: Any) -> Any:
    """The partition's rows as one Arrow record batch with the columns of `arrow_schema`
    (its columns are lists, or Arrow arrays when an executor decoded them column-wise)."""
    import pyarrow as pa

    n = len(partition.ids)
    nsqds = partition.nsqds or [""]

    def constant(value: str) -> Any:
        return lambda t: pa.repeat(pa.scalar(value, t), n)

    def nsqd_column(t: Any) -> Any:
        if partition.nsqd_index is None or len(nsqds) == 1:
            return constant(nsqds[0])(t)
        dictionary = pa.DictionaryArray.from_arrays(
            pa.array(partition.nsqd_index, pa.int32()), pa.array(nsqds, pa.string())
        )
        return dictionary.cast(t)

    columns = {
        "id": lambda t: _column(partition.ids, t),
        "body": lambda t: _column(partition.bodies, t),
        "timestamp": lambda t: _column(partition.timestamps_us, t),
        "attempts": lambda t: _column(partition.attempts, t),
        "topic": constant(partition.topic),
        "channel": constant(partition.channel),
        "nsqd": nsqd_column,
    }
    arrays = [columns[f.name](f.type) for f in arrow_schema]
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)


def _column(values: Any, t: Any) -> Any:
    import pyarrow as pa

    if isinstance(values, pa.Array):
        return values if values.type == t else values.cast(t)
    return pa.array(values, t)
