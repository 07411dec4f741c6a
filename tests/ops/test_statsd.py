"""statsd: the same metric names and types as nsqd v1.3.0, counters as deltas, nsqd's prefix,
packets no larger than --statsd-udp-packet-size; checked against the real nsqd."""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from nsqd.metrics.statsd import host_key, pack

from .conftest import HOST, V2, Launcher

INTERVAL = "2s"  # nsqd spreads a push over interval - 1s (and panics on a 1s interval)
PACKET_SIZE = 200
KINDS = ("reference", "ours")
LINE = re.compile(r"^(?P<name>[^:]+):(?P<value>-?\d+)\|(?P<type>c|g)$")


@pytest.fixture
def udp() -> Iterator[socket.socket]:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((HOST, 0))
        s.settimeout(0.5)
        yield s


def collect_pushes(sock: socket.socket, count: int, timeout: float) -> list[list[bytes]]:
    """Datagrams grouped into pushes (each push ends with mem.gc_runs); `count` whole pushes."""
    pushes: list[list[bytes]] = []
    current: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(pushes) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"got {len(pushes)} of {count} pushes in {timeout}s: {current}")
        try:
            data = sock.recv(65536)
        except TimeoutError:
            continue
        current.append(data)
        if b"mem.gc_runs:" in data:
            pushes.append(current)
            current = []
    return pushes


def parse(push: list[bytes], prefix: str) -> dict[str, tuple[str, int]]:
    out = {}
    for packet in push:
        for line in packet.decode().splitlines():
            m = LINE.match(line)
            assert m, line
            name = m["name"]
            assert name.startswith(prefix), (name, prefix)
            out[name[len(prefix) :]] = (m["type"], int(m["value"]))
    return out


def scenario(nsqd_tcp: int) -> list[V2]:
    """Topic `st` with 3 messages; channel `ch` with a consumer that FINs one and holds one;
    an ephemeral channel. Returns the connections to keep open while the pushes come."""
    pub = V2(nsqd_tcp)
    sub = V2(nsqd_tcp)
    eph = V2(nsqd_tcp)
    try:
        sub.sub("st", "ch")
        eph.sub("st", "tmp#ephemeral")
        for i in range(3):
            pub.pub("st", b"m%d" % i)
        sub.rdy(2)
        first, _ = sub.message()
        sub.message()
        sub.rdy(0)  # before the FIN, else the freed slot takes the third message
        sub.fin(first)
        time.sleep(0.2)
    finally:
        pub.close()
    # keep `sub` (one message in flight) and `eph` (else the ephemeral channel goes) open
    return [sub, eph]


def run_scenario(
    launcher: Launcher, kind: str, udp: socket.socket, *extra: str
) -> tuple[str, list[dict[str, tuple[str, int]]], list[list[bytes]]]:
    port = udp.getsockname()[1]
    nsqd = launcher.nsqd(
        kind,
        f"--statsd-address={HOST}:{port}",
        f"--statsd-interval={INTERVAL}",
        f"--statsd-udp-packet-size={PACKET_SIZE}",
        f"--broadcast-address={HOST}",
        *extra,
    )
    keep = scenario(nsqd.ports["tcp"])
    try:
        pushes = collect_pushes(udp, 3, timeout=15)
    finally:
        for conn in keep:
            conn.close()
    prefix = f"nsq.{host_key(HOST, nsqd.ports['http'])}."
    return prefix, [parse(p, prefix) for p in pushes], pushes


def names_from_both(launcher: Launcher, *extra: str) -> dict[str, dict[str, str]]:
    """The scenario on the real nsqd and on ours at once (each push waits for the interval),
    each with a statsd socket of its own: the names each pushed, with their types."""

    def names(kind: str) -> dict[str, str]:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.bind((HOST, 0))
            udp.settimeout(0.5)
            _, parsed, _ = run_scenario(launcher, kind, udp, *extra)
        return {n: v[0] for p in parsed for n, v in p.items()}

    with ThreadPoolExecutor(2) as pool:
        found = dict(zip(KINDS, pool.map(names, KINDS), strict=True))
    return found


def _settled(parsed: list[dict[str, tuple[str, int]]]) -> dict[str, tuple[str, int]]:
    return parsed[-1]


@pytest.mark.parametrize("kind", ["ours", "reference"])
def test_statsd_metrics(launcher: Launcher, udp: socket.socket, kind: str) -> None:
    prefix, parsed, raw = run_scenario(launcher, kind, udp)
    assert prefix == f"nsq.127_0_0_1_{launcher.procs[0].ports['http']}."
    last = _settled(parsed)
    t, c = "topic.st", "topic.st.channel.ch"
    expect_types = {
        f"{t}.message_count": "c",
        f"{t}.message_bytes": "c",
        f"{t}.depth": "g",
        f"{t}.backend_depth": "g",
        f"{c}.message_count": "c",
        f"{c}.depth": "g",
        f"{c}.backend_depth": "g",
        f"{c}.in_flight_count": "g",
        f"{c}.deferred_count": "g",
        f"{c}.requeue_count": "c",
        f"{c}.timeout_count": "c",
        f"{c}.clients": "g",
        "mem.heap_objects": "g",
        "mem.heap_idle_bytes": "g",
        "mem.heap_in_use_bytes": "g",
        "mem.heap_released_bytes": "g",
        "mem.gc_pause_usec_100": "g",
        "mem.gc_pause_usec_99": "g",
        "mem.gc_pause_usec_95": "g",
        "mem.next_gc_bytes": "g",
        "mem.gc_runs": "c",
    }
    for name, typ in expect_types.items():
        assert last[name][0] == typ, (name, last.get(name))
    # counters are deltas: over all pushes they add up to the totals
    total = {n: sum(p.get(n, ("c", 0))[1] for p in parsed) for n in expect_types}
    assert total[f"{t}.message_count"] == 3
    assert total[f"{t}.message_bytes"] == 6
    assert total[f"{c}.message_count"] == 3
    assert last[f"{t}.message_count"] == ("c", 0)  # nothing new since the previous push
    assert last[f"{c}.in_flight_count"] == ("g", 1)
    assert last[f"{c}.depth"] == ("g", 1)
    assert last[f"{c}.clients"] == ("g", 1)
    assert last[f"{t}.depth"] == ("g", 0)
    assert last[f"{t}.channel.tmp#ephemeral.clients"] == ("g", 1)
    for push in raw:
        for packet in push:
            assert len(packet) <= PACKET_SIZE
            assert packet.endswith(b"\n")


def test_statsd_names_match_reference(launcher: Launcher) -> None:
    names = names_from_both(launcher)
    assert names["ours"] == names["reference"]


def test_statsd_exclude_ephemeral_and_no_mem(launcher: Launcher, udp: socket.socket) -> None:
    port = udp.getsockname()[1]
    nsqd = launcher.nsqd(
        "ours",
        f"--statsd-address={HOST}:{port}",
        "--statsd-interval=1s",
        "--statsd-exclude-ephemeral",
        "--statsd-mem-stats=false",
        "--statsd-prefix=custom.%s.x",
        "--broadcast-address=my.host",
        "--broadcast-http-port=8080",
    )
    c = V2(nsqd.ports["tcp"])
    c.sub("keep", "ch")
    e = V2(nsqd.ports["tcp"])
    e.sub("gone#ephemeral", "ch")
    f = V2(nsqd.ports["tcp"])
    f.sub("keep2", "x#ephemeral")
    try:
        deadline = time.monotonic() + 10
        seen: set[str] = set()
        while time.monotonic() < deadline and "topic.keep.channel.ch.clients" not in seen:
            try:
                data = udp.recv(65536)
            except TimeoutError:
                continue
            for line in data.decode().splitlines():
                name = LINE.match(line)["name"]  # type: ignore[index]
                assert name.startswith("custom.my_host_8080.x."), name
                seen.add(name[len("custom.my_host_8080.x.") :])
        assert "topic.keep.channel.ch.clients" in seen
        assert "topic.keep2.depth" in seen
        assert not [n for n in seen if "ephemeral" in n], seen
        assert not [n for n in seen if n.startswith("mem.")], seen
    finally:
        for conn in (c, e, f):
            conn.close()


def test_statsd_e2e_percentiles_match_reference(launcher: Launcher) -> None:
    found = names_from_both(launcher, "--e2e-processing-latency-percentile=1.0,0.99,0.5")
    names = {kind: {n for n in found[kind] if "e2e" in n} for kind in KINDS}
    assert "topic.st.channel.ch.e2e_processing_latency_99" in names["reference"]
    assert names["ours"] == names["reference"]


def test_pack_lines_into_packets() -> None:
    lines = [b"a" * 10 + b"\n"] * 5
    assert pack(lines, 22) == [lines[0] * 2, lines[0] * 2, lines[0]]
    assert pack([b"x" * 30], 12) == [b"x" * 12, b"x" * 12, b"x" * 6]
    assert pack([], 508) == []


def test_host_key() -> None:
    assert host_key("my.host", 4151) == "my_host_4151"
    assert host_key("::1", 4151) == "[__1]_4151"
