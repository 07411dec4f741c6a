"""nsq's own command-line tools against the daemon: to_nsq publishes, nsq_tail consumes,
nsq_stat polls /stats. Run on ours and on the Go nsqd (which proves the checks right)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from .conftest import Daemon, reference_binary
from .wire import Conn, command, mpub_body


def tool(name: str) -> Path:
    return reference_binary().parent / name


def run(
    args: list[str], stdin: bytes = b"", timeout: float = 30
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(args, input=stdin, capture_output=True, timeout=timeout, check=False)


async def test_to_nsq_publishes_each_line(daemon: Daemon) -> None:
    lines = [f"line-{i}".encode() for i in range(50)]
    out = run(
        [str(tool("to_nsq")), "-topic=tools_to", f"-nsqd-tcp-address={daemon.tcp_address}"],
        stdin=b"\n".join(lines) + b"\n",
    )
    assert out.returncode == 0, out.stderr.decode()
    async with await Conn.open(daemon.addr) as conn:
        await conn.cmd("SUB tools_to ch")
        await conn.expect_response()
        await conn.cmd("RDY 100")
        got = []
        while len(got) < len(lines):
            frame = await conn.read_frame(5)
            got.append(frame.data[26:])
            await conn.send(command(b"FIN " + frame.data[10:26]))
    assert got == lines


async def test_nsq_tail_prints_messages(daemon: Daemon) -> None:
    bodies = [f"tail-{i}".encode() for i in range(20)]
    async with await Conn.open(daemon.addr) as conn:
        await conn.cmd("MPUB tools_tail", mpub_body(bodies))
        await conn.expect_response()
    out = run(
        [
            str(tool("nsq_tail")),
            "-topic=tools_tail",
            f"-nsqd-tcp-address={daemon.tcp_address}",
            f"-n={len(bodies)}",
        ],
    )
    assert out.returncode == 0, out.stderr.decode()
    assert out.stdout.splitlines() == bodies


async def test_nsq_stat_reports_counts(daemon: Daemon) -> None:
    async with await Conn.open(daemon.addr) as conn:
        await conn.cmd("SUB tools_stat ch")
        await conn.expect_response()
        async with await Conn.open(daemon.addr) as pub:
            await pub.cmd("MPUB tools_stat", mpub_body([b"x"] * 7))
            await pub.expect_response()
        out = run(
            [
                str(tool("nsq_stat")),
                "-topic=tools_stat",
                "-channel=ch",
                f"-nsqd-http-address=127.0.0.1:{daemon.http_port}",
                "-count=1",
                "-interval=1s",
            ],
        )
    assert out.returncode == 0, out.stderr.decode()
    text = out.stdout.decode()
    # rate (ingress egress) | depth (total mem disk inflt def) | req t-o msgs clients
    rows = [line.replace("|", " ").split() for line in text.splitlines()]
    rows = [r for r in rows if r and all(c.isdigit() for c in r)]
    assert rows, text
    _in, _out, total, mem, disk, in_flight, deferred, req, timeouts, msgs, clients = rows[-1]
    assert (total, mem, disk, in_flight, deferred, req, timeouts, msgs, clients) == (
        "7",
        "7",
        "0",
        "0",
        "0",
        "0",
        "0",
        "7",
        "1",
    ), text
