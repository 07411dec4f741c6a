"""The data path lock: one daemon per --data-path (a non-blocking flock on the directory)."""

from __future__ import annotations

from pathlib import Path

import pytest

from . import helpers


@pytest.mark.parametrize(
    ("first", "second"), [("ours", "ours"), ("reference", "ours"), ("ours", "reference")]
)
def test_second_daemon_on_same_data_path_fails(
    first: str, second: str, reference: Path, data_dir: Path
) -> None:
    with helpers.running(first, data_dir) as daemon:
        with daemon.client() as conn:
            conn.pub("locked", b"still here")
        other = helpers.spawn(second, data_dir)
        try:
            rc = other.proc.wait(10)
        finally:
            other.kill()
        log = other.log()
        assert rc == 1, f"second {second} nsqd: exit {rc}\n{log}"
        assert "failed to lock data-path" in log, log
        assert daemon.alive()
        with daemon.client() as conn:  # the first one is unaffected
            conn.sub("locked", "ch", rdy=1)
            assert conn.message().body == b"still here"
    # the lock goes with the process: the path is usable again
    with helpers.running(second, data_dir) as again, again.client() as conn:
        conn.pub("locked", b"next")
