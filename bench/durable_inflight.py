"""The cost of --durable-inflight (issue 15, item 4): MPUB 200k then consume (RDY 2500, FINs
batched per read) on our daemon with --mem-queue-size=0 --sync-every=2500, with and without
--durable-inflight, alternating runs so drift hits both alike; medians and the ratio.

    python bench/durable_inflight.py [--repeat 3] [--total 200000]

Each row checks its own count (every message published is consumed once) and fails loudly."""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "scripts"))

from ours import our_daemon, publish_then_consume  # noqa: E402

BASE = ("--mem-queue-size=0", "--sync-every=2500")


def one_run(durable: bool, total: int) -> tuple[float, float]:
    flags = (*BASE, *(("--durable-inflight",) if durable else ()))
    with our_daemon(*flags) as (addr, _):
        return publish_then_consume(addr, "durable_bench", total)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--total", type=int, default=200_000)
    args = parser.parse_args()
    runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for i in range(args.repeat):
        for durable in (False, True):
            pub, sub = one_run(durable, args.total)
            runs[durable].append((pub, sub))
            print(f"[{i + 1}] durable={durable}: publish {pub:,.0f}/s consume {sub:,.0f}/s")
    print(f"\n{'MPUB then consume, mem-queue-size=0':40} {'off':>10} {'durable':>10} {'ratio':>7}")
    for k, label in ((0, "publish msgs/s"), (1, "consume msgs/s")):
        off = statistics.median(r[k] for r in runs[False])
        on = statistics.median(r[k] for r in runs[True])
        print(f"{label:40} {off:>10,.0f} {on:>10,.0f} {on / off:>6.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
