"""One of our daemons for a bench script: a temporary data path, free ports, waited for, and
stopped after the block; and the channel a workload publishes into, made first."""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "scripts"))

import nsqd_process  # noqa: E402
from nsqv2 import Connection  # noqa: E402
from workloads import THROUGHPUT_IDENTIFY  # noqa: E402


@contextlib.contextmanager
def our_daemon(*flags: str, root: Path = REPO) -> Iterator[tuple[tuple[str, int], int]]:
    """((host, tcp port), http port) of our nsqd run from the checkout at `root`."""
    with tempfile.TemporaryDirectory(prefix="nsqbench-") as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        tcp, http = nsqd_process.free_ports(2)
        argv = [*nsqd_process.ours_command(), *nsqd_process.address_flags(tcp, http, data), *flags]
        env = nsqd_process.pythonpath_env(root)
        proc = nsqd_process.launch(argv, Path(tmp) / "nsqd.log", cwd=root, env=env)
        try:
            if not nsqd_process.wait_accepting(proc, tcp, 15):
                raise RuntimeError(f"nsqd did not start:\n{(Path(tmp) / 'nsqd.log').read_text()}")
            yield (nsqd_process.HOST, tcp), http
        finally:
            nsqd_process.terminate(proc, 10, kill_timeout=10)


def make_channel(addr: tuple[str, int], topic: str, channel: str) -> None:
    """The channel exists before the publish (a SUB with RDY 0)."""
    deadline = time.monotonic() + 30
    with Connection(addr) as conn:
        conn.identify(THROUGHPUT_IDENTIFY, deadline)
        conn.subscribe(topic, channel, 0, deadline)


def publish_then_consume(addr: tuple[str, int], topic: str, total: int) -> tuple[float, float]:
    """MPUB `total` messages (batches of 200) into topic's channel `ch`, then consume them
    (RDY 2500, FINs batched per read): (publish msgs/s, consume msgs/s); fails loudly unless
    every message came back once."""
    from clients import consume, publish_mpub
    from workloads import MPUB_BATCH, MSG_SIZE, RDY

    make_channel(addr, topic, "ch")
    deadline = time.monotonic() + 180
    pub_s = publish_mpub(addr, topic, total, MPUB_BATCH, MSG_SIZE, deadline)
    with Connection(addr) as conn:
        conn.identify(THROUGHPUT_IDENTIFY, deadline)
        start = time.perf_counter()
        conn.subscribe(topic, "ch", RDY, deadline)
        received = consume(conn, total, deadline)
        sub_s = time.perf_counter() - start
    if received != total:
        raise RuntimeError(f"consumed {received} of {total}")
    return total / pub_s, total / sub_s
