"""`--workers=auto` counts the cores this process may use: its CPU affinity, capped by its
cgroup's CPU quota (a container's `--cpus`), rounded up (nsqd/config/cores.py). Tested in real
cgroups made here (the tests run as root, as scripts/test.sh does): the cgroup v1 `cpu`
controller where it is mounted, else cgroup v2's `cpu.max`."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import nsqd_process
import pytest

from tests.ops.conftest import START_TIMEOUT, wait_until

PRINT_CORES = "from nsqd.config.cores import usable_cores; print(usable_cores())"


def _hierarchy() -> tuple[Path, str]:
    """A writable cgroup hierarchy with the cpu controller: (its mount point, 'v1' or 'v2')."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields, _, tail = line.partition(" - ")
        kind, _, options = tail.split(" ", 2)
        point = Path(fields.split(" ")[4])
        if kind == "cgroup" and "cpu" in options.split(",") and os.access(point, os.W_OK):
            return point, "v1"
        writable_v2 = kind == "cgroup2" and os.access(point, os.W_OK)
        if writable_v2 and "cpu" in (point / "cgroup.controllers").read_text().split():
            (point / "cgroup.subtree_control").write_text("+cpu")
            return point, "v2"
    pytest.fail("no writable cgroup hierarchy with the cpu controller (the tests run as root)")


Make = Callable[[Path | None, float | None], Path]


@pytest.fixture
def cgroups() -> Iterator[Make]:
    """make(parent, cores): a new cgroup under `parent` (the hierarchy's root when None)
    with a CPU quota of `cores` (none when None); removed at the end, innermost first."""
    root, version = _hierarchy()
    made: list[Path] = []

    def make(parent: Path | None, cores: float | None) -> Path:
        path = Path(tempfile.mkdtemp(prefix="nsqd-cores-", dir=parent or root))
        made.append(path)
        if version == "v2":
            if cores is not None:
                (path / "cpu.max").write_text(f"{int(cores * 100_000)} 100000")
            (path / "cgroup.subtree_control").write_text("+cpu")
        elif cores is not None:
            (path / "cpu.cfs_period_us").write_text("100000")
            (path / "cpu.cfs_quota_us").write_text(str(int(cores * 100_000)))
        return path

    yield make
    for path in reversed(made):
        for _ in range(50):  # its processes may take a moment to leave after they exit
            try:
                path.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def _in(cgroup: Path) -> Callable[[], None]:
    def enter() -> None:  # in the child, before it runs Python: all it starts is in there too
        (cgroup / "cgroup.procs").write_text(str(os.getpid()))

    return enter


def _cores_in(cgroup: Path) -> int:
    done = subprocess.run(
        [sys.executable, "-c", PRINT_CORES],
        preexec_fn=_in(cgroup),
        capture_output=True,
        text=True,
        timeout=30,
        env=nsqd_process.pythonpath_env(),
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def _pings(port: int) -> bool:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2) as resp:
        return resp.status == 200


def test_a_quota_caps_the_cores_and_is_rounded_up(cgroups: Make) -> None:
    cores = len(os.sched_getaffinity(0))
    assert _cores_in(cgroups(None, 0.5)) == 1
    assert _cores_in(cgroups(None, 1.2)) == min(cores, 2)
    assert _cores_in(cgroups(None, cores + 3)) == cores  # a quota above the CPUs: the CPUs
    assert _cores_in(cgroups(None, None)) == cores
    # the tightest quota on the way up counts: a container's, around a cgroup of its own
    assert _cores_in(cgroups(cgroups(None, 0.5), None)) == 1


def test_auto_starts_one_worker_per_core_the_quota_allows(cgroups: Make, tmp_path: Path) -> None:
    """On this machine's cores (2 or more) --workers=auto is a group; in a cgroup with half a
    core's quota it is one nsqd process, as --workers=1."""
    cores = len(os.sched_getaffinity(0))
    for quota, want in ((None, cores), (0.5, 1)):
        data = tmp_path / f"quota-{quota}"
        data.mkdir()
        tcp, http = nsqd_process.free_ports(2)
        argv = [*nsqd_process.ours_command(), "--workers=auto"]
        argv += nsqd_process.address_flags(tcp, http, data)
        log = data / "log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                argv, stdout=out, stderr=out, stdin=subprocess.DEVNULL,
                preexec_fn=_in(cgroups(None, quota)), cwd=nsqd_process.REPO_ROOT,
            )  # fmt: skip
        try:
            wait_until(lambda: _pings(http), START_TIMEOUT, "/ping")  # noqa: B023 (called here)
            text = log.read_text()
            if want == 1:
                assert "group:" not in text and not list(data.glob("worker-*")), text
            else:
                assert f"group: {want} workers" in text, text
        finally:
            assert nsqd_process.terminate(proc, 15, kill_timeout=5) == 0, log.read_text()
