"""examples/spark: the events-per-minute job on generated events, as the README runs it."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path
from typing import Any

from spark_support import REPO_ROOT, Proc, publish

sys.path.insert(0, str(REPO_ROOT / "examples" / "spark"))

import events_per_minute
import publish_events


def test_events_per_minute_into_parquet(spark: Any, nsqd: Proc, topic: str, tmp_path: Path) -> None:
    start = dt.datetime(2026, 1, 1, 10, 0, tzinfo=dt.UTC)
    publish(nsqd, topic, publish_events.events(start, minutes=5, per_minute=300))
    args = argparse.Namespace(
        nsqd=nsqd.tcp,
        topic=topic,
        channel="epm",
        out=str(tmp_path / "out"),
        checkpoint=str(tmp_path / "ckpt"),
        available_now=True,
    )
    query = events_per_minute.start(spark, args, nsqdHttp=nsqd.http, availableNowIdleMs="3000")
    assert query.awaitTermination(120)
    rows = spark.read.parquet(args.out).orderBy("minute", "kind").collect()
    got = {(r.minute.replace(tzinfo=dt.UTC), r.kind): r.events for r in rows}
    # the watermark (latest event - 1 minute) has closed the first three minutes
    want = {
        (start + dt.timedelta(minutes=m), kind): 100
        for m in range(3)
        for kind in ("buy", "click", "view")
    }
    assert got == want
