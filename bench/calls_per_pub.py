"""Python calls the daemon makes per PUB round trip, in steady state: a deterministic measure of
the interpreter's work per request, where throughput on a shared machine is noise.

    python bench/calls_per_pub.py [--warmup N] [--count N] [--top K] [--only CONFIGS]

Each configuration starts our nsqd as a subprocess (this file again, with CALLS_PER_PUB_OUT set
in its environment: only this script sets it), creates topic `t` with channel `c` (attached,
no consumer), sends --warmup PUBs of 200 bytes from one raw socket, one in flight, then turns a
sys.setprofile hook on in the daemon's main thread (SIGUSR1), sends --count more, and turns it
off (SIGUSR2: the counts are written to the file the variable names). Configurations:
  defaults  nsqd's default flags; the warm-up (11,000) fills the channel's 10,000 in memory, so
            the measured messages go to its disk queue (the bench's defaults rows)
  memory    the default flags, measured while the channel still holds them in memory
  disk      --mem-queue-size=0: every message to the topic's and channel's disk queues

Counted: 'call' events (Python functions, coroutine resumes included) and 'c_call' events
(builtins) while the reactor's loop task runs (`Loop._serve` entered and not yet returned or
suspended). Left out, and shown on their own line: the spin's own polls, clock reads and
sched_yields (how many depends on how soon the client sends again), and everything outside the
loop task (trio's scheduler, other tasks: timers, turns given every millisecond). The loop's
passes, their group commit, the parse, the publish and the answer are all inside it."""

from __future__ import annotations

import argparse
import http.client
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

ENV = "CALLS_PER_PUB_OUT"
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

CONFIGS: dict[str, tuple[list[str], int]] = {  # flags, warm-up PUBs
    "defaults": ([], 11_000),
    "memory": ([], 1_000),
    "disk": (["--mem-queue-size=0"], 1_000),
}


# -- the daemon side (CALLS_PER_PUB_OUT set) ---------------------------------------------------


def _label(key: Any) -> str:
    if isinstance(key, tuple):
        builtin, caller = key
        return f"{_label(builtin)} in {_label(caller).split(' ')[-1]}"
    if isinstance(key, CodeType):
        path = Path(key.co_filename)
        try:
            path = path.relative_to(ROOT)
        except ValueError:
            path = Path(*path.parts[-2:])
        return f"{path}:{key.co_firstlineno} {key.co_qualname}"
    if isinstance(key, str):
        return key
    owner = getattr(key, "__self__", None)
    qualname = getattr(key, "__qualname__", repr(key))
    if owner is not None and not isinstance(owner, type(sys)):
        return f"<c> {type(owner).__name__}.{getattr(key, '__name__', qualname)}"
    module = getattr(key, "__module__", None) or getattr(owner, "__name__", "")
    return f"<c> {module}.{qualname}"


def _daemon(out: str, argv: list[str]) -> int:
    from nsqd.lazy import defer

    defer()
    from nsqd.cli import main
    from nsqd.net.reactor import Loop

    serve_code = Loop._serve.__code__
    spin_code = Loop._spin.__code__
    inside: Counter[Any] = Counter()
    outside: Counter[Any] = Counter()
    in_loop = False

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal in_loop
        if event == "call":
            code = frame.f_code
            if code is serve_code:
                in_loop = True
            (inside if in_loop else outside)[code] += 1
        elif event == "c_call":
            if not in_loop:
                outside[arg] += 1
            elif frame.f_code is spin_code:
                outside["(the spin's polls, clocks and yields)"] += 1
            else:
                inside[arg, frame.f_code] += 1  # a builtin by its caller: which len() it is
        elif event == "return" and frame.f_code is serve_code:
            in_loop = False  # suspended (a trio turn, a sleep) or done

    def start(signum: int, _frame: Any) -> None:
        sys.setprofile(hook)

    def stop(signum: int, _frame: Any) -> None:
        sys.setprofile(None)
        with open(out, "w") as f:
            for where, counts in (("in", inside), ("out", outside)):
                for key, n in counts.items():
                    f.write(f"{where}\t{n}\t{_label(key)}\n")

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    return main(argv)


# -- the client side ---------------------------------------------------------------------------


def _pubs(sock: socket.socket, n: int, body: bytes) -> None:
    frame = b"PUB t\n" + struct.pack(">I", len(body)) + body
    for _ in range(n):
        sock.sendall(frame)
        got = b""
        while len(got) < 10:
            chunk = sock.recv(10 - len(got))
            if not chunk:
                raise RuntimeError("the daemon closed the connection")
            got += chunk
        if got[8:] != b"OK":
            raise RuntimeError(f"not OK: {got!r}")


def measure(name: str, warmup: int, count: int) -> tuple[Counter[str], Counter[str]]:
    from nsqd_process import HOST, address_flags, free_ports, port_open, pythonpath_env, terminate

    flags, default_warmup = CONFIGS[name]
    warmup = default_warmup if warmup < 0 else warmup
    with tempfile.TemporaryDirectory() as tmp:
        tcp, http_port = free_ports(2)
        out = Path(tmp, "counts.tsv")
        env = pythonpath_env() | {ENV: str(out)}
        argv = [sys.executable, __file__, *address_flags(tcp, http_port, tmp), *flags]
        with open(Path(tmp, "log"), "wb") as log:
            proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=log)
        try:
            deadline = time.monotonic() + 20
            while not port_open(tcp) or not port_open(http_port):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(Path(tmp, "log").read_text())
                time.sleep(0.05)
            web = http.client.HTTPConnection(HOST, http_port)
            for path in ("/topic/create?topic=t", "/channel/create?topic=t&channel=c"):
                web.request("POST", path)
                answer = web.getresponse()
                if answer.status != 200:
                    raise RuntimeError(f"{path}: {answer.status} {answer.read()!r}")
                answer.read()
            web.close()
            sock = socket.create_connection((HOST, tcp))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(b"  V2")
            body = b"x" * 200
            _pubs(sock, warmup, body)
            proc.send_signal(signal.SIGUSR1)
            time.sleep(0.2)  # the hook is on (the loop is asleep: the signal wakes it)
            _pubs(sock, count, body)
            proc.send_signal(signal.SIGUSR2)
            deadline = time.monotonic() + 20
            while not out.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.2)
            sock.close()
        finally:
            terminate(proc, 10)
        inside: Counter[str] = Counter()
        outside: Counter[str] = Counter()
        for line in out.read_text().splitlines():
            where, n, label = line.split("\t")
            (inside if where == "in" else outside)[label] += int(n)
    return inside, outside


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--warmup", type=int, default=-1, help="PUBs before (default: per config)")
    p.add_argument("--count", type=int, default=2000, help="PUBs measured")
    p.add_argument("--top", type=int, default=60, help="functions listed per configuration")
    p.add_argument("--only", default=",".join(CONFIGS), help="configurations, comma-separated")
    args = p.parse_args()
    for name in args.only.split(","):
        inside, outside = measure(name, args.warmup, args.count)
        n = args.count
        builtins = sum(c for label, c in inside.items() if label.startswith("<c> "))
        total = sum(inside.values())
        print(
            f"== {name}: {total / n:.2f} calls per PUB in the loop task"
            f" ({(total - builtins) / n:.2f} Python functions, {builtins / n:.2f} builtins)"
        )
        for label, calls in sorted(inside.items(), key=lambda kv: (-kv[1], kv[0]))[: args.top]:
            print(f"{calls / n:8.3f}  {label}")
        print(f"   outside the loop task or in its spin: {sum(outside.values()) / n:.2f} per PUB")
        for label, calls in sorted(outside.items(), key=lambda kv: (-kv[1], kv[0]))[: args.top]:
            print(f"{calls / n:8.3f}  {label}")
    return 0


if __name__ == "__main__":
    out = os.environ.get(ENV)
    sys.exit(_daemon(out, sys.argv[1:]) if out else main())
