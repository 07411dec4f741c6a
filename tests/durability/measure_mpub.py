"""Quick MPUB throughput check: --mem-queue-size=0 vs the default, ours vs the Go nsqd.

Not a test (pytest does not collect it); run ``python -m tests.durability.measure_mpub`` from
the repository root. One publisher on one connection sends 200,000 messages of 200 bytes in
MPUBs of 200 and waits for each OK before the next (a simple producer). Two set-ups:
* ``no-channel``: the topic has no channel, so everything queues at the topic;
* ``consumer``: one channel with a consumer (RDY 2500, FIN everything) draining meanwhile;
the rate is publisher-side (messages acknowledged per second), the best of --repeat runs."""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from . import helpers

BODY = b"x" * 200


def drain(addr: tuple[str, int], total: int, done: threading.Event) -> None:
    with helpers.Client(addr) as conn:
        conn.sub("bench", "ch", rdy=2500)
        conn.consume(total, timeout=300, quiet=0.0, idle=30)
    done.set()


def measure(kind: str, mem: str | None, setup: str, total: int, batch: int) -> float:
    flags = [f"--mem-queue-size={mem}"] if mem is not None else []
    with tempfile.TemporaryDirectory(prefix="mpub-") as tmp:
        daemon = helpers.start(kind, Path(tmp) / "data", *flags)
        try:
            done = threading.Event()
            if setup == "consumer":
                threading.Thread(target=drain, args=(daemon.addr, total, done), daemon=True).start()
                time.sleep(0.2)
            bodies = [BODY] * batch
            with daemon.client() as conn:
                start = time.perf_counter()
                for _ in range(total // batch):
                    conn.mpub("bench", bodies)
                elapsed = time.perf_counter() - start
            if setup == "consumer":
                done.wait(120)
        finally:
            daemon.terminate(30)
    return total / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--total", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3, help="runs per case; the best counts")
    args = parser.parse_args()
    rates: dict[tuple[str, str, str], float] = {}
    for setup in ("no-channel", "consumer"):
        for kind in ("ours", "reference"):
            for mem in (None, "0"):
                runs = [
                    measure(kind, mem, setup, args.total, args.batch) for _ in range(args.repeat)
                ]
                rate = max(runs)  # a shared machine only ever makes a run slower
                rates[setup, kind, mem or "default"] = rate
                print(
                    f"{setup:10} {kind:9} mem-queue-size={mem or 'default':7} {rate:>10,.0f} msg/s"
                )
    for setup in ("no-channel", "consumer"):
        for kind in ("ours", "reference"):
            ratio = rates[setup, kind, "0"] / rates[setup, kind, "default"]
            print(f"{setup:10} {kind:9} mem0/default = {ratio:.2f}")
        for mem in ("default", "0"):
            ratio = rates[setup, "ours", mem] / rates[setup, "reference", mem]
            print(f"{setup:10} mem-queue-size={mem:7} ours/reference = {ratio:.2f}")


if __name__ == "__main__":
    main()
