"""The driver side of executor-side reading (our nsqds): deciding a batch's share of each nsqd,
and finishing it after the commit. No message passes through here: the executors take them
(pull.py) and the driver only finishes named leases.

A batch's plan is part of its end offset, which Spark writes to the checkpoint before running
the batch: `{"seq", "token", "batch", "leases": [[nsqd, http, [n per partition], max bytes per
partition], ...]}`. `token` is drawn once per query (initialOffset) and `batch` counts the
batches that have leases, so a lease `<token>-<batch>-<partition>` is unique to one query and
one partition, and the same after a driver restart: a replayed batch asks its nsqds again under
the same names and gets the same messages (`again=true`). Spark hands the committed end to
`latestOffset` (and one batch late to `commit`): its leases are then finished whole. A lease
that no longer exists (the nsqd restarted, or the lease timed out) finishes nothing, and is no
error: nsqd redelivers those messages, duplicates a row's `(nsqd, id)` identifies."""

from __future__ import annotations

import logging
import secrets
import time
from typing import Any

from .addresses import Address
from .http import Producer, channel_counts, finish_lease
from .options import SourceOptions
from .pull import LeasePartition

log = logging.getLogger("pyspark_nsq")
MAX_N = 1_000_000  # nsqd's cap on one receive


def new_token() -> str:
    return secrets.token_hex(6)


def offset(seq: int, token: str, batch: int, leases: list[Any]) -> dict[str, Any]:
    """The one place offsets are built: the same key order always (Spark compares them as
    JSON text)."""
    return {"seq": seq, "token": token, "batch": batch, "leases": leases}


def lease_name(token: str, batch: int, index: int) -> str:
    return f"{token}-{batch}-{index}"


def shares(total: int, weights: list[int]) -> list[int]:
    """`total` spread over the weights in proportion (floor, the rest one each from the
    first), none above its weight."""
    whole = sum(weights)
    if whole <= total:
        return list(weights)
    out = [total * w // whole for w in weights]
    for i in range(len(out)):
        if sum(out) >= total:
            break
        if out[i] < weights[i]:
            out[i] += 1
    return out


class LeasedReader:
    """Plans and finishes the executor-side share of each batch."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._finished: set[tuple[str, int]] = set()
        self._quota: dict[Address, int] | None = None  # Trigger.AvailableNow: left per nsqd
        self.finished = 0  # messages finished (this process)
        self.planned = 0
        self.fin_errors = 0

    @property
    def _timeout(self) -> float:
        return self.opts.connect_timeout_ms / 1000

    # -- finishing ----------------------------------------------------------------------

    def finish(self, off: dict[str, Any] | None) -> int:
        """FIN the leases of the batch ending at `off` (committed by Spark); how many."""
        if not off or not off.get("leases"):
            return 0
        key = (str(off["token"]), int(off["batch"]))
        if key in self._finished:
            return 0
        done = 0
        for tcp, http, counts, _cap in off["leases"]:
            for index in range(len(counts)):
                name = lease_name(key[0], key[1], index)
                try:
                    ok = finish_lease(
                        Address.parse(http), self.opts.topic, self.opts.channel, name, self._timeout
                    )
                except (OSError, ValueError) as exc:  # redelivered later: a duplicate
                    self.fin_errors += 1
                    log.warning("nsqd %s: FIN of lease %s failed: %s", http, name, exc)
                    continue
                done += ok
                self._count_down(Address.parse(tcp), ok)
        self._finished.add(key)
        self.finished += done
        return done

    def _count_down(self, nsqd: Address, n: int) -> None:
        if self._quota is not None and nsqd in self._quota:
            self._quota[nsqd] = max(0, self._quota[nsqd] - n)

    # -- planning -----------------------------------------------------------------------

    def available(self, producer: Producer) -> int:
        """Messages the nsqd's channel holds ready now (its depth, /stats), within the
        availableNow quota; 0 when /stats does not answer."""
        try:
            counts = channel_counts(
                producer.http, self.opts.topic, self.opts.channel, self._timeout
            )
        except (OSError, ValueError) as exc:
            log.debug("nsqd %s: /stats: %s", producer.http, exc)
            return 0
        depth = 0 if counts is None else counts.depth
        if self._quota is not None:
            depth = min(depth, self._quota.get(producer.tcp, 0))
        return depth

    def plan(self, producers: list[Producer], max_rows: int | None) -> list[Any]:
        """Each nsqd's share of the next batch: [[nsqd, http, [n per partition], max bytes per
        partition]]; [] when none has a message ready."""
        avail = [self.available(p) for p in producers]
        if max_rows is not None:
            avail = shares(max_rows, avail)
        # Enough partitions per nsqd to fill maxBytesPerTrigger with maxBytesPerPartition
        # each (numPartitions at least): message sizes are unknown until they are read.
        opts = self.opts
        fill = -(-opts.max_bytes_per_trigger // opts.max_bytes_per_partition)
        most = max(opts.num_partitions, -(-fill // max(1, sum(1 for a in avail if a))))
        counts: list[list[int]] = []
        for a in avail:
            parts = min(most, a)
            base, extra = divmod(a, parts) if parts else (0, 0)
            counts.append([min(MAX_N, base + (i < extra)) for i in range(parts)])
        total_parts = sum(len(c) for c in counts)
        if not total_parts:
            return []
        cap = max(
            1,
            min(self.opts.max_bytes_per_partition, self.opts.max_bytes_per_trigger // total_parts),
        )
        self.planned += sum(avail)
        return [
            [str(p.tcp), str(p.http), c, cap] for p, c in zip(producers, counts, strict=True) if c
        ]

    def partitions(self, end: dict[str, Any]) -> list[LeasePartition]:
        token, batch = str(end.get("token", "")), int(end.get("batch", 0))
        return [
            LeasePartition(
                nsqd=tcp,
                http=http,
                topic=self.opts.topic,
                channel=self.opts.channel,
                lease=lease_name(token, batch, index),
                n=n,
                max_bytes=cap,
                vt_ms=self.opts.lease_timeout_ms,
                retry_ms=self.opts.executor_retry_ms,
                timeout_s=max(30.0, self._timeout),
            )
            for tcp, http, counts, cap in end.get("leases") or []
            for index, n in enumerate(counts)
        ]

    # -- Trigger.AvailableNow -----------------------------------------------------------

    def set_quota(self, producers: list[Producer]) -> int:
        """Read no more than each nsqd holds now (topic and channel depth, in flight)."""
        self._quota = {}
        for p in producers:
            try:
                counts = channel_counts(p.http, self.opts.topic, self.opts.channel, self._timeout)
            except (OSError, ValueError):
                counts = None
            self._quota[p.tcp] = (
                0 if counts is None else counts.topic_depth + counts.depth + counts.in_flight
            )
        return sum(self._quota.values())

    def quota_left(self) -> int:
        return 0 if self._quota is None else sum(self._quota.values())

    def wait_available(self, producers: list[Producer], idle: float) -> bool:
        """availableNow with quota left but nothing ready (messages in flight elsewhere come
        back after their timeout): poll up to `idle` s; on giving up, the quota is dropped."""
        deadline = time.monotonic() + idle
        while time.monotonic() < deadline:
            if any(self.available(p) for p in producers):
                return True
            time.sleep(0.2)
        log.warning(
            "availableNow: %d messages did not come back, ending the run", self.quota_left()
        )
        self._quota = dict.fromkeys(self._quota or {}, 0)
        return False
