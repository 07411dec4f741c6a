"""A change of --workers on a --data-path that held another count (nsqd/group/resize.py): one
nsqd on a group's folder, a group on one nsqd's, fewer workers than partitions, `auto` on
fewer cores. Nothing published is left where no worker reads it: a partition that holds
messages refuses the start (auto rises instead), an empty one is removed with its topics and
channels kept, and one nsqd and worker 0 hand their files to each other."""

from __future__ import annotations

import json
import os
import random
import struct
import urllib.request
from pathlib import Path

from nsqd.cli import resolve
from nsqd.engine.message import Message
from nsqd.group import merge, missed, resize
from nsqd.storage import journal, records
from nsqd.storage.diskqueue import DiskQueue
from nsqd.storage.expiries import ExpiryFile
from tests.ops.conftest import (
    OURS,
    START_TIMEOUT,
    STOP_TIMEOUT,
    V2,
    free_ports,
    http_post,
    nsqd_process,
    port_open,
    stats_channel,
    wait_until,
)

from .conftest import Group, run_to_exit


def _drain(conn: V2, n: int) -> list[bytes]:
    """n messages from a subscribed connection, each FIN'd: their bodies."""
    got = []
    while len(got) < n:
        kind, data = conn.frame()
        if kind == 0 and data == b"_heartbeat_":
            conn.sendall(b"NOP\n")
            continue
        assert kind == 2, (kind, data)
        conn.fin(data[10:26])
        got.append(data[26:])
    return got


def _stats(http: int) -> dict:
    url = f"http://127.0.0.1:{http}/stats?format=json"
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


def _lone(group: Group, *flags: str) -> nsqd_process.subprocess.Popen[bytes]:
    """One nsqd (no --workers) on the group's ports and folder, listening."""
    argv = [*OURS, *nsqd_process.address_flags(group.tcp, group.http, group.data), *flags]
    proc = nsqd_process.launch(argv, group.log, append=True)
    wait_until(lambda: port_open(group.http), START_TIMEOUT, "one nsqd listening")
    return proc


def test_a_group_shrinks_to_one_nsqd_and_grows_again_with_every_message(group: Group) -> None:
    group.start()
    base = f"http://127.0.0.1:{group.http}"
    assert http_post(f"{base}/topic/create?topic=t")[0] == 200
    assert http_post(f"{base}/channel/create?topic=t&channel=c")[0] == 200
    assert group.post(1, "topic/create?topic=solo") == 200  # in worker 1 alone
    with group.pin(1) as pub:
        for i in range(3):
            pub.pub("t", b"w1-%d" % i)
        pub.pub("held", b"h1")  # a topic no channel reads: its own queue
    with group.pin(0) as pub:
        pub.pub("t", b"w0-0")
        pub.pub("held", b"h0")
    assert http_post(f"{base}/channel/pause?topic=t&channel=c")[0] == 200
    assert group.stop() == 0

    proc = _lone(group)  # worker 1's messages merged into worker 0's, then taken up
    try:
        stats = _stats(group.http)
        assert sorted(t["topic_name"] for t in stats["topics"]) == ["held", "solo", "t"]
        channel = stats_channel(stats, "t", "c")
        assert (channel["depth"], channel["paused"]) == (4, True)
        assert next(t for t in stats["topics"] if t["topic_name"] == "held")["depth"] == 2
        assert sorted(p.name for p in group.data.iterdir() if p.is_dir()) == []
        assert http_post(f"{base}/channel/unpause?topic=t&channel=c")[0] == 200
        with V2(group.tcp) as sub:
            sub.sub("t", "c")
            sub.rdy(10)
            assert sorted(_drain(sub, 4)) == [b"w0-0", b"w1-0", b"w1-1", b"w1-2"]
        for i in range(2):
            assert http_post(f"{base}/pub?topic=t", b"lone-%d" % i)[0] == 200
    finally:
        assert nsqd_process.terminate(proc, STOP_TIMEOUT) == 0
    text = group.log_text()
    assert "group: worker-1/ merged into worker-0/" in text
    assert "group: worker-0/'s files moved up into" in text

    # and back: one nsqd's files go down into worker 0, read from either worker
    group.start()
    assert not (group.data / "nsqd.dat").exists()
    with group.pin(1) as sub:
        sub.sub("t", "c")
        sub.rdy(10)
        assert sorted(_drain(sub, 2)) == [b"lone-0", b"lone-1"]
    with group.pin(0) as sub:
        sub.sub("held", "late")
        sub.rdy(10)
        assert sorted(_drain(sub, 2)) == [b"h0", b"h1"]
    assert "group: one nsqd's files in" in group.log_text()


def test_auto_on_fewer_cores_merges_the_partitions_beyond(group: Group) -> None:
    """`--workers=auto` on a host given one core, where a group of two ran: one nsqd, with
    what worker 1 held (the same channel in both: its queue appended to worker 0's)."""
    group.start()
    for k in (0, 1):
        with group.pin(k) as pub:
            for i in range(5):
                pub.pub("t", b"w%d-%d" % (k, i))
    with group.pin(1) as sub:
        sub.sub("t", "c")  # made in both workers; each one's topic hands its 5 over
    assert group.stop() == 0
    (group.data / "worker-3").mkdir()  # an empty partition beyond: removed
    argv = ["taskset", "-c", "0", *OURS, "--workers=auto"]
    argv += nsqd_process.address_flags(group.tcp, group.http, group.data)
    proc = nsqd_process.launch(argv, group.log, append=True)
    try:
        wait_until(lambda: port_open(group.http), START_TIMEOUT, "one nsqd listening")
        assert not (group.data / "worker-3").exists()
        with V2(group.tcp) as sub:
            sub.sub("t", "c")
            sub.rdy(20)
            expected = sorted(b"w%d-%d" % (k, i) for k in (0, 1) for i in range(5))
            assert sorted(_drain(sub, 10)) == expected
    finally:
        assert nsqd_process.terminate(proc, STOP_TIMEOUT) == 0
    assert "group: t:c: 5 messages from" in group.log_text()


def test_a_move_cut_short_goes_on_at_the_next_start(group: Group) -> None:
    """A kill in the middle of taking one nsqd's files down left some in worker-0/: the next
    start moves the rest (nsqd.dat, moved last, is still at the top)."""
    proc = _lone(group)
    try:
        for i in range(3):
            assert http_post(f"http://127.0.0.1:{group.http}/pub?topic=t", b"m%d" % i)[0] == 200
        assert http_post(f"http://127.0.0.1:{group.http}/channel/create?topic=t&channel=c")[0]
    finally:
        assert nsqd_process.terminate(proc, STOP_TIMEOUT) == 0
    (group.data / "worker-0").mkdir()
    moved = sorted(p.name for p in group.data.glob("t.diskqueue.*"))
    assert moved
    for name in moved:  # the topic's queue files went first; its channel's and nsqd.dat did not
        os.rename(group.data / name, group.data / "worker-0" / name)
    group.start()
    assert not (group.data / "nsqd.dat").exists()
    with group.pin(1) as sub:
        sub.sub("t", "c")
        sub.rdy(10)
        assert sorted(_drain(sub, 3)) == [b"m0", b"m1", b"m2"]


def test_two_partitions_of_one_name_are_refused(tmp_path: Path) -> None:
    """One nsqd's files at the top and worker 0's own: no rename joins them."""
    (tmp_path / "nsqd.dat").write_text('{"topics":null,"version":"1.3.0"}')
    (tmp_path / "worker-0").mkdir()
    (tmp_path / "worker-0" / "nsqd.dat").write_text('{"topics":null,"version":"1.3.0"}')
    opts = resolve(["--workers=2", f"--data-path={tmp_path}"])
    assert resize.settle(opts) == (
        f"--workers=2: {tmp_path} and {tmp_path / 'worker-0'} both hold nsqd.dat: the data of "
        "two nsqds; move one away, or start with the --workers that wrote it"
    )
    assert (tmp_path / "nsqd.dat").exists()


def _record(msg_id: bytes, body: bytes) -> bytes:
    """A disk queue record as nsqd writes one: timestamp, attempts, id, body."""
    return struct.pack(">qH", 1, 1) + msg_id + body


def _queue(path: Path, name: str, ids: list[bytes]) -> None:
    queue = DiskQueue(name, path, 1 << 20, 0, 1 << 20, 1, 1.0)
    for msg_id in ids:
        queue.put(_record(msg_id, b"body-" + msg_id))
    queue.close()


def _unread(path: Path, name: str) -> list[bytes]:
    queue = DiskQueue(name, path, 1 << 20, 0, 1 << 20, 1 << 30, 1e9)
    got = []
    while (record := queue.read()) is not None:
        got.append(record[10:26])
    queue.close()
    return got


def _journal(path: Path, name: str, held: list[bytes], deferred: list[bytes]) -> None:
    payloads = [journal._held([Message(i, b"j", 1, 1) for i in held])] if held else []
    payloads += [journal._deferred([Message(i, b"j", 1, 1)], 99) for i in deferred]
    data = records.FILE_MAGIC + b"".join(records.frame(p) for p in payloads)
    (path / f"{name}{journal.SUFFIX}").write_bytes(data)


def _ids(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}{i}".encode().ljust(16, b".") for i in range(n)]


def test_a_merged_partitions_queues_and_journals_keep_every_message(tmp_path: Path) -> None:
    source, target = tmp_path / "worker-1", tmp_path / "worker-0"
    source.mkdir()
    target.mkdir()
    _queue(target, "t", _ids("t", 2))
    _queue(source, "t", _ids("s", 3))
    _queue(source, "u", _ids("u", 2))  # the target has no u: its files move whole
    (source / "t.diskqueue.ttl").write_bytes(
        records.FILE_MAGIC + records.frame(_ids("s", 3)[1] + struct.pack(">q", 123))
    )
    _journal(target, "t:c", _ids("k", 1), [])
    _journal(source, "t:c", _ids("j", 2), _ids("d", 1))
    assert merge.merge(str(source), str(target), 1 << 20) == 6
    assert _unread(target, "t") == _ids("t", 2) + _ids("s", 3)
    assert _unread(target, "u") == _ids("u", 2)
    assert ExpiryFile(str(target / "t.diskqueue.ttl")).expires == {_ids("s", 3)[1]: 123}
    live = journal._live_in(str(target / f"t:c{journal.SUFFIX}"))
    assert {i: due for i, (_, due) in live.items()} == {
        **dict.fromkeys(_ids("k", 1) + _ids("j", 2)),
        _ids("d", 1)[0]: 99,
    }
    assert os.listdir(source) == []


def test_a_removed_partition_takes_the_changes_it_missed(tmp_path: Path) -> None:
    """Worker 1 was down when topic b was deleted, topic a emptied and channel a:c paused: its
    messages and topics join worker 0's as those changes left them, not as its files had
    them."""
    for k, doc in (
        (0, {"topics": [{"name": "a", "paused": False, "channels": None}]}),
        (
            1,
            {
                "topics": [
                    {"name": "a", "paused": False, "channels": [{"name": "c", "paused": False}]},
                    {"name": "b", "paused": False, "channels": [{"name": "x", "paused": False}]},
                    {"name": "d", "paused": True, "channels": None},
                ]
            },
        ),
    ):
        (tmp_path / f"worker-{k}").mkdir()
        (tmp_path / f"worker-{k}" / "nsqd.dat").write_text(json.dumps({**doc, "version": "1.3.0"}))
    w1 = tmp_path / "worker-1"
    for name in ("a", "a:c", "b", "b:x"):
        _queue(w1, name, _ids(name[0] + name[-1], 2))
    _journal(w1, "b:x", _ids("bj", 1), [])
    path = missed.file_of(str(tmp_path), 1)
    missed.record(path, ("delete", "b", None))
    missed.record(path, ("empty", "a", None))
    missed.record(path, ("pause", "a", "c"))
    opts = resolve(["--workers=1", f"--data-path={tmp_path}"])
    assert resize.settle(opts) == ""
    doc = json.loads((tmp_path / "nsqd.dat").read_text())
    assert doc["topics"] == [
        {"name": "a", "paused": False, "channels": [{"name": "c", "paused": True}]},
        {"name": "d", "paused": True, "channels": None},
    ]
    assert _unread(tmp_path, "a:c") == _ids("ac", 2)
    assert _unread(tmp_path, "a") == []
    assert not any(n.startswith("b") for n in os.listdir(tmp_path))
    assert not any(n.startswith("worker-") for n in os.listdir(tmp_path))


def test_a_partition_beyond_holding_a_redis_keyspace_is_refused(tmp_path: Path) -> None:
    (tmp_path / "worker-0").mkdir()
    (tmp_path / "worker-1").mkdir()
    (tmp_path / "worker-1" / "resp.log").write_bytes(b"x")
    opts = resolve(["--workers=1", f"--data-path={tmp_path}"])
    assert resize.settle(opts) == (
        f"--workers=1: {tmp_path / 'worker-1' / 'resp.log'} holds a Redis keyspace, which only "
        "worker 0 keeps; start with the --workers that wrote it"
    )
    assert sorted(os.listdir(tmp_path)) == ["worker-0", "worker-1"]


def test_a_new_data_path_has_nothing_to_settle(tmp_path: Path) -> None:
    for count in ("1", "2", "auto"):
        opts = resolve([f"--workers={count}", f"--data-path={tmp_path / 'new'}"])
        assert resize.settle(opts) == ""
    assert not (tmp_path / "new").exists()


def test_moves_cut_short_anywhere_end_as_whole_moves(tmp_path: Path) -> None:
    """A kill -9 at any point of either move (a random part of the files renamed, nsqd.dat
    last), then a start with either count: every file ends in the one place that count reads,
    with its bytes."""
    rng = random.Random(20261205)
    files = {
        "nsqd.dat": b'{"topics":null,"version":"1.3.0"}',
        "t.diskqueue.meta.dat": b"1\n0,0\n0,35\n",
        "t.diskqueue.000000.dat": b"\x00\x00\x00\x1f" + b"x" * 31,
        "t:c.diskqueue.meta.dat": b"0\n0,0\n0,0\n",
        "t:c.inflight.journal": b"",
        "trio-nsqd.attributes": b"attrs",
        "resp.log": b"keys",
    }
    for case in range(40):
        top = tmp_path / f"case{case}"
        worker0 = top / "worker-0"
        worker0.mkdir(parents=True)
        down = rng.random() < 0.5  # the move cut short: down into worker-0/, or up from it
        source, target = (top, worker0) if down else (worker0, top)
        for name, data in files.items():
            (source / name).write_bytes(data)
        for name in rng.sample(sorted(set(files) - {"nsqd.dat"}), rng.randrange(len(files))):
            os.rename(source / name, target / name)
        count = rng.choice(["1", "2"])
        opts = resolve([f"--workers={count}", f"--data-path={top}"])
        assert resize.settle(opts) == "", case
        home = top if count == "1" else worker0
        assert {p.name: p.read_bytes() for p in home.iterdir() if p.is_file()} == files, case
        assert worker0.exists() == (count == "2"), case


def test_nothing_moves_under_a_running_daemon(group: Group) -> None:
    """One nsqd running on the folder, then a group started on it; a group running, then one
    nsqd: each refused in nsqd's words for a locked --data-path, its files where they were."""
    proc = _lone(group)
    try:
        assert http_post(f"http://127.0.0.1:{group.http}/pub?topic=t", b"m")[0] == 200
        flags = nsqd_process.address_flags(group.tcp, group.http, group.data)
        done = run_to_exit("--workers=2", *flags)
        assert done.returncode == 1, done.stderr
        assert (
            f"FATAL: --workers=2: failed to lock data-path: cannot flock directory {group.data} - "
            "resource temporarily unavailable (possibly in use by another instance of nsqd)"
        ) in done.stderr
        assert not (group.data / "worker-0").exists()
    finally:
        assert nsqd_process.terminate(proc, STOP_TIMEOUT) == 0
    group.start()
    done = run_to_exit(*nsqd_process.address_flags(*free_ports(2), group.data))
    assert done.returncode == 1, done.stderr
    worker = group.data / "worker-0"
    assert f"FATAL: --workers=1: failed to lock data-path: cannot flock directory {worker}" in (
        done.stderr
    )
    assert (worker / "nsqd.dat").exists() or (worker / "t.diskqueue.meta.dat").exists()
    assert not (group.data / "nsqd.dat").exists()
