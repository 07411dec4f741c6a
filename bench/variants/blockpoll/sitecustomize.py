"""A bench variant: our daemon with the reactor loop's spin replaced by one blocking epoll_wait
of the same budget (the core goes to the clients at once instead of through sched_yield), for
an A/B on a machine at hand. Python runs this at start when this folder is on PYTHONPATH, in
the daemon and in each worker a group starts (they inherit the environment):

    python bench/run.py --target ours --workers 2 --only ... \\
        --ours-cmd "env PYTHONPATH=$PWD/bench/variants/blockpoll:$PWD python3 -m nsqd"

On the 2-core VM (2026-12-05, two workers, alternated) it lost to the spin: bench_writer batch
1 19-22k against 31-33k msgs/s, defaults batch 1 18-26k against 29-30k (docs/benchmark.md)."""

import nsqd.net.reactor


def _spin(self: nsqd.net.reactor.Loop) -> list[tuple[int, int]]:
    return self.ep.poll(self._spin_budget)


nsqd.net.reactor.Loop._spin = _spin  # type: ignore[method-assign]
