"""Peak memory under hostile clients (issue 30): the fuzz streams of tests/e2e/fuzz_streams.py
(mutated V2 plain and after snappy, deflate, TLS; HTTP; HTTPS; RESP on ours) sent to a fresh
Go nsqd and a fresh one of ours, one connection per stream, and each daemon's peak resident
memory (VmHWM) after them; the daemon must still answer /ping.

    python bench/hostile_memory.py [--streams 20000] [--seed 1] [--fronts v2,http]
                                   [--max-ratio 1.0] [--mem-queue-size 10000]
                                   [--ours-cmd "env PYTHONPATH=<tree> python -m nsqd"]

With --max-ratio, exits 1 when ours' peak passes the Go nsqd's times that ratio (the bound the
issue sets: no more than Go's under the same streams). Streams are drawn from --seed, so both
daemons get the same ones (RESP's share only ours)."""

from __future__ import annotations

import argparse
import json
import shlex
import ssl
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "scripts"))

from daemons import OURS_COMMAND, Daemon, ping_ok, start_daemon  # noqa: E402
from nsqd_process import free_ports, wait_accepting  # noqa: E402
from reference import ensure_reference  # noqa: E402

from nsqd.certs import CertFiles, write_all  # noqa: E402
from tests.e2e.fuzz_streams import Fuzzer, Target, targets, vm_hwm_mib  # noqa: E402


def run(target: str, args: argparse.Namespace, certs: CertFiles, bin_dir: Path) -> dict[str, Any]:
    https, resp = free_ports(2)
    flags = [
        f"--tls-cert={certs.server_cert}",
        f"--tls-key={certs.server_key}",
        f"--https-address=127.0.0.1:{https}",
    ]
    if target == "ours":
        flags.append(f"--resp-address=127.0.0.1:{resp}")
    daemon: Daemon = start_daemon(
        target, args.mem_queue_size, bin_dir, tuple(shlex.split(args.ours_cmd)), flags
    )
    with daemon:
        fronts = targets(
            daemon.tcp_port, daemon.http_port, https, resp if target == "ours" else None
        )
        if args.fronts:
            fronts = [f for f in fronts if f.name in args.fronts.split(",")]
        for front in fronts:
            if not wait_accepting(daemon.proc, front.port, 10):
                raise RuntimeError(f"{target}: {front.name} port {front.port} not accepting")
        start_kib = daemon.rss_kib()
        fuzzer = Fuzzer(args.seed, ssl.create_default_context(cafile=str(certs.ca)))
        began = time.monotonic()
        for _ in range(args.streams):
            front: Target = fuzzer.rng.choice(fronts)
            fuzzer.stream(front)
        elapsed = time.monotonic() - began
        daemon.check_alive()
        if not ping_ok(daemon.http_port):
            raise RuntimeError(f"{target}: /ping does not answer after the streams")
        return {
            "start_mib": round(start_kib / 1024, 1),
            "peak_mib": round(vm_hwm_mib(daemon.proc.pid), 1),
            "streams": dict(fuzzer.counts),
            "lingering": dict(fuzzer.lingering),
            "seconds": round(elapsed, 1),
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--fronts", default="", help="comma-separated subset, e.g. v2,http")
    parser.add_argument("--mem-queue-size", type=int, default=10_000)
    parser.add_argument("--max-ratio", type=float, default=None)
    parser.add_argument(
        "--ours-cmd", default=" ".join(OURS_COMMAND), help="how to run ours (another tree's)"
    )
    args = parser.parse_args()
    bin_dir = ensure_reference()
    certs = write_all(Path(tempfile.mkdtemp(prefix="hostile-certs-")))
    results = {target: run(target, args, certs, bin_dir) for target in ("reference", "ours")}
    print(json.dumps({"seed": args.seed, "streams": args.streams, **results}, indent=1))
    ours, go = results["ours"]["peak_mib"], results["reference"]["peak_mib"]
    print(f"peak RSS: ours {ours} MiB, Go nsqd {go} MiB")
    if args.max_ratio is not None and ours > go * args.max_ratio:
        print(f"FAIL: ours' peak passes {args.max_ratio} x the Go nsqd's")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
