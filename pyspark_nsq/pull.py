"""The executor side of reading from our nsqds: a Spark task pulls its partition straight from
one nsqd over HTTP (`POST /channel/receive`, ours: nsqd/http/messages.py) under a named lease,
and turns the messages into one Arrow record batch. The bodies never pass through the driver;
the driver finishes the whole lease after Spark commits the batch (leased.py).

A task may run more than once (a retry, speculation, a batch replayed after a driver restart):
every receive says `again=true`, so a second run gets back first what the lease still holds,
the same messages, rather than a second set while the first stays leased (and would be finished
without ever being written). An nsqd that does not answer is asked again every
`RETRY_PAUSE` seconds for `retry_ms`; then the task fails, and with it the batch: a batch never
commits with a partition that was not read."""

from __future__ import annotations

import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import InputPartition

from . import frames
from .planning import NsqPartition

log = logging.getLogger("pyspark_nsq")
RETRY_PAUSE = 0.5


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
    return decode(receive(p), p)


def describe(p: LeasePartition) -> dict[str, Any]:
    return {"nsqd": p.nsqd, "lease": p.lease, "n": p.n, "max_bytes": p.max_bytes}
