"""The --data-path lock, as nsqd's internal/dirlock: an exclusive flock of the directory itself,
held for the daemon's life, so that two daemons never share one folder. Refused in nsqd's words."""

from __future__ import annotations

import fcntl
import os


def lock(path: str) -> int:
    """The open, flocked directory at `path` (closing it releases the lock); OSError in nsqd's
    words when it cannot be opened or another process holds it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        reason = os.strerror(exc.errno or 0).lower()
        raise OSError(exc.errno, f"failed to lock data-path: open {path}: {reason}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        raise OSError(
            exc.errno,
            f"failed to lock data-path: cannot flock directory {path} - "
            f"{os.strerror(exc.errno or 0).lower()} (possibly in use by another instance "
            "of nsqd)",
        ) from exc
    return fd
