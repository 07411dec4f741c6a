"""The memory block of /stats and statsd's mem.* gauges: nsqd's memStats keys with Python's nearest
equivalents (allocated blocks, resident memory, collector pauses and runs)."""

from __future__ import annotations

import gc
import math
import os
import sys
import time
from collections import deque

_GC_PAUSES: deque[int] = deque(maxlen=256)  # ns, as Go's MemStats.PauseNs ring


_gc_started = 0


def _gc_callback(phase: str, info: dict[str, int]) -> None:
    global _gc_started
    if phase == "start":
        _gc_started = time.perf_counter_ns()
    elif _gc_started:
        _GC_PAUSES.append(time.perf_counter_ns() - _gc_started)


def track_gc_pauses() -> None:
    """Record collector pauses for gc_pause_usec_* (idempotent)."""
    if _gc_callback not in gc.callbacks:
        gc.callbacks.append(_gc_callback)


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _percentile(perc: float, sorted_values: list[int]) -> int:
    n = len(sorted_values)
    if n == 0:
        return 0
    index = min(math.floor(perc / 100.0 * n + 0.5), n - 1)
    return sorted_values[index]


def memory_stats() -> dict[str, int]:
    """nsqd's memStats keys with Python's nearest equivalents: allocated blocks for heap
    objects, resident memory for heap in use, collector pauses and runs (Go-only figures 0)."""
    pauses = sorted(_GC_PAUSES)
    return {
        "heap_objects": sys.getallocatedblocks(),
        "heap_idle_bytes": 0,
        "heap_in_use_bytes": _rss_bytes(),
        "heap_released_bytes": 0,
        "gc_pause_usec_100": _percentile(100.0, pauses) // 1000,
        "gc_pause_usec_99": _percentile(99.0, pauses) // 1000,
        "gc_pause_usec_95": _percentile(95.0, pauses) // 1000,
        "next_gc_bytes": 0,
        "gc_total_runs": sum(s["collections"] for s in gc.get_stats()),
    }


def add_memory(figures: list[dict[str, int]]) -> dict[str, int]:
    """Several processes' memory_stats as one's (a group's workers): sizes, objects and runs
    summed, a pause percentile the longest."""
    total = dict(figures[0])
    for other in figures[1:]:
        for key, value in other.items():
            if key.startswith("gc_pause_usec_"):
                total[key] = max(total[key], value)
            else:
                total[key] += value
    return total
