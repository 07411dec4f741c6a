"""The process `nsqd --workers=N` starts: it runs no broker itself. It starts N workers (this
same command line, with a worker identity in the environment), starts again one that dies
(with a growing pause, so a worker that cannot start does not spin), kills one that stops
answering so that it is started again (nsqd.group.watchdog), hands SIGTERM/SIGINT on to every
worker and exits when they have all stopped. It registers the group with nsqlookupd, once,
from what its workers report (nsqd.group.lookupd).

A worker that exits with a status of its own (a refusal: a port taken, a bad data path) within
its first seconds stops the group: the error is in its log line, and starting it again would
only repeat it. A worker killed by a signal, or that ran a while, is started again."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from typing import TYPE_CHECKING

from ..config.options import Options
from ..log import log
from .identity import (
    ENV,
    LOOKUPD_FD_ENV,
    LOOKUPD_HELLO_ENV,
    SECRET_ENV,
    STARTED_ENV,
    Identity,
    refusal,
)

if TYPE_CHECKING:
    from .lookupd import GroupLookupd

FIRST_PAUSE = 0.1  # seconds before a dead worker is started again; doubles up to LONGEST_PAUSE
LONGEST_PAUSE = 5.0
SETTLED = 10.0  # a worker that ran this long starts again after FIRST_PAUSE
EARLY = 2.0  # a worker that exits by itself this soon after starting did not start
LINKS_WAIT = 10.0  # seconds the supervisor waits for its workers' links before its own work
REFUSALS = 3  # starts in a row a worker did not make before the group stops (so will the next)
# 1: a closing SO_REUSEPORT listener hands its queued connections to the others in its group
MIGRATE_REQ = "/proc/sys/net/ipv4/tcp_migrate_req"
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# the child runs this very package, whatever PYTHONPATH or the current directory hold
_CHILD = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); "
    "from nsqd.lazy import defer; defer(); "
    "from nsqd.cli import main; sys.exit(main())"
)


def _stop_with_parent() -> None:
    """In the child before exec: SIGTERM when the supervisor dies (a kill -9 of it leaves no
    worker holding the ports; each stops cleanly, as for a SIGTERM)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


_PR_SET_PDEATHSIG = 1


class Worker:
    """One worker process and when to start it again."""

    def __init__(
        self, index: int, count: int, argv: list[str], link_file: str, group: dict[str, str]
    ) -> None:
        self.index, self.count, self.argv = index, count, argv
        self.group = group  # what every worker is told of the group, in its environment
        self.link_file = link_file  # where it publishes its private addresses
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self.restart_at: float | None = 0.0  # start now
        self.pause = FIRST_PAUSE
        self.refused = 0  # starts in a row it did not make (exited with a status within EARLY)
        self.serving = False  # this start reported its state: it loaded and is to serve
        self.reports: socket.socket | None = None  # this start's lookupd reports, not yet served

    def forget_link(self) -> None:
        """A dead worker's addresses go with it: its ports may soon be another process's."""
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.link_file)

    def start(self) -> None:
        self.forget_link()
        self.reports, theirs = socket.socketpair()
        env = dict(
            os.environ,
            **{
                **self.group,
                ENV: f"{self.index}/{self.count}",
                LOOKUPD_FD_ENV: str(theirs.fileno()),
                LOOKUPD_HELLO_ENV: "1" if self.proc is not None else "",
            },
        )
        argv = [sys.executable, "-c", _CHILD, _PACKAGE_ROOT, *self.argv]
        with theirs:
            self.proc = subprocess.Popen(
                argv, env=env, preexec_fn=_stop_with_parent, pass_fds=(theirs.fileno(),)
            )
        self.started_at = time.monotonic()
        self.restart_at = None
        self.serving = False
        log.info("group: worker %d started (pid %d)", self.index, self.proc.pid)

    def reported(self) -> None:
        """Its first report came (its state, sent once it has loaded, before it listens)."""
        self.serving = True

    def exited(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def signal(self, signum: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signum)


class Supervisor:
    def __init__(self, argv: list[str], opts: Options, group_path: str) -> None:
        self.opts, count = opts, opts.workers
        identity = Identity(0, count, group_path)
        group = {
            SECRET_ENV: secrets.token_hex(16),  # the workers' links' AUTH
            STARTED_ENV: str(int(time.time())),
        }
        self.workers = [Worker(i, count, argv, identity.link_file(i), group) for i in range(count)]
        self.stopping: int | None = None  # the signal that stops the group
        self.status = 0

    def _on_signal(self, signum: int, _frame: object) -> None:
        log.info("group: received signal: %s", signal.Signals(signum).name)
        self.stopping = signum
        for worker in self.workers:
            worker.signal(signum)

    def run(self) -> int:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._on_signal)
        # the workers start, and link up, before trio is imported here for nsqlookupd: on a
        # small machine that import took a core from the workers' start (+150 ms on 2 cores);
        # what they report meanwhile waits in their sockets
        started = time.monotonic()
        while self.stopping is None and time.monotonic() - started < LINKS_WAIT:
            self._tend_all()
            if all(os.path.exists(worker.link_file) for worker in self.workers):
                break
            time.sleep(0.05)
        import trio

        from .lookupd import GroupLookupd

        trio.run(self._run, GroupLookupd(self.opts))
        log.info("group: exiting")
        return self.status

    async def _run(self, lookupd: GroupLookupd) -> None:
        import trio

        from .watchdog import watch

        async with trio.open_nursery() as nursery:
            await nursery.start(lookupd.run)
            timeout = self.opts.worker_timeout
            if timeout > 0 and self.opts.http_address:
                for worker in self.workers:
                    nursery.start_soon(watch, worker, timeout, self._stopping)
            while True:
                for worker in self.workers:
                    if worker.reports is not None:
                        nursery.start_soon(
                            lookupd.serve, worker.index, worker.reports, worker.reported
                        )
                        worker.reports = None
                await trio.sleep(0.05)
                if self._tend_all() == 0 and self.stopping is not None:
                    break
            nursery.cancel_scope.cancel()

    def _stopping(self) -> bool:
        return self.stopping is not None

    def _tend_all(self) -> int:
        """Tend every worker; how many run (or are to run)."""
        now = time.monotonic()
        return sum(self._tend(worker, now) for worker in self.workers)

    def _tend(self, worker: Worker, now: float) -> int:
        """Start, restart or stop `worker` as due; 1 while it runs (or is to run)."""
        if worker.proc is None or worker.restart_at is not None:
            if self.stopping is not None:
                return 0
            if worker.restart_at is not None and now >= worker.restart_at:
                worker.start()
            return 1
        code = worker.exited()
        if code is None:
            return 1
        if self.stopping is not None:
            worker.forget_link()
            return 0
        worker.forget_link()
        ran = now - worker.started_at
        # a start it did not make: a refusal (a bad flag, a port in use) is made again by the
        # next start, so the group stops after REFUSALS in a row; a cause that passes (a port
        # still held by an exiting process) costs a few pauses, not the whole group. A worker
        # that reported its state had started: its death, however soon (a client's doing),
        # is a crash, and it is started again
        early = code > 0 and ran < EARLY and not worker.serving
        worker.refused = worker.refused + 1 if early else 0
        if worker.refused >= REFUSALS:
            log.critical("group: worker %d could not start (exit status %d)", worker.index, code)
            self.status = code
            self._on_signal(signal.SIGTERM, None)
            return 0
        worker.pause = FIRST_PAUSE if ran >= SETTLED else min(worker.pause * 2, LONGEST_PAUSE)
        worker.restart_at = now + worker.pause
        log.error(
            "group: worker %d exited (%s), starting it again in %.1fs",
            worker.index,
            f"signal {-code}" if code < 0 else f"status {code}",
            worker.pause,
        )
        return 1


def run(argv: list[str], opts: Options) -> int:
    """Run the group for `argv` (the command line given, passed to every worker)."""
    reason = refusal(opts)
    if reason:
        log.critical("%s", reason)
        return 1
    group_path = os.path.abspath(opts.data_path or os.getcwd())
    os.makedirs(group_path, exist_ok=True)
    log.info("group: %d workers", opts.workers)
    if _reads(MIGRATE_REQ) == "0":
        log.info(
            "group: %s is 0: connections queued at a worker that dies are reset, not handed to "
            "the others (docs/workers.md, What survives)",
            MIGRATE_REQ,
        )
    return Supervisor(argv, opts, group_path).run()


def _reads(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:  # not Linux 5.14+, or no /proc
        return ""
