"""Consuming over HTTP (issue 17): POST /channel/receive?n=B then POST /message/fin with the B
ids in the body, in batches of 100 and 1,000 (JSON, and nsqd message frames with `Accept:
application/octet-stream`), beside TCP consumption (RDY 2500, FINs batched per read), each on a
fresh daemon holding the same 200k-message backlog in memory; medians of --repeat runs.

    python bench/http_receive.py [--repeat 3] [--total 200000]

Each run checks that it consumed every message exactly once (the channel ends empty), and fails
loudly."""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "scripts"))

from clients import consume, publish_mpub  # noqa: E402
from nsqv2 import Connection  # noqa: E402
from ours import make_channel, our_daemon  # noqa: E402
from workloads import MPUB_BATCH, MSG_SIZE, RDY, THROUGHPUT_IDENTIFY  # noqa: E402

from protocol.v2 import FrameDecoder, decode_message  # noqa: E402

TOPIC = "recv_bench"


def http_consume(port: int, total: int, batch: int, binary: bool) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Accept": "application/octet-stream"} if binary else {}
    got = 0
    seen: set[bytes] = set()
    while got < total:
        conn.request("POST", f"/channel/receive?topic={TOPIC}&channel=ch&n={batch}", b"", headers)
        resp = conn.getresponse()
        raw = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"receive: {resp.status} {raw[:200]!r}")
        if binary:
            ids = [decode_message(f.data).id for f in FrameDecoder().feed(raw)]
        else:
            msgs = json.loads(raw)["messages"]
            ids = [m["id"].encode() for m in msgs]
            for m in msgs:
                base64.b64decode(m["body"])  # what a reader pays to get the body
        if not ids:
            break
        conn.request("POST", f"/message/fin?topic={TOPIC}&channel=ch", b"\n".join(ids))
        resp = conn.getresponse()
        doc = json.loads(resp.read())
        if doc["ok"] != len(ids):
            raise RuntimeError(f"fin: {doc}")
        seen.update(ids)
        got += len(ids)
    conn.close()
    if len(seen) != got:
        raise RuntimeError(f"{got - len(seen)} messages received twice")
    return got


def one_run(mode: str, total: int) -> float:
    with our_daemon("--mem-queue-size=1000000") as (addr, http_port):
        deadline = time.monotonic() + 300
        make_channel(addr, TOPIC, "ch")
        publish_mpub(addr, TOPIC, total, MPUB_BATCH, MSG_SIZE, deadline)
        start = time.perf_counter()
        if mode == "tcp":
            with Connection(addr) as conn:
                conn.identify(THROUGHPUT_IDENTIFY, deadline)
                conn.subscribe(TOPIC, "ch", RDY, deadline)
                received = consume(conn, total, deadline)
        else:
            kind, batch = mode.split("-")
            received = http_consume(http_port, total, int(batch), kind == "binary")
        elapsed = time.perf_counter() - start
        if received != total:
            raise RuntimeError(f"{mode}: consumed {received} of {total}")
        return total / elapsed


MODES = {
    "tcp": "TCP, RDY 2500, FIN per message",
    "json-100": "HTTP receive+fin, 100 per request, JSON",
    "json-1000": "HTTP receive+fin, 1,000 per request, JSON",
    "binary-100": "HTTP receive+fin, 100 per request, frames",
    "binary-1000": "HTTP receive+fin, 1,000 per request, frames",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--total", type=int, default=200_000)
    args = parser.parse_args()
    runs: dict[str, list[float]] = {m: [] for m in MODES}
    for i in range(args.repeat):
        for mode in MODES:
            rate = one_run(mode, args.total)
            runs[mode].append(rate)
            print(f"[{i + 1}] {mode}: {rate:,.0f} msgs/s")
    tcp = statistics.median(runs["tcp"])
    print(f"\n{'consume a 200k backlog (ours)':45} {'msgs/s':>10} {'vs TCP':>7}")
    for mode, label in MODES.items():
        rate = statistics.median(runs[mode])
        print(f"{label:45} {rate:>10,.0f} {rate / tcp:>6.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
