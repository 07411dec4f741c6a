"""The rows run with each daemon's default flags (no --mem-queue-size: nsqd's 10,000), so a
channel that nobody reads fast enough spills to its disk queue, as it does for users: the Go
bench_writer at batch 200 and batch 1 into one channel, bench_reader on a backlog that is on
disk, and writer and reader at once. Each row also gives the daemon's CPU time per message
(utime + stime from /proc over the tool's run, the daemon and its child processes)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from typing import Final

from clients import publish_mpub
from daemons import Daemon
from workloads import (
    MPUB_BATCH,
    MSG_SIZE,
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

NSQD_MEM_QUEUE_SIZE: Final = 10_000  # nsqd's default: beyond it a channel's messages go to disk
# The disk backlog per second of --runfor: above what either daemon reads from disk in a
# second here (~0.2-0.3 M msgs/s); a row whose backlog ran dry fails and says so.
DISK_BACKLOG_PER_S: Final = 1_000_000  # it must outlast the window (--workers reads fast)


def run_tools(
    settings: Settings, daemon: Daemon, tools: list[tuple[str, tuple[str, ...]]]
) -> tuple[list[ToolRun], float]:
    """Run Go bench tools at once against the daemon; their results and the daemon's CPU
    seconds over the run."""
    argvs = [go_tool_argv(settings, tool, daemon.tcp_address, *args) for tool, args in tools]
    cpu = daemon.cpu_seconds()
    procs = [
        subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for argv in argvs
    ]
    outs = []
    try:
        for proc in procs:
            _, err = proc.communicate(timeout=settings.runfor_s + 60)
            outs.append((proc.returncode, err))
    except subprocess.TimeoutExpired as exc:
        raise ToolError("a bench tool did not finish in time") from exc
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    cpu = daemon.cpu_seconds() - cpu
    runs = [parse_tool_output(t, rc, err) for (t, _), (rc, err) in zip(tools, outs, strict=True)]
    return runs, cpu


def cpu_us(cpu_s: float, count: int) -> float:
    return cpu_s / count * 1e6 if count else 0.0


def defaults_writer(key: str, batch: int) -> Callable[[Daemon, Settings], Metrics]:
    """bench_writer into a topic with one channel nobody reads: past the first 10,000, every
    message is written to the channel's disk queue."""

    def run(daemon: Daemon, settings: Settings) -> Metrics:
        topic, channel = "def_bench", "ch"
        daemon.create_channel(topic, channel)
        args = (f"--batch-size={batch}", f"--topic={topic}")
        (tool,), cpu = run_tools(settings, daemon, [("bench_writer", args)])
        accepted = daemon.topic_message_count(topic)
        check(
            close_enough(accepted, tool.count),
            f"bench_writer counted {tool.count} messages, the topic accepted {accepted}",
        )
        wait_for(
            lambda: daemon.channel_stats(topic, channel).message_count >= accepted,
            30.0,
            f"every one of {accepted} messages reaching the channel",
        )
        stats = daemon.channel_stats(topic, channel)
        check(stats.depth == accepted, f"channel depth {stats.depth}, accepted {accepted}")
        check(
            accepted <= NSQD_MEM_QUEUE_SIZE or stats.backend_depth > 0,
            "nothing went to disk: the row would not measure the disk path",
        )
        return {
            key: tool.ops,
            f"{key}_cpu_us": cpu_us(cpu, tool.count),
            f"{key}_count": tool.count,
            f"{key}_on_disk": stats.backend_depth,
        }

    return run


def disk_backlog(settings: Settings) -> int:
    return int(DISK_BACKLOG_PER_S * settings.runfor_s) // MPUB_BATCH * MPUB_BATCH


def _fill(daemon: Daemon, topic: str, channel: str, backlog: int) -> None:
    daemon.create_channel(topic, channel)
    publish_mpub(daemon.tcp_addr, topic, backlog, MPUB_BATCH, MSG_SIZE, time.monotonic() + 300)
    wait_for(
        lambda: daemon.channel_stats(topic, channel).depth >= backlog,
        60.0,
        f"a channel depth of {backlog}",
    )
    before = daemon.channel_stats(topic, channel)
    check(before.depth == backlog, f"backlog {before.depth}, not {backlog}")
    check(
        before.backend_depth >= backlog - NSQD_MEM_QUEUE_SIZE,
        f"only {before.backend_depth} of the backlog of {backlog} on disk",
    )


def _reader_args(topic: str, channel: str) -> tuple[str, ...]:
    return (f"--rdy={RDY}", f"--topic={topic}", f"--channel={channel}")


def defaults_reader(daemon: Daemon, settings: Settings) -> Metrics:
    """bench_reader (RDY 2500) on a backlog that is on disk (all but nsqd's 10,000 in memory);
    the backlog must outlast the window."""
    topic, channel, backlog = "def_read", "ch", disk_backlog(settings)
    _fill(daemon, topic, channel, backlog)
    (tool,), cpu = run_tools(settings, daemon, [("bench_reader", _reader_args(topic, channel))])
    after = daemon.channel_stats(topic, channel)
    check(after.depth > 0, f"bench_reader drained the backlog of {backlog}: raise --runfor")
    slack = RDY * (os.cpu_count() or 1)  # in flight when its connections closed
    check(
        tool.count <= backlog - after.depth + slack,
        f"bench_reader counted {tool.count}, but only {backlog - after.depth} left the queue",
    )
    return {
        "def_reader": tool.ops,
        "def_reader_cpu_us": cpu_us(cpu, tool.count),
        "def_reader_count": tool.count,
        "def_reader_backlog": backlog,
    }


def defaults_writer_reader(daemon: Daemon, settings: Settings) -> Metrics:
    """bench_writer (MPUB 200) and bench_reader on the same channel at once, the channel
    starting with a disk backlog so the reader reads from disk while the writer adds to it."""
    topic, channel = "def_rw", "ch"
    backlog = disk_backlog(settings) // 4 // MPUB_BATCH * MPUB_BATCH
    _fill(daemon, topic, channel, backlog)
    (writer, reader), cpu = run_tools(
        settings,
        daemon,
        [
            ("bench_writer", (f"--batch-size={MPUB_BATCH}", f"--topic={topic}")),
            ("bench_reader", _reader_args(topic, channel)),
        ],
    )
    accepted = daemon.topic_message_count(topic) - backlog
    check(
        close_enough(accepted, writer.count),
        f"bench_writer counted {writer.count} messages, the topic accepted {accepted}",
    )
    after = daemon.channel_stats(topic, channel)
    left = backlog + accepted - after.depth
    slack = RDY * (os.cpu_count() or 1)
    check(reader.count <= left + slack, f"bench_reader counted {reader.count}, {left} left")
    return {
        "def_rw_written": writer.ops,
        "def_rw_read": reader.ops,
        "def_rw_cpu_us": cpu_us(cpu, writer.count + reader.count),
        "def_rw_written_count": writer.count,
        "def_rw_read_count": reader.count,
        "def_rw_backlog": backlog,
    }
