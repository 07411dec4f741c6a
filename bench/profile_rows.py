"""Where our daemon's time goes in a bench row: the row run as bench/run.py runs it (ours, with
--workers as given), py-spy sampling every process of the daemon (each worker, not the
supervisor) while the row runs, and the samples of all of them summed into one short table per
row: each function's own share and its inclusive share of the samples. For a lent machine,
which sends back a few small files rather than flame graphs.

    python bench/profile_rows.py --only def_writer_b1,pub_rt_32 --workers auto --out DIR

py-spy is the one on PATH or --py-spy (bash ../shared/bench16/prepare.sh py-spy packs it for a
machine without network; run_packed.sh installs it as /tmp/site/bin/py-spy). Without --idle
only samples of a running thread count (a worker asleep in epoll is not sampled), so the shares
are of the CPU the daemon used, the spin included."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from daemons import Daemon
from run import describe, make_settings, parse_args, prepare_targets, run_workload

TOP = 30
_LINE = re.compile(r":\d+\)$")  # a frame's line number: functions are summed over their lines


def summarize(raw_files: list[Path], top: int = TOP) -> str:
    """py-spy's raw output (one `frame;frame;... count` per line) of every file summed: the
    `top` functions by own samples and by inclusive samples, in percent of all samples."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for path in raw_files:
        for line in path.read_text(errors="replace").splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack or not count.isdigit():
                continue
            n = int(count)
            total += n
            frames = [_LINE.sub(")", f) for f in stack.split(";")]
            own[frames[-1]] += n
            for frame in set(frames):
                inclusive[frame] += n
    if not total:
        return "no samples\n"
    lines = [f"{total} samples from {len(raw_files)} process(es)", "", "own %  function"]
    lines += [f"{100 * n / total:5.1f}  {f}" for f, n in own.most_common(top)]
    lines += ["", "incl %  function"]
    lines += [f"{100 * n / total:5.1f}  {f}" for f, n in inclusive.most_common(top)]
    return "\n".join(lines) + "\n"


@contextmanager
def sampled(daemon: Daemon, py_spy: str, out: Path, rate: int, idle: bool) -> Iterator[None]:
    """py-spy on each of the daemon's serving processes until the block ends."""
    pids = daemon.pids()
    serving = pids[1:] or pids  # with workers the first is the supervisor, which serves nothing
    flags = ["--nonblocking", "-r", str(rate), "-f", "raw"] + (["--idle"] if idle else [])
    spies = []
    for pid in serving:
        # its complaints kept beside its samples: "no samples" alone said nothing of why
        with open(out / f"spy-{pid}.err", "wb") as err:
            spies.append(
                subprocess.Popen(
                    [py_spy, "record", *flags, "-p", str(pid), "-o", str(out / f"raw-{pid}.txt")],
                    stdout=subprocess.DEVNULL,
                    stderr=err,
                )
            )
    time.sleep(0.5)  # attached before the row's clients start
    try:
        yield
    finally:
        for spy in spies:
            spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
        for spy in spies:
            try:
                spy.wait(timeout=30)
            except subprocess.TimeoutExpired:
                spy.kill()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--only", required=True, help="rows or workloads, as bench/run.py takes them")
    p.add_argument("--workers", default=None, help="passed to our daemon (N or auto)")
    p.add_argument("--runfor", default="3s")
    p.add_argument("--rate", type=int, default=499, help="samples a second per process")
    p.add_argument("--idle", action="store_true", help="sample sleeping threads too")
    p.add_argument("--out", "--results-dir", type=Path, required=True)
    p.add_argument("--py-spy", default=shutil.which("py-spy") or "/tmp/site/bin/py-spy")
    args = p.parse_args(argv)
    if not os.access(args.py_spy, os.X_OK):
        p.error(f"no py-spy at {args.py_spy}")
    bench_argv = ["--target", "ours", "--quick", "--runfor", args.runfor, "--only", args.only]
    if args.workers is not None:
        bench_argv += ["--workers", args.workers]
    bench = parse_args(bench_argv)
    _, bin_dir = prepare_targets("ours")  # the Go tools that drive the rows
    settings = make_settings(bench, bin_dir)
    args.out.mkdir(parents=True, exist_ok=True)
    for workload in bench.workloads:
        rawdir = args.out / f"raw-{workload.name}"
        shutil.rmtree(rawdir, ignore_errors=True)
        rawdir.mkdir()

        def watch(daemon: Daemon, rawdir: Path = rawdir):
            return sampled(daemon, args.py_spy, rawdir, args.rate, args.idle)

        outcome = run_workload("ours", workload, settings, watch)
        result = outcome["error"] or describe(outcome["metrics"])
        text = f"row {workload.name} (--workers {args.workers or 1}): {result}\n"
        summary = summarize(sorted(rawdir.glob("raw-*.txt")))
        if summary.startswith("no samples"):
            for err in sorted(rawdir.glob("spy-*.err")):
                summary += f"{err.name}: {err.read_text(errors='replace')[-500:]}\n"
        text += summary
        (args.out / f"profile-{workload.name}.txt").write_text(text)
        print(text, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
