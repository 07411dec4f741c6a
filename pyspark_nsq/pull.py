"""The executor side of reading from our nsqds: a Spark task pulls its partition straight from
one nsqd over HTTP (`POST /channel/receive`, ours: nsqd/http/messages.py) under a named lease,
and turns the messages into one Arrow record batch. The bodies never pass through the driver;
the driver finishes the whole lease after Spark commits the batch (leased.py).

A task may run more than once (a retry, speculation, a batch replayed after a driver restart):
every receive says `again=true`, so a second run gets back first what the lease still holds,
the same messages, rather than a second set while the first stays leased (and would be finished
without ever being written). An nsqd that does not answer is asked again every
`RETRY_PAUSE` seconds for `retry_ms`; then the task fails, and with it the batch: a batch never
commits with a partition that was not read.

A large partition is read in `chunks` receives, each under a lease of its own
(`<lease>-<chunk>`, a share of `n` and of `max_bytes`), the next one received while Spark
writes the rows of this one: the nsqd's work and the executor's overlap instead of taking
turns. The plan says how many (leased.py), so the driver finishes the same leases."""

from __future__ import annotations

import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from pyspark.sql.datasource import InputPartition

from . import frames
from .planning import NsqPartition

log = logging.getLogger("pyspark_nsq")
RETRY_PAUSE = 0.5
CHUNK_MESSAGES = 10_000  # a partition is read in chunks of at least this many messages
MAX_CHUNKS = 4


class PullError(RuntimeError):
    """A partition could not be read from its nsqd."""


@dataclass
class LeasePartition(InputPartition):
    """What one task takes from one nsqd: at most `n` messages and about `max_bytes` of
    bodies, under the lease `lease` (`<stream token>-<batch>-<partition>`)."""

    nsqd: str  # the TCP address: the rows' `nsqd` column
    http: str
    topic: str
    channel: str
    lease: str
    n: int
    max_bytes: int
    vt_ms: int
    retry_ms: int
    timeout_s: float
    chunks: int = 1


def chunk_counts(counts: list[int]) -> list[int]:
    """How many receives (chunks) each partition of these message counts is read in."""
    return [max(1, min(MAX_CHUNKS, n // CHUNK_MESSAGES)) for n in counts]


def chunk_leases(lease: str, chunks: int) -> list[str]:
    """The leases a partition's chunks are received under (the partition's own when one)."""
    return [lease] if chunks <= 1 else [f"{lease}-{c}" for c in range(chunks)]


def chunked(p: LeasePartition) -> list[LeasePartition]:
    """The receives of one partition: each chunk a share of `n` and of `max_bytes`."""
    if p.chunks <= 1:
        return [p]
    base, extra = divmod(p.n, p.chunks)
    return [
        replace(p, lease=lease, n=base + (c < extra), max_bytes=max(1, p.max_bytes // p.chunks))
        for c, lease in enumerate(chunk_leases(p.lease, p.chunks))
    ]


def receive_url(p: LeasePartition) -> str:
    query = urllib.parse.urlencode(
        {
            "topic": p.topic,
            "channel": p.channel,
            "n": p.n,
            "vt": p.vt_ms,
            "lease": p.lease,
            "max_bytes": p.max_bytes,
            "again": "true",
        }
    )
    return f"http://{p.http}/channel/receive?{query}"


def receive(p: LeasePartition) -> bytes:
    """The answer of one receive (message frames), asked again until `retry_ms` passed."""
    request = urllib.request.Request(
        receive_url(p), data=b"", method="POST", headers={"Accept": "application/octet-stream"}
    )
    deadline = time.monotonic() + p.retry_ms / 1000
    while True:
        try:
            with urllib.request.urlopen(request, timeout=p.timeout_s) as response:
                return response.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:200].decode("utf-8", "replace")
            if exc.code == 400:  # a bad argument (vt above --max-msg-timeout): no use retrying
                raise PullError(f"nsqd {p.http} refused the receive: {detail}") from None
            error: Exception = PullError(f"nsqd {p.http}: HTTP {exc.code} {detail}")
        except (OSError, ValueError) as exc:  # refused, reset, timed out: maybe restarting
            error = exc
        if time.monotonic() >= deadline:
            raise PullError(
                f"nsqd {p.http} did not answer for {p.retry_ms} ms (lease {p.lease}): {error}"
            ) from error
        log.warning("nsqd %s: %s; asking again", p.http, error)
        time.sleep(RETRY_PAUSE)


def decode(raw: bytes, p: LeasePartition) -> NsqPartition:
    """nsqd's message frames back to back, as the columns of the partition's rows (Arrow
    arrays, or lists where the columnar decoder leaves it to the per-message one)."""
    rows = frames.decode(raw)
    return NsqPartition(
        ids=rows.ids,
        bodies=rows.bodies,
        timestamps_us=rows.timestamps_us,
        attempts=rows.attempts,
        topic=p.topic,
        channel=p.channel,
        nsqds=[p.nsqd],
    )


def pull(p: LeasePartition) -> NsqPartition:
    """One receive: a partition read whole (one chunk), or one chunk of it."""
    return decode(receive(p), p)


def pull_chunks(p: LeasePartition) -> Iterator[NsqPartition]:
    """A partition's rows chunk by chunk, in order, the next chunk received (by a thread: it
    mostly waits on the nsqd) while the caller works on this one."""
    parts = chunked(p)
    if len(parts) == 1:
        yield pull(p)
        return
    with ThreadPoolExecutor(1, thread_name_prefix="nsq-receive") as pool:
        ahead = pool.submit(receive, parts[0])
        for i, part in enumerate(parts):
            raw = ahead.result()
            if i + 1 < len(parts):
                ahead = pool.submit(receive, parts[i + 1])
            yield decode(raw, part)


def describe(p: LeasePartition) -> dict[str, Any]:
    return {
        "nsqd": p.nsqd,
        "lease": p.lease,
        "n": p.n,
        "max_bytes": p.max_bytes,
        "chunks": p.chunks,
    }
