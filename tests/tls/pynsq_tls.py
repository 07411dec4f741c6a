"""pynsq 0.9.1 (tornado 6) over TLS (verified against a test CA), snappy, deflate, TLS+snappy
and TLS+deflate: per mode, a Writer publishes N messages (half PUB, half MPUB of 50) and a
Reader consumes them; every body must arrive once, and both connections must really have
upgraded (an SSL stream, a snappy/deflate encoder).

    PYTHONPATH=. python tests/tls/pynsq_tls.py --nsqd 127.0.0.1:4150 --ca ca.pem [--modes tls]

Prints ``RESULT PASS|FAIL <mode> <seconds> <detail>`` per mode; exit status 0 when all passed.
Every wait is bounded. Its waits and publishes are the pynsq conformance harness's
(conformance/clients/pynsq/harness.py: the repository's root on PYTHONPATH)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import ssl
import sys
import time
from typing import Any

import nsq
from tornado.iostream import SSLIOStream

from conformance.clients.pynsq.harness import mpub, pub, wait_for

MODES = ("tls", "snappy", "deflate", "tls+snappy", "tls+deflate")


def conn_options(mode: str, ca: str, cert: str | None, key: str | None) -> dict[str, Any]:
    parts = set(mode.split("+"))
    opts: dict[str, Any] = {}
    if "tls" in parts:
        tls: dict[str, Any] = {"ca_certs": ca, "cert_reqs": ssl.CERT_REQUIRED}
        if cert:
            tls.update(certfile=cert, keyfile=key)
        opts.update(tls_v1=True, tls_options=tls)
    if "snappy" in parts:
        opts["snappy"] = True
    if "deflate" in parts:
        opts.update(deflate=True, deflate_level=6)
    return opts


def upgrades(conn: Any) -> set[str]:
    found = set()
    if isinstance(conn.stream, SSLIOStream):
        found.add("tls")
    name = type(getattr(conn, "encoder", None)).__name__
    if name == "SnappyEncoder":
        found.add("snappy")
    elif name == "DeflateEncoder":
        found.add("deflate")
    return found


async def exchange(
    nsqd: str, mode: str, n: int, opts: dict[str, Any], run: str
) -> tuple[bool, str]:
    topic = f"pynsq_tls_{run}_{mode.replace('+', '_')}"
    want = set(mode.split("+"))
    bodies = [f"{mode}-{i}".encode() for i in range(n)]
    w = nsq.Writer([nsqd], reconnect_interval=60.0, **opts)
    seen: dict[bytes, int] = {}

    def on_message(message: Any) -> bool:
        body = bytes(message.body)
        seen[body] = seen.get(body, 0) + 1
        return True

    r = None
    try:
        if not await wait_for(lambda: bool(w.conns), 5.0):
            return False, "Writer did not connect (with its upgrades) within 5s"
        got = upgrades(next(iter(w.conns.values())))
        if got != want:
            return False, f"Writer connection upgraded to {sorted(got)}, want {sorted(want)}"
        half = n // 2
        for body in bodies[:half]:
            await pub(w, topic, body)
        for i in range(half, n, 50):
            await mpub(w, topic, bodies[i : i + 50])
        r = nsq.Reader(
            topic=topic,
            channel="ch",
            message_handler=on_message,
            nsqd_tcp_addresses=[nsqd],
            max_in_flight=100,
            **opts,
        )
        if not await wait_for(lambda: bool(r.conns), 5.0):
            return False, "Reader did not connect within 5s"
        got = upgrades(next(iter(r.conns.values())))
        if got != want:
            return False, f"Reader connection upgraded to {sorted(got)}, want {sorted(want)}"
        await wait_for(lambda: len(seen) >= n, 20.0)
        await asyncio.sleep(0.1)  # room for duplicates to show
        missing = sum(1 for b in bodies if b not in seen)
        dupes = sum(1 for c in seen.values() if c > 1)
        unexpected = len(set(seen) - set(bodies))
        ok = not (missing or dupes or unexpected)
        return ok, (
            f"{len(seen)} received, missing={missing} duplicates={dupes} "
            f"unexpected={unexpected}, upgrades {sorted(want)}"
        )
    finally:
        for client in (w, r):
            if client is not None:
                client.connect_to_nsqd = lambda *a, **k: None
        if r is not None:
            r.close()
        for conn in list(w.conns.values()):
            conn.close()


async def main_async(args: argparse.Namespace) -> int:
    run = str(time.time_ns() % 1_000_000_000)
    failed = 0
    for mode in args.modes.split(","):
        start = time.monotonic()
        opts = conn_options(mode, args.ca, args.cert, args.key)
        try:
            ok, detail = await asyncio.wait_for(exchange(args.nsqd, mode, args.n, opts, run), 40)
        except Exception as exc:  # report, go on with the next mode
            ok, detail = False, f"{type(exc).__name__}: {exc}"
        failed += not ok
        status = "PASS" if ok else "FAIL"
        print(f"RESULT {status} {mode} {time.monotonic() - start:.2f} {detail}", flush=True)
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nsqd", required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--cert")
    parser.add_argument("--key")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("-n", type=int, default=1000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
