"""The cost of queue policies (issue 16): MPUB 200k into a channel, then consume it (RDY 2500,
FINs batched per read), on our daemon in three forms, alternating so drift hits all alike:

- `before`: the commit before policies existed (a git worktree of --baseline, default
  pass its ref), no attributes;
- `off`: this checkout, no attributes (must match `before` within noise);
- `on`: this checkout, the channel with max_attempts=5 and ttl=600000 (checked per message at
  hand-out) and the topic with max_depth=10000000 (checked per publish).

    python bench/policies.py [--repeat 3] [--total 200000] [--baseline REF]

Each run checks that every message published was consumed once, and fails loudly."""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "scripts"))

from ours import make_channel, our_daemon, publish_then_consume  # noqa: E402

TOPIC = "policy_bench"
POLICIES = (
    f"/channel/config?topic={TOPIC}&channel=ch&max_attempts=5&ttl=600000",
    f"/topic/config?topic={TOPIC}&max_depth=10000000",
)


def one_run(root: Path, policies: bool, total: int) -> tuple[float, float]:
    with our_daemon("--mem-queue-size=1000000", root=root) as (addr, http):
        if policies:
            make_channel(addr, TOPIC, "ch")
            for path in POLICIES:
                req = urllib.request.Request(f"http://127.0.0.1:{http}{path}", method="POST")
                with urllib.request.urlopen(req, timeout=5) as resp:
                    assert resp.status == 200
        return publish_then_consume(addr, TOPIC, total)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--total", type=int, default=200_000)
    parser.add_argument("--baseline", default="", help="git ref of the 'before' column")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="nsqbench-baseline-") as tmp:
        variants: dict[str, tuple[Path, bool]] = {"off": (REPO, False), "on": (REPO, True)}
        if args.baseline:
            base = Path(tmp) / "tree"
            subprocess.run(
                ["git", "worktree", "add", "--detach", str(base), args.baseline],
                cwd=REPO,
                check=True,
                capture_output=True,
            )
            variants = {"before": (base, False), **variants}
        try:
            runs: dict[str, list[tuple[float, float]]] = {k: [] for k in variants}
            for i in range(args.repeat):
                for name, (root, policies) in variants.items():
                    pub, sub = one_run(root, policies, args.total)
                    runs[name].append((pub, sub))
                    print(f"[{i + 1}] {name}: publish {pub:,.0f}/s consume {sub:,.0f}/s")
        finally:
            if args.baseline:
                subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=REPO)
    names = list(variants)
    print(f"\n{'MPUB 200k then consume, msgs/s':32}" + "".join(f"{n:>11}" for n in names))
    for k, label in ((0, "publish (MPUB 200)"), (1, "consume (RDY 2500)")):
        medians = [statistics.median(r[k] for r in runs[n]) for n in names]
        print(f"{label:32}" + "".join(f"{m:>11,.0f}" for m in medians))
    return 0


if __name__ == "__main__":
    sys.exit(main())
