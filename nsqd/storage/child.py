"""A file written by a forked child process from the parent's memory as it was at the fork,
Redis's way of rewriting its append-only file (BGREWRITEAOF): the fork is the consistent
snapshot, copy-on-write keeps it so while the parent goes on changing its data, and the
child's encoding, checksums, writes and fsync run on another core while the event loop keeps
serving. The parent learns the outcome by polling (`finished`, a waitpid that never blocks)
and does the rest itself (records.py appends what came meanwhile and renames).

The child runs nothing of the parent's but the snapshot's iteration: no event loop, no
logging (another thread may have held a lock at the fork), no garbage collection (it would
touch every object and copy every page), none of the parent's open files; it runs at the
lowest priority (nice 19: a busy daemon and its clients come first), it dies with its parent
(PR_SET_PDEATHSIG), and its temporary file is named after it, so a child left behind by a
killed daemon can never write into the file a new daemon's child writes."""

from __future__ import annotations

import ctypes
import gc
import os
import signal
import sys
import warnings
from collections.abc import Iterable

from .atomic import unlink_quietly, write_file

_PR_SET_PDEATHSIG = 1


class ChildWrite:
    """`chunks` (lazy: consumed in the child) written to a temporary file beside `path`,
    fsynced; the parent renames it once `finished()` says True."""

    def __init__(self, path: str, chunks: Iterable[bytes], mode: int) -> None:
        parent = os.getpid()
        with warnings.catch_warnings():  # 3.12 warns of fork() in a threaded process: the
            warnings.simplefilter("ignore", DeprecationWarning)  # child takes no lock
            pid = os.fork()
        if pid == 0:
            _child(f"{path}.tmp-{os.getpid()}", chunks, mode, parent)
        self.pid = pid
        self.tmp = f"{path}.tmp-{pid}"
        self.status: int | None = None  # the child's exit code, once reaped

    def finished(self) -> bool:
        """True once the child has ended (its exit code in `status`); never waits."""
        if self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid == 0:
                return False
            self.status = os.waitstatus_to_exitcode(status)
        return True

    @property
    def succeeded(self) -> bool:
        return self.status == 0

    def abandon(self) -> None:
        """Stop the child (if it still runs) and remove what it wrote."""
        if self.status is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(self.pid, 0)
            self.status = -signal.SIGKILL
        unlink_quietly(self.tmp)


def remove_leftovers(path: str) -> None:
    """The files of children of an earlier run beside `path` (a crash during a rewrite)."""
    folder, name = os.path.split(os.path.abspath(path))
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return
    for leftover in names:
        if leftover.startswith(name + ".tmp-"):
            unlink_quietly(os.path.join(folder, leftover))


def _child(tmp: str, chunks: Iterable[bytes], mode: int, parent: int) -> None:
    code = 1
    try:
        gc.disable()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)  # the parent's handlers wake the parent's loop
        signal.set_wakeup_fd(-1)
        # none of the parent's files: the data path's lock, the listening sockets and the
        # connections are the parent's alone (a child that outlived a killed daemon by a few
        # milliseconds held the lock, and the daemon started again was refused it)
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        os.nice(19)  # background work: the cores go to serving first, the rest to this
        if sys.platform.startswith("linux"):
            ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() == parent:  # (it did not die before the line above)
            write_file(tmp, chunks, mode)
            code = 0
    except BaseException as exc:  # the exit code says it; no logging here (see above)
        try:
            os.write(2, f"rewrite child: {exc!r}\n".encode())
        except OSError:
            pass
    finally:
        os._exit(code)
