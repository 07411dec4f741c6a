"""A record log compacted by a forked child (RecordLog.replace_in_child, storage/child.py), on
real files and real processes: the child writes what the memory held at the fork, the records
appended meanwhile follow it in the new file, a failed child or a stop while it runs leaves
the file as it was, and a child's leftover file is removed at the next load."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from nsqd.storage.records import RecordLog, read


def _log(path: Path) -> RecordLog:
    log = RecordLog(str(path / "x.log"), "x.log", sync_every=1, sync_timeout=1.0)
    log.load()
    return log


def _payloads(log: RecordLog) -> list[bytes]:
    with open(log.path, "rb") as f:
        return read(f.read(), "test").payloads


def _gated(items: list[bytes], gate: Path) -> Iterator[bytes]:
    """The snapshot as the child sees it, once `gate` exists (the test decides when)."""
    deadline = time.monotonic() + 30
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    yield from items


def _until_done(log: RecordLog, sizes: list[int]) -> None:
    deadline = time.monotonic() + 30
    while log.replacing and time.monotonic() < deadline:
        log.flush()
        time.sleep(0.005)
    assert not log.replacing and sizes, "the child never finished"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_records_appended_meanwhile_follow_the_childs(tmp_path: Path) -> None:
    log = _log(tmp_path)
    for i in range(100):
        log.append(b"old %d" % i)
    log.flush()
    memory = [b"snap %d" % i for i in range(3)]
    sizes: list[int] = []
    log.replace_in_child(_gated(memory, tmp_path / "go"), sizes.append)
    memory.append(b"changed after the fork")  # the child's copy does not have it
    log.append(b"new 1")
    log.flush()
    log.append(b"new 2")
    log.flush()
    assert log.replacing and not sizes
    assert _payloads(log)[-2:] == [b"new 1", b"new 2"] and len(_payloads(log)) == 102
    (tmp_path / "go").touch()
    _until_done(log, sizes)
    want = [b"snap 0", b"snap 1", b"snap 2", b"new 1", b"new 2"]
    assert _payloads(log) == want
    assert sizes == [os.path.getsize(log.path)] and log.size == sizes[0]
    log.append(b"after")
    log.flush()
    assert _payloads(log) == [*want, b"after"]
    assert sorted(os.listdir(tmp_path)) == ["go", "x.log"]
    log.close()


def _failing() -> Iterator[bytes]:
    yield b"a"
    raise RuntimeError("the snapshot broke")


def test_a_failed_child_leaves_the_file_as_it_was(tmp_path: Path, caplog) -> None:
    log = _log(tmp_path)
    log.append(b"kept")
    log.flush()
    sizes: list[int] = []
    with caplog.at_level(logging.ERROR, logger="nsqd"):
        log.replace_in_child(_failing(), sizes.append)
        log.append(b"meanwhile")
        _until_done(log, sizes)
    assert _payloads(log) == [b"kept", b"meanwhile"]
    assert sizes == [os.path.getsize(log.path)]
    assert "child process failed" in caplog.text
    assert os.listdir(tmp_path) == ["x.log"]
    log.close()


def test_close_stops_a_child_at_work(tmp_path: Path) -> None:
    log = _log(tmp_path)
    log.append(b"kept")
    log.flush()
    log.replace_in_child(_gated([b"never"], tmp_path / "go"), lambda size: None)
    child = log._child
    assert child is not None and _alive(child.pid)
    log.close()
    assert not _alive(child.pid)
    assert os.listdir(tmp_path) == ["x.log"]
    assert _payloads(_log(tmp_path)) == [b"kept"]


def test_a_childs_leftover_file_is_removed_at_load(tmp_path: Path) -> None:
    """A daemon killed while its child wrote: the child dies with it (PR_SET_PDEATHSIG) and
    its half-written file is only litter."""
    log = _log(tmp_path)
    log.append(b"kept")
    log.close()
    (tmp_path / "x.log.tmp-12345").write_bytes(b"half a snapshot")
    again = _log(tmp_path)
    assert os.listdir(tmp_path) == ["x.log"]
    assert _payloads(again) == [b"kept"]
    again.close()


@pytest.mark.parametrize("first", [True, False])
def test_a_second_rewrite_replaces_a_running_one(tmp_path: Path, first: bool) -> None:
    """replace (at once) or another replace_in_child while one runs: the running one is
    stopped, so two children never race for the file."""
    log = _log(tmp_path)
    log.append(b"x")
    log.flush()
    log.replace_in_child(_gated([b"stale"], tmp_path / "go"), lambda size: None)
    child = log._child
    assert child is not None
    sizes: list[int] = []
    if first:
        log.replace([b"now"])
    else:
        log.replace_in_child(iter([b"now"]), sizes.append)
        _until_done(log, sizes)
    assert not _alive(child.pid)
    assert _payloads(log) == [b"now"]
    log.close()


def test_no_fork_compacts_at_once(tmp_path: Path, monkeypatch, caplog) -> None:
    """fork() refused (strict overcommit, a process limit): the rewrite happens in the
    daemon as it did before, and the log goes on."""

    def refuse() -> int:
        raise OSError(12, "Cannot allocate memory")

    log = _log(tmp_path)
    log.append(b"old")
    log.flush()
    monkeypatch.setattr(os, "fork", refuse)
    sizes: list[int] = []
    with caplog.at_level(logging.ERROR, logger="nsqd"):
        log.replace_in_child(iter([b"snap"]), sizes.append)
    assert not log.replacing and sizes == [os.path.getsize(log.path)]
    assert "cannot rewrite in a child process" in caplog.text
    log.append(b"after")
    log.flush()
    assert _payloads(log) == [b"snap", b"after"]
    log.close()


def test_the_child_holds_none_of_the_parents_files(tmp_path: Path) -> None:
    """The data path's lock (a flock, shared by a forked child's copy of its fd) and every
    other file stay the parent's: once the parent lets the lock go, another process takes
    it while the child still writes (a daemon killed during a rewrite, started again at
    once, was refused its data path by the dying child)."""
    import fcntl
    import subprocess
    import sys

    from nsqd.storage.child import ChildWrite

    lock = os.open(tmp_path, os.O_RDONLY)
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    gate = tmp_path / "gate"
    child = ChildWrite(str(tmp_path / "out"), _gated([b"x"], gate), 0o644)
    try:
        os.close(lock)  # the parent's copy: only a child's could hold it now
        probe = (
            "import fcntl, os, sys\n"
            "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        )
        taken = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], timeout=30)
        assert not child.finished()  # still at work (waiting for the gate)
        assert taken.returncode == 0, "the child held the lock"
    finally:
        gate.touch()
        deadline = time.monotonic() + 30
        while not child.finished() and time.monotonic() < deadline:
            time.sleep(0.01)
    assert child.succeeded
    child.abandon()  # its temporary file
