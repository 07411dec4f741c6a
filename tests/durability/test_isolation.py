"""A topic flooded onto disk does not hold up delivery on another topic.

With --mem-queue-size=0 every message of the flooded topic is a disk write; meanwhile a PUB on
a second topic must reach its waiting consumer quickly. A loose bound, not a benchmark."""

from __future__ import annotations

import shutil
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import helpers

FLAGS = ("--mem-queue-size=0",)
FLOOD_BATCH = [b"h" * 1024] * 200  # 200 x 1 KiB per MPUB
SAMPLES = 20
BOUND = 1.0  # seconds, PUB sent -> message received
FLOOD_CAP = 400_000  # messages (~400 MiB on disk): the flood stops there in any case


def flood(addr: tuple[str, int], stop: threading.Event, sent: list[int]) -> None:
    with helpers.Client(addr) as conn:
        while not stop.is_set() and sent[0] < FLOOD_CAP:
            # one MPUB in flight per flooder: the flood lasts the samples (group commit made
            # pipelined MPUBs fast enough to reach the cap before them)
            conn.mpub_many("heavy", [FLOOD_BATCH], window=1)
            sent[0] += len(FLOOD_BATCH)


@pytest.fixture
def flood_dir(data_dir: Path) -> Iterator[Path]:
    yield data_dir
    shutil.rmtree(data_dir, ignore_errors=True)  # hundreds of MiB, pass or fail


def test_flooded_topic_does_not_stall_another(
    kind: str, flood_dir: Path, record_property: pytest.RecordProperty
) -> None:
    data_dir = flood_dir
    with helpers.running(kind, data_dir, *FLAGS) as daemon:
        with daemon.client() as conn:
            conn.sub("heavy", "ch")  # heavy has a channel but no consumer: all of it queues
        stop = threading.Event()
        sent = [0]
        floods = [
            threading.Thread(target=flood, args=(daemon.addr, stop, sent), daemon=True)
            for _ in range(2)
        ]
        for t in floods:
            t.start()
        try:
            with daemon.client() as consumer, daemon.client() as producer:
                # RDY 1: the frame is flushed at once (no output-buffer-timeout wait)
                consumer.sub("light", "ch", rdy=1)
                helpers.wait_for(lambda: sent[0] >= 2000, 5.0)  # the flood is under way
                rtts = []
                for i in range(SAMPLES):
                    start = time.monotonic()
                    producer.send(helpers.command("PUB light", b"ping-%d" % i))
                    msg = consumer.message(timeout=5.0)
                    rtts.append(time.monotonic() - start)
                    assert msg.body == b"ping-%d" % i
                    consumer.fin(msg.id)
                    producer.expect_ok()
                    time.sleep(0.02)
                flooded = sent[0]
                assert any(t.is_alive() for t in floods), "the flood ended before the samples"
        finally:
            stop.set()
            for t in floods:
                t.join(30)
        assert not any(t.is_alive() for t in floods)
    record_property("rtt_max_ms", round(max(rtts) * 1000, 1))
    record_property("rtt_median_ms", round(statistics.median(rtts) * 1000, 1))
    print(
        f"{kind}: PUB->deliver median {statistics.median(rtts) * 1000:.1f} ms, "
        f"max {max(rtts) * 1000:.1f} ms while {flooded} x 1 KiB messages were flooded"
    )
    assert flooded >= 4000, "the flood did not run"
    assert max(rtts) < BOUND, f"round trips (s): {[round(r, 3) for r in rtts]}"
