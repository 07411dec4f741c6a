"""Disk faults while the daemon runs, ours beside the Go nsqd: a file that cannot be written
costs what it must and no more (the clean stop still writes every queue, ...)."""

from __future__ import annotations

from pathlib import Path

from . import helpers


def test_a_clean_stop_writes_the_queues_when_nsqd_dat_cannot_be_written(
    kind: str, data_dir: Path
) -> None:
    """nsqd.dat turned into a directory under the running daemon: its write at the stop fails
    (logged, as nsqd's "failed to persist metadata"), and the messages held in memory still go
    to the disk queue and come back after a restart, as with nsqd; the exit is clean."""
    topic = "datdir"
    bodies = [b"in-memory-%03d" % i for i in range(50)]
    daemon = helpers.start(kind, data_dir)
    with daemon.client() as conn:
        conn.sub(topic, "ch", rdy=0)
    with daemon.client() as conn:
        for body in bodies:
            conn.pub(topic, body)
    assert helpers.wait_for((data_dir / "nsqd.dat").is_file, 5)
    (data_dir / "nsqd.dat").unlink()
    (data_dir / "nsqd.dat").mkdir()
    rc, _ = daemon.terminate()
    assert rc == 0, daemon.log_tail()
    assert "failed to persist metadata" in daemon.log()
    (data_dir / "nsqd.dat").rmdir()
    with helpers.running(kind, data_dir) as again, again.client() as conn:
        conn.sub(topic, "ch", rdy=100)
        got = conn.consume(len(bodies), timeout=5, quiet=0.2, idle=2)
    assert sorted(helpers.bodies(got)) == bodies
