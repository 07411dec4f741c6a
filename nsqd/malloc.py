"""glibc's allocator set for a server's churn, once at start.

Replies and message bodies between 128 KiB and 1 MiB (an LRANGE of a few hundred jobs, a large
message) are made and freed thousands of times a second. With glibc's defaults each such block
gets fresh pages every time: memory above the mmap threshold is mapped and unmapped, and heap
memory is given back to the kernel as soon as a little is free at its top, so every reply pays
its page faults again (redis-benchmark LRANGE_600: 11,200 requests/s, 19,000 with this). Here
blocks up to 1 MiB come from the heap, and the heap keeps up to 16 MiB free at its top before
giving memory back. A MALLOC_* environment variable set by the user wins (glibc reads those
itself), and without glibc (musl) nothing changes."""

from __future__ import annotations

import ctypes
import os

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1 << 20
TRIM_THRESHOLD = 16 << 20


def tune() -> bool:
    """Set the thresholds; False when the user set them, or there is no glibc mallopt."""
    if any(name.startswith("MALLOC_") for name in os.environ):
        return False
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return False
    return bool(
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
