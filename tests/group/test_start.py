"""Starting a group: what it refuses (one FATAL line, exit status 1), a worker that cannot
start stopping the group (one whose port is busy only for a moment does not), and SIGTERM
stopping every worker cleanly."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.ops.conftest import (
    OURS,
    START_TIMEOUT,
    free_port,
    free_ports,
    nsqd_process,
    port_open,
    wait_until,
)

from .conftest import Group, run_to_exit


def test_a_port_chosen_by_the_kernel_is_refused(tmp_path) -> None:
    done = run_to_exit("--workers=2", "--tcp-address=127.0.0.1:0", f"--data-path={tmp_path}")
    assert done.returncode == 1
    assert "FATAL: --workers=2 needs a fixed port for --tcp-address, not 127.0.0.1:0" in done.stderr


def test_a_redis_port_chosen_by_the_kernel_is_refused(tmp_path) -> None:
    """Worker 0 alone serves --resp-address: a port of 0 would move at each of its restarts."""
    tcp, http = free_ports(2)
    ports = f"--tcp-address=127.0.0.1:{tcp}", f"--http-address=127.0.0.1:{http}"
    resp = "--resp-address=127.0.0.1:0"
    done = run_to_exit("--workers=2", *ports, resp, f"--data-path={tmp_path}")
    assert done.returncode == 1
    assert "FATAL: --workers=2 needs a fixed port for --resp-address, not 127.0.0.1:0" in (
        done.stderr
    )
    assert not list(tmp_path.glob("worker-*")), "no worker was started"


@pytest.mark.parametrize("value", ["0", "x", "-3"])
def test_a_bad_count_is_refused(tmp_path, value: str) -> None:
    done = run_to_exit(f"--workers={value}", f"--data-path={tmp_path}")
    assert done.returncode == 1
    assert "-workers" in done.stderr and "--workers must be" in done.stderr, done.stderr


def test_auto_is_one_worker_per_core() -> None:
    from nsqd.config.options import Options

    cores = len(os.sched_getaffinity(0))
    assert Options.build(workers="auto").workers == cores
    assert Options.build(workers="3").workers == 3
    assert Options.build().workers == 1


def test_a_worker_that_cannot_start_stops_the_group(tmp_path) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))  # no SO_REUSEPORT: no worker can share it
    taken.listen()
    try:
        port = taken.getsockname()[1]
        flags = (f"--tcp-address=127.0.0.1:{port}", f"--http-address=127.0.0.1:{free_port()}")
        done = run_to_exit("--workers=2", *flags, f"--data-path={tmp_path}", timeout=30)
    finally:
        taken.close()
    assert done.returncode == 1, done.stderr
    assert "address already in use" in done.stderr
    assert "could not start" in done.stderr


def test_a_port_busy_for_a_moment_at_start_does_not_stop_the_group(group: Group) -> None:
    """A worker that fails to start (its port still held, as by an nsqd that is exiting) is
    started again after a pause; the group stops only after REFUSALS such starts in a row."""
    taken = socket.socket()  # no SO_REUSEPORT: no worker can share it while it is bound
    taken.bind(("127.0.0.1", group.tcp))
    taken.listen()
    argv = [*OURS, f"--workers={group.count}"]
    argv += nsqd_process.address_flags(group.tcp, group.http, group.data)
    group.proc = nsqd_process.launch(argv, group.log, append=True)
    try:
        wait_until(
            lambda: "exited (status 1), starting it again" in group.log_text(),
            START_TIMEOUT,
            "a start that failed",
        )
    finally:
        taken.close()
    wait_until(lambda: group.listened(0) and group.listened(1), START_TIMEOUT, "both listening")
    assert group.proc.poll() is None, group.log_text()[-2000:]
    for k in (0, 1):
        with group.pin(k) as pub:
            pub.pub("t", b"after the busy port")
    assert sum(t["message_count"] for t in _stats_topics(group)) == 2


def _stats_topics(group: Group) -> list[dict]:
    import json

    from tests.ops.conftest import http_get

    status, body = http_get(f"http://127.0.0.1:{group.http}/stats?format=json&topic=t")
    assert status == 200, body
    return json.loads(body)["topics"]


def test_sigterm_stops_every_worker_cleanly(group: Group) -> None:
    group.start()
    pids = group.pids()
    assert len(pids) == 2
    assert group.proc is not None
    group.proc.send_signal(signal.SIGTERM)
    assert group.proc.wait(START_TIMEOUT) == 0
    group.proc = None
    text = group.log_text()
    assert text.count("INFO: exiting") == 2, text  # each worker's clean stop
    assert "group: exiting" in text
    for pid in pids.values():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    # the hint about a dying worker's queued connections, where the host resets them
    migrate = Path("/proc/sys/net/ipv4/tcp_migrate_req").read_text().strip()
    assert ("tcp_migrate_req is 0" in text) == (migrate == "0"), (migrate, text)


def test_a_lone_nsqds_data_beside_worker_0s_is_refused(tmp_path) -> None:
    """One nsqd's files are taken down into worker-0/ (tests/group/test_resize.py), but not
    over worker 0's own: two partitions, which no rename joins."""
    (tmp_path / "nsqd.dat").write_text('{"topics":[],"version":"1.3.0"}')
    (tmp_path / "worker-0").mkdir()
    (tmp_path / "worker-0" / "nsqd.dat").write_text('{"topics":[],"version":"1.3.0"}')
    ports = f"--tcp-address=127.0.0.1:{free_port()}", f"--http-address=127.0.0.1:{free_port()}"
    done = run_to_exit("--workers=2", *ports, f"--data-path={tmp_path}")
    assert done.returncode == 1
    assert (
        f"FATAL: --workers=2: {tmp_path} and {tmp_path / 'worker-0'} both hold nsqd.dat"
        in done.stderr
    )


def test_a_partition_beyond_the_count_holding_a_redis_keyspace_is_refused(tmp_path) -> None:
    """Partitions beyond the count are merged into the others (tests/group/test_resize.py),
    but worker 0 alone keeps a Redis keyspace: one elsewhere is refused, nothing changed."""
    for k in range(3):
        (tmp_path / f"worker-{k}").mkdir()
    (tmp_path / "worker-2" / "resp.log").write_bytes(b"x")
    ports = f"--tcp-address=127.0.0.1:{free_port()}", f"--http-address=127.0.0.1:{free_port()}"
    done = run_to_exit("--workers=2", *ports, f"--data-path={tmp_path}")
    assert done.returncode == 1
    keys = tmp_path / "worker-2" / "resp.log"
    assert f"FATAL: --workers=2: {keys} holds a Redis keyspace, which only worker 0" in (
        done.stderr
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["worker-0", "worker-1", "worker-2"]


def test_the_shared_ports_listen_only_once_every_worker_is_up(workdir) -> None:
    """A connection opened as soon as the group's port answers may land in any worker: when
    the first one listens every peer's link is up (else the clients of a starting group all
    stay in the first worker up)."""
    group = Group(workdir, count=4)
    argv = [*OURS, "--workers=4", *nsqd_process.address_flags(group.tcp, group.http, group.data)]
    group.proc = nsqd_process.launch(argv, group.log, append=True)
    try:
        wait_until(lambda: port_open(group.tcp), START_TIMEOUT, "the port", step=0.001)
        up = [k for k in range(group.count) if (group.data / f"worker-{k}.link").exists()]
        assert up == [0, 1, 2, 3]
    finally:
        assert group.stop() in (0, -signal.SIGTERM), group.log_text()[-3000:]


def test_a_worker_that_dies_soon_after_it_started_serving_is_started_again(tmp_path) -> None:
    """What counts as "could not start" is a start that never reported its state (it loads
    its data before it reports, and reports before it listens): a worker that a client makes
    exit within EARLY of its start, REFUSALS times in a row, is a crash and is started again;
    the group does not stop. (The worker processes here are stand-ins that exit with status
    1 at once, the supervisor's rule run on them as on a real worker's exit.)"""
    from nsqd.config.options import Options
    from nsqd.group import supervisor

    sup = supervisor.Supervisor([], Options.build(workers=2), str(tmp_path))
    worker = sup.workers[0]

    def died_soon(reported: bool) -> int:
        worker.proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(1)"])
        worker.proc.wait()
        worker.started_at, worker.restart_at, worker.serving = time.monotonic(), None, reported
        return sup._tend(worker, time.monotonic())

    for _ in range(supervisor.REFUSALS + 1):
        assert died_soon(reported=True) == 1  # to be started again
        assert worker.restart_at is not None and sup.stopping is None
    assert worker.refused == 0
    for _ in range(supervisor.REFUSALS - 1):
        assert died_soon(reported=False) == 1
    assert died_soon(reported=False) == 0  # a refusal made again: the group stops
    assert sup.stopping == signal.SIGTERM and sup.status == 1


def test_every_worker_answers_config_as_given(group: Group) -> None:
    """GET /config/id and /config/data_path: the options as given, from each worker alike,
    as one process answers them (not its partition of --data-path, not node id + index)."""
    group.start("--node-id=7")
    for k in range(group.count):
        answers = {}
        for key in ("id", "data_path"):
            with urllib.request.urlopen(f"http://{group.private_http(k)}/config/{key}") as resp:
                answers[key] = resp.read().decode()  # a string option: the text, as nsqd
        assert answers == {"id": "7", "data_path": str(group.data)}, k
