"""One data directory, two implementations: what the Go nsqd wrote ours delivers, and the
other way round (disk queue files, their metadata and nsqd.dat are the same format)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from . import helpers

N = 2000
FLAGS = ("--mem-queue-size=100", "--max-bytes-per-file=65536")  # memory, disk, several files


@pytest.mark.parametrize(("writer", "reader"), [("reference", "ours"), ("ours", "reference")])
def test_other_daemon_delivers_everything(
    writer: str, reader: str, reference: Path, data_dir: Path
) -> None:
    with_channel = [b"swap-a-%05d" % i for i in range(N)]
    without_channel = [b"swap-b-%05d" % i for i in range(N)]

    daemon = helpers.start(writer, data_dir, *FLAGS)
    consumer = daemon.client()
    consumer.sub("swap_a", "ch", rdy=0)
    with daemon.client() as conn:
        for topic, sent in (("swap_a", with_channel), ("swap_b", without_channel)):
            for b in sent[:50]:
                conn.pub(topic, b)
            conn.mpub_many(topic, [sent[i : i + 250] for i in range(50, N, 250)])
    consumer.rdy(10)
    first = consumer.messages(10)
    consumer.rdy(0)
    consumer.fin_many(m.id for m in first[:5])  # the other 5 stay in flight
    consumer.barrier()
    daemon.stop()
    consumer.close()
    assert helpers.queue_files(data_dir, "swap_a:ch"), helpers.data_files(data_dir)
    assert helpers.queue_files(data_dir, "swap_b"), helpers.data_files(data_dir)

    finished = {m.body for m in first[:5]}
    in_flight = {m.body for m in first[5:]}
    with helpers.running(reader, data_dir, *FLAGS) as daemon2:
        with daemon2.client() as conn:
            conn.sub("swap_a", "ch", rdy=500)
            got_a = conn.consume(N - 5, timeout=15)
        with daemon2.client() as conn:
            conn.sub("swap_b", "late", rdy=500)
            got_b = conn.consume(N, timeout=15)
        log = daemon2.log()

    counts = Counter(m.body for m in got_a)
    assert set(counts) == set(with_channel) - finished
    assert max(counts.values()) == 1
    assert {m.body: m.attempts for m in got_a if m.attempts != 1} == dict.fromkeys(in_flight, 2)
    assert sorted(helpers.bodies(got_b)) == without_channel
    assert all(m.attempts == 1 for m in got_b)
    errors = [line for line in log.splitlines() if "ERROR" in line or "FATAL" in line]
    assert not errors, f"{reader} complained about {writer}'s files:\n" + "\n".join(errors)
