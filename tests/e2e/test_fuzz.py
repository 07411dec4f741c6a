"""A seeded, bounded fuzz of every front-end (issue 30): mutated byte streams to V2 plain and
after each upgrade (snappy, deflate, TLS), HTTP, HTTPS and, on ours, RESP, with a liveness check
(/ping, then a PUB/SUB/FIN round trip) every LIVENESS_EVERY streams. The Go nsqd takes the
same streams (less RESP): it proves the streams and the checks, not the daemon, decide.

NSQD_FUZZ_SEED replays a run (the seed is printed, and named in every failure);
NSQD_FUZZ_STREAMS changes how many streams a daemon gets (default 2,000; a new seed each run)."""

from __future__ import annotations

import os
import random
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from .conftest import Daemon, shutdown, start_daemon
from .fuzz_streams import Fuzzer, targets, vm_hwm_mib
from .hostile_wire import (
    Certs,
    daemon_flags,
    free_ports,
    https_port,
    liveness,
    make_certs,
    wait_accepting,
)

STREAMS = int(os.environ.get("NSQD_FUZZ_STREAMS", "2000"))
# one seed per session: both daemons take the same streams
SEED = int(os.environ.get("NSQD_FUZZ_SEED") or random.randrange(1 << 32))
LIVENESS_EVERY = 300


@pytest.fixture(scope="module")
def fuzz_certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(Path(tmp_path_factory.mktemp("fuzz-certs")))


def test_fuzzed_streams_never_stop_the_daemon(
    make_daemon: Callable[..., Daemon],
    daemon_kind: str,
    fuzz_certs: Certs,
    record_property: pytest.RecordProperty,
) -> None:
    seed = SEED
    print(f"fuzz seed {seed} (NSQD_FUZZ_SEED={seed} replays it)")
    flags = list(daemon_flags(fuzz_certs))
    resp = None
    if daemon_kind == "ours":
        resp = free_ports(1)[0]
        flags.append(f"--resp-address=127.0.0.1:{resp}")
    daemon = make_daemon(*flags)
    fronts = targets(daemon.tcp_port, daemon.http_port, https_port(daemon), resp)
    for front in fronts:  # the daemon is started when its TCP port answers: the others too
        assert wait_accepting(daemon.proc, front.port, 10), f"{front.name}: port {front.port}"
    fuzzer = Fuzzer(seed, fuzz_certs.client_context())
    for n in range(1, STREAMS + 1):
        try:
            fuzzer.stream(fuzzer.rng.choice(fronts))
        except OSError as exc:  # the daemon refused a connection or an upgrade: is it up?
            liveness_after(daemon, seed, n, exc)
            raise AssertionError(f"seed {seed}, stream {n}: {exc!r}") from exc
        if n % LIVENESS_EVERY == 0 or n == STREAMS:
            liveness_after(daemon, seed, n)
    peak = vm_hwm_mib(daemon.proc.pid)
    print(f"{daemon.kind}: streams {dict(fuzzer.counts)}, lingering {dict(fuzzer.lingering)}")
    print(f"{daemon.kind}: peak RSS {peak:.1f} MiB")
    record_property("fuzz", {"seed": seed, "streams": dict(fuzzer.counts), "peak_mib": peak})
    # a stream the daemon never closes after the client's half-close is a leak of its own
    assert sum(fuzzer.lingering.values()) <= STREAMS // 100, (seed, dict(fuzzer.lingering))


GROUP_STREAMS = STREAMS // 2
_EXITED = re.compile(r"group: worker \d+ exited[^\n]*")


def test_fuzzed_streams_never_stop_a_worker(fuzz_certs: Certs) -> None:
    """The same fuzz on ours with --workers=2: a worker that dies is started again and the
    group still answers, so liveness alone would not see it; the group's log must name no
    worker that exited (each stream lands on whichever worker the kernel picks)."""
    seed = SEED
    print(f"fuzz seed {seed} (NSQD_FUZZ_SEED={seed} replays it)")
    resp = free_ports(1)[0]
    flags = [*daemon_flags(fuzz_certs), "--workers=2", f"--resp-address=127.0.0.1:{resp}"]
    daemon = start_daemon("ours", flags)
    try:
        fronts = targets(daemon.tcp_port, daemon.http_port, https_port(daemon), resp)
        for front in fronts:
            assert wait_accepting(daemon.proc, front.port, 10), f"{front.name}: {front.port}"
        fuzzer = Fuzzer(seed, fuzz_certs.client_context())
        for n in range(1, GROUP_STREAMS + 1):
            try:
                fuzzer.stream(fuzzer.rng.choice(fronts))
            except OSError as exc:
                liveness_after(daemon, seed, n, exc)
                raise AssertionError(f"seed {seed}, stream {n}: {exc!r}") from exc
            if n % LIVENESS_EVERY == 0 or n == GROUP_STREAMS:
                liveness_after(daemon, seed, n)
                exited = _EXITED.findall(daemon.log_path.read_text(errors="replace"))
                assert not exited, f"seed {seed}, by stream {n}: {exited}\n{daemon.log_tail()}"
        print(f"ours --workers=2: streams {dict(fuzzer.counts)}")
    finally:
        assert shutdown(daemon) is None


def liveness_after(daemon: Daemon, seed: int, n: int, cause: BaseException | None = None) -> None:
    try:
        liveness(daemon, "fuzz_liveness")
    except Exception as exc:
        raise AssertionError(
            f"{daemon.kind} nsqd not live after {n} streams of seed {seed} (cause {cause!r}):"
            f" {exc!r}\n{daemon.log_tail()}"
        ) from exc
