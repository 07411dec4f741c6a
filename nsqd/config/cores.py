"""The cores this process may use, for `--workers=auto`: the CPUs it may run on (its affinity),
capped by its cgroup's CPU quota rounded up (a container started with `docker run --cpus=2` on
a 16-core host may run on all 16 but gets two cores' worth of time: 2 workers, not 16).

Read from the kernel's files: /proc/self/cgroup names this process's cgroup in each hierarchy,
/proc/self/mountinfo says where each hierarchy is mounted; cgroup v2's `cpu.max` ("max 100000"
or "<quota> <period>") or v1's `cpu.cfs_quota_us` (-1: none) over `cpu.cfs_period_us`, in the
cgroup and each of its parents (the tightest counts). Anything unreadable means no quota."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path

__all__ = ["usable_cores"]


def usable_cores() -> int:
    affinity = len(os.sched_getaffinity(0))
    quota = cgroup_cpu_quota()
    return max(1, min(affinity, math.ceil(quota))) if quota is not None else affinity


def cgroup_cpu_quota() -> float | None:
    """The CPU time this process's cgroups allow it, in cores (None: no quota)."""
    try:
        memberships = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    limits = []
    try:
        for line in memberships:
            _, controllers, path = line.split(":", 2)
            if controllers == "":  # v2: the unified hierarchy
                limits += _walk(_dir(mounts, "cgroup2", None, path), _v2_quota)
            elif "cpu" in controllers.split(","):
                limits += _walk(_dir(mounts, "cgroup", "cpu", path), _v1_quota)
    except (OSError, ValueError):  # a line not in the kernel's format: as if no quota
        return None
    return min(limits, default=None)


def _dir(mounts: list[str], fstype: str, controller: str | None, path: str) -> Path | None:
    """Where the cgroup at `path` of that hierarchy is in the file system (None: not mounted)."""
    for line in mounts:
        fields, _, tail = line.partition(" - ")
        kind, _, options = tail.split(" ", 2) if tail.count(" ") >= 2 else (tail, "", "")
        if kind != fstype or (controller and controller not in options.split(",")):
            continue
        root, point = fields.split(" ")[3:5]
        if path == root or path.startswith(root.rstrip("/") + "/"):
            return Path(point) / path[len(root) :].lstrip("/")
    return None


def _walk(start: Path | None, quota_of: Callable[[Path], float | None]) -> list[float]:
    """The quotas set in `start` and its parents, up to the hierarchy's mount point."""
    found = []
    here = start
    while here is not None and here.is_dir():
        quota = quota_of(here)
        if quota is not None:
            found.append(quota)
        if here.parent == here or not (here.parent / "cgroup.procs").exists():
            break
        here = here.parent
    return found


def _v2_quota(cgroup: Path) -> float | None:
    try:
        quota, period = (cgroup / "cpu.max").read_text().split()
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        return None


def _v1_quota(cgroup: Path) -> float | None:
    try:
        quota = int((cgroup / "cpu.cfs_quota_us").read_text())
        period = int((cgroup / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None
