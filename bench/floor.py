"""The floor of a loop for PUB round trips: what a server that does nothing but read, find
each whole PUB and answer OK costs per request, driven by the bench's own round-trip clients
(bench/loops.py, as the `rt` rows). No engine, no storage, no topic: set beside the `rt` rows
of bench/run.py (ours and the Go nsqd), it says how much of a row is our daemon's Python, how
much the loop, the kernel and the clients, and what a compiled front-end could at most gain.

    python bench/floor.py [--server python|c] [--conns 1,32] [--runfor 2s] [--repeat 3]
                          [--spin-us 100] [--bench-writer]

The server is one epoll set served pass after pass as nsqd/net/reactor.py serves its own:
every ready socket read, its PUBs answered in one write, then a spin of up to --spin-us
(poll, sched_yield) before it sleeps; in Python (this file) or in C (bench/floor.c, built
with cc -O2 into a temporary folder). Prints messages a second, the server's CPU per PUB
(utime + stime from /proc) and the clients' CPU, per repeat. --bench-writer adds the Go
bench_writer at batch 1 (MPUBs of one message, one connection per core, as the `writer` rows),
each repeat printing its rate and the server's CPU per message."""

from __future__ import annotations

import argparse
import os
import select
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from daemons import process_cpu_seconds
from loops import closed_loop
from nsqd_process import free_ports, wait_accepting
from nsqv2 import pub_command
from run import parse_duration
from workloads import BODY, MSG_SIZE, client_processes, parse_tool_output

OK_FRAME = struct.pack(">ii", 6, 0) + b"OK"


def serve(port: int, spin_s: float) -> None:
    """The floor server, until killed."""
    listener = socket.create_server(("127.0.0.1", port), backlog=256)
    listener.setblocking(False)
    ep = select.epoll()
    ep.register(listener.fileno(), select.EPOLLIN)
    pending: dict[int, tuple[socket.socket, bytes]] = {}  # fd -> (socket, bytes not parsed)
    poll, clock = ep.poll, time.perf_counter
    events: list[tuple[int, int]] = []
    while True:
        if not events:
            events = poll()
        for fd, _ in events:
            if fd == listener.fileno():
                _accept(listener, ep, pending)
                continue
            sock, rest = pending[fd]
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not data:
                ep.unregister(fd)
                sock.close()
                del pending[fd]
                continue
            buf = rest + data if rest else data
            pos, count = _pubs(buf)
            pending[fd] = (sock, buf[pos:])
            if count:
                os.write(fd, OK_FRAME * count)
        end = clock() + spin_s
        while True:
            events = poll(0)
            if events or clock() >= end:
                break
            os.sched_yield()


def _accept(
    listener: socket.socket, ep: select.epoll, pending: dict[int, tuple[socket.socket, bytes]]
) -> None:
    try:
        sock, _ = listener.accept()
    except BlockingIOError:
        return
    sock.setblocking(False)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    pending[sock.fileno()] = (sock, b"")
    ep.register(sock.fileno(), select.EPOLLIN)


def _pubs(buf: bytes) -> tuple[int, int]:
    """Where the whole commands in `buf` end (the magic skipped), and how many were PUBs,
    MPUBs or IDENTIFYs (commands with a body, each answered OK; another command's line is
    skipped)."""
    pos = 4 if buf.startswith(b"  V2") else 0
    count, end = 0, len(buf)
    while pos < end:
        nl = buf.find(b"\n", pos)
        if nl < 0:
            break
        if not buf.startswith((b"PUB ", b"MPUB ", b"IDENTIFY"), pos):
            pos = nl + 1
            continue
        if nl + 5 > end:
            break
        body_end = nl + 5 + int.from_bytes(buf[nl + 1 : nl + 5], "big")
        if body_end > end:
            break
        pos, count = body_end, count + 1
    return pos, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", choices=("python", "c"), default="python")
    parser.add_argument("--conns", default="1,32")
    parser.add_argument("--runfor", type=parse_duration, default=2.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--spin-us", type=float, default=100.0)
    parser.add_argument("--bench-writer", action="store_true")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)  # the server process
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.spin_us * 1e-6)
        return
    with tempfile.TemporaryDirectory() as tmp:
        drive(args, _server_argv(args.server, args.spin_us, Path(tmp)))


def _server_argv(server: str, spin_us: float, tmp: Path) -> list[str]:
    """The server's command line, "PORT" where its port goes."""
    if server == "python":
        return [sys.executable, __file__, "--spin-us", str(spin_us), "--serve", "PORT"]
    binary = tmp / "floor"
    source = Path(__file__).with_name("floor.c")
    subprocess.run(["cc", "-O2", "-o", str(binary), str(source)], check=True)
    return [str(binary), "PORT", str(spin_us)]


def drive(args: argparse.Namespace, argv: list[str]) -> None:
    """Start the server, wait until it listens, run the clients, print a line a repeat."""
    (port,) = free_ports(1)
    server = subprocess.Popen([str(port) if a == "PORT" else a for a in argv])
    try:
        if not wait_accepting(server, port, 5.0):
            raise SystemExit(f"the floor server did not listen on {port} (exit {server.poll()})")
        request = pub_command("floor", BODY)
        for conns in (int(n) for n in args.conns.split(",")):
            procs = client_processes(conns, os.cpu_count() or 1)
            for _ in range(args.repeat):
                cpu = process_cpu_seconds(server.pid)
                r = closed_loop(("127.0.0.1", port), "v2", request, conns, procs, args.runfor)
                cpu = process_cpu_seconds(server.pid) - cpu
                print(
                    f"{conns} connection(s): {r.completed / r.seconds:,.0f} PUBs/s, "
                    f"{cpu / max(r.completed, 1) * 1e6:.1f} us of server CPU a PUB, "
                    f"clients {r.client_cpu_s:.2f} CPU-s",
                    flush=True,
                )
        if args.bench_writer:
            _bench_writer(args, port, server.pid)
    finally:
        server.kill()
        server.wait()


def _bench_writer(args: argparse.Namespace, port: int, pid: int) -> None:
    """The Go bench_writer at batch 1 against the floor, --repeat times."""
    from reference import ensure_reference  # scripts/, which importing run put on sys.path

    tool = str(ensure_reference() / "bench_writer")
    argv = [tool, f"--nsqd-tcp-address=127.0.0.1:{port}", f"--runfor={args.runfor}s"]
    argv += [f"--size={MSG_SIZE}", "--batch-size=1", "--topic=floor"]
    for _ in range(args.repeat):
        cpu = process_cpu_seconds(pid)
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=args.runfor + 60)
        cpu = process_cpu_seconds(pid) - cpu
        run = parse_tool_output("bench_writer", proc.returncode, proc.stderr)
        print(
            f"bench_writer batch 1: {run.ops:,.0f} msgs/s, "
            f"{cpu / max(run.count, 1) * 1e6:.1f} us of server CPU a message",
            flush=True,
        )


if __name__ == "__main__":
    main()
