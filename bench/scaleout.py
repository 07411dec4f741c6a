"""Scale-out: NSQ's own way to use more cores. Ours runs one nsqd per core, all registered with the
real nsqlookupd; the Go nsqd runs alone and uses every core. Producers and consumers find the nsqds
through nsqlookupd's /lookup and are spread over them round robin: one bench_writer (MPUB 200) and
one bench_reader (RDY 2500) per core, each with one connection (GOMAXPROCS=1), all started at the
same second and run concurrently for --runfor."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from contextlib import ExitStack
from typing import Final

from daemons import HOST, start_daemon, start_lookupd
from workloads import (
    RDY,
    Metrics,
    Settings,
    ToolError,
    ToolRun,
    check,
    close_enough,
    go_tool_argv,
    parse_tool_output,
    wait_for,
)

TOPIC: Final = "scale_bench"
CHANNEL: Final = "ch"
START_DELAY_S: Final = 2


def common_start() -> str:
    """A whole UTC second a little ahead, in the form the Go tools' --deadline parses (as UTC)."""
    at = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(seconds=START_DELAY_S + 1)
    return at.strftime("%Y-%m-%d %H:%M:%S")


def run_tools(settings: Settings, argvs: list[list[str]]) -> list[ToolRun]:
    """Run the tools concurrently (one connection each); every one must report a result."""
    env = {**os.environ, "GOMAXPROCS": "1"}
    procs = [
        subprocess.Popen(
            argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        for argv in argvs
    ]
    runs, errors = [], []
    for argv, proc in zip(argvs, procs, strict=True):
        try:
            _, stderr = proc.communicate(timeout=settings.runfor_s + START_DELAY_S + 60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            errors.append(f"{argv[0]} did not finish in time")
            continue
        try:
            runs.append(parse_tool_output(argv[0], proc.returncode, stderr))
        except ToolError as exc:
            errors.append(str(exc))
    if errors:
        raise ToolError("; ".join(errors))
    return runs


def scale_out(target: str, settings: Settings) -> Metrics:
    if settings.bin_dir is None:
        raise ToolError("the reference tools are not installed")
    cores = os.cpu_count() or 1
    n_nsqd = cores if target == "ours" else 1
    with start_lookupd(settings.bin_dir) as lookupd, ExitStack() as stack:
        flags = [f"--lookupd-tcp-address={HOST}:{lookupd.tcp_port}", f"--broadcast-address={HOST}"]
        daemons = [
            stack.enter_context(
                start_daemon(
                    target, settings.mem_queue_size, settings.bin_dir, settings.ours_cmd, flags
                )
            )
            for _ in range(n_nsqd)
        ]
        for d in daemons:
            d.create_channel(TOPIC, CHANNEL)  # registers topic and channel with nsqlookupd
        wait_for(
            lambda: len(lookupd.producers(TOPIC)) >= n_nsqd,
            20.0,
            f"nsqlookupd listing {n_nsqd} producers of {TOPIC}",
        )
        producers = sorted(lookupd.producers(TOPIC))
        check(
            producers == sorted(d.tcp_address for d in daemons),
            f"nsqlookupd lists {producers}",
        )
        common = (f"--topic={TOPIC}", f"--deadline={common_start()}")
        writers = [
            go_tool_argv(
                settings, "bench_writer", producers[i % n_nsqd], "--batch-size=200", *common
            )
            for i in range(cores)
        ]
        readers = [
            go_tool_argv(
                settings,
                "bench_reader",
                producers[i % n_nsqd],
                f"--rdy={RDY}",
                f"--channel={CHANNEL}",
                *common,
            )
            for i in range(cores)
        ]
        runs = run_tools(settings, writers + readers)
        written, read = runs[:cores], runs[cores:]
        published = sum(r.count for r in written)
        accepted = [d.topic_message_count(TOPIC) for d in daemons]
        check(
            close_enough(sum(accepted), published),
            f"the writers counted {published}, the nsqds accepted {accepted}",
        )
        check(all(accepted), f"a producer got nothing: {accepted}")
        consumed = sum(r.count for r in read)
        check(consumed <= published, f"read {consumed} of {published} published")
        for d in daemons:
            d.check_alive()
    return {
        "scale_pub": sum(r.ops for r in written),
        "scale_sub": sum(r.ops for r in read),
        "scale_nsqd": n_nsqd,
        "scale_published": published,
        "scale_consumed": consumed,
    }
