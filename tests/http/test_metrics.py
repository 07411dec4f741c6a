"""GET /metrics (ours; nsqd has no such endpoint): parsed by prometheus_client's text parser and
checked against /stats?format=json for a real workload (HTTP and V2 publishers, V2 consumers
that finish, requeue with a delay, let messages time out and hold one in flight), label escaping
with odd-but-legal names, /stats' filters, an empty daemon, and a scrape by a real Prometheus
(Debian's `prometheus`, installed by scripts/install_prometheus.sh)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import nsqd_process
import pytest
from nsqhttp_support import HOST, Daemon, TCPClient, start, wait_until
from prometheus_client.parser import text_string_to_metric_families

PERCENTILES = "1.0,0.99,0.5"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
ODD_ID = 'we"ird\\id\nx'  # a client_id needing every escape of the format

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    d = start("ours", f"--e2e-processing-latency-percentile={PERCENTILES}")
    try:
        yield d
    finally:
        log = d.log()
        rc = d.stop()
    assert rc == 0, f"nsqd exited {rc} after SIGTERM; log:\n{log[-3000:]}"


@pytest.fixture
def client(daemon: Daemon) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=daemon.url, timeout=5.0) as c:
        yield c


def scrape(client: httpx.Client, **params: str) -> tuple[Samples, dict[str, str]]:
    """The samples of GET /metrics by (name, labels), and each family's type."""
    r = client.get("/metrics", params=params)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == CONTENT_TYPE
    samples: Samples = {}
    types: dict[str, str] = {}
    for family in text_string_to_metric_families(r.text):
        types[family.name] = family.type
        for s in family.samples:
            key = (s.name, frozenset(s.labels.items()))
            assert key not in samples, f"duplicate series {key}"
            samples[key] = s.value
    return samples, types


def stats(client: httpx.Client, **params: str) -> dict[str, Any]:
    r = client.get("/stats", params={"format": "json", **params})
    assert r.status_code == 200, r.text
    return r.json()


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


NODE = {
    "nsq_build_info",
    "nsq_healthy",
    "nsq_start_time_seconds",
    "nsq_uptime_seconds",
    "nsq_client_connections",
}
MEMORY = {
    "nsq_memory_heap_objects",
    "nsq_memory_heap_in_use_bytes",
    "nsq_memory_gc_pause_usec_100",
    "nsq_memory_gc_pause_usec_99",
    "nsq_memory_gc_pause_usec_95",
    "nsq_memory_gc_runs_total",
}
TOPIC_GAUGES = {
    "depth": "nsq_topic_depth",
    "backend_depth": "nsq_topic_backend_depth",
    "paused": "nsq_topic_paused",
    "message_count": "nsq_topic_messages_total",
    "message_bytes": "nsq_topic_message_bytes_total",
}
CHANNEL_GAUGES = {
    "depth": "nsq_channel_depth",
    "backend_depth": "nsq_channel_backend_depth",
    "in_flight_count": "nsq_channel_in_flight",
    "deferred_count": "nsq_channel_deferred",
    "client_count": "nsq_channel_clients",
    "paused": "nsq_channel_paused",
    "message_count": "nsq_channel_messages_total",
    "requeue_count": "nsq_channel_requeued_total",
    "timeout_count": "nsq_channel_timed_out_total",
}
CLIENT_GAUGES = {
    "ready_count": "nsq_client_ready",
    "in_flight_count": "nsq_client_in_flight",
    "message_count": "nsq_client_messages_total",
    "finish_count": "nsq_client_finished_total",
    "requeue_count": "nsq_client_requeued_total",
}


def check_against_stats(samples: Samples, snap: dict[str, Any]) -> int:
    """Every number of /stats' topics, channels, clients and producers equals its metric;
    the number of series checked."""
    checked = 0

    def same(stat: Any, name: str, **labels: str) -> None:
        nonlocal checked
        assert value(samples, name, **labels) == float(stat), (name, labels, stat)
        checked += 1

    for t in snap["topics"] or ():
        tl = {"topic": t["topic_name"]}
        for key, name in TOPIC_GAUGES.items():
            same(t[key], name, **tl)
        check_e2e(samples, t["e2e_processing_latency"], "nsq_topic", tl)
        for c in t["channels"]:
            cl = {**tl, "channel": c["channel_name"]}
            for key, name in CHANNEL_GAUGES.items():
                same(c[key], name, **cl)
            check_e2e(samples, c["e2e_processing_latency"], "nsq_channel", cl)
            for k in c["clients"] or ():
                who = {
                    **cl,
                    "client_id": k["client_id"],
                    "hostname": k["hostname"],
                    "remote_address": k["remote_address"],
                }
                for key, name in CLIENT_GAUGES.items():
                    same(k[key], name, **who)
    for p in snap["producers"] or ():
        for count in p["pub_counts"]:
            who = {
                "topic": count["topic"],
                "client_id": p["client_id"],
                "hostname": p["hostname"],
                "remote_address": p["remote_address"],
            }
            same(count["count"], "nsq_client_published_total", **who)
    return checked


def check_e2e(samples: Samples, e2e: dict[str, Any], prefix: str, labels: dict[str, str]) -> None:
    name = f"{prefix}_e2e_processing_latency_seconds"
    assert value(samples, f"{name}_count", **labels) == e2e["count"]
    for p in e2e["percentiles"]:
        q = {**labels, "quantile": repr(float(p["quantile"]))}
        assert value(samples, name, **q) == pytest.approx(p["value"] / 1e9, rel=1e-12)


def run_workload(daemon: Daemon, client: httpx.Client) -> tuple[TCPClient, TCPClient, TCPClient]:
    """10 messages on work/ch (9 over /mpub, 1 by a V2 producer): a consumer with a 1 s
    msg_timeout takes 9, finishes 5, requeues 2 for a minute and lets 2 time out; another
    holds the 10th in flight. Returns the connections, which the caller closes."""
    assert client.post("/topic/create", params={"topic": "work"}).is_success
    assert client.post("/channel/create", params={"topic": "work", "channel": "ch"}).is_success
    body = b"\n".join(b"body-%d" % i for i in range(9))
    assert client.post("/mpub", params={"topic": "work"}, content=body).is_success
    producer = TCPClient(daemon.tcp_addr, client_id="prod", hostname="ph")
    producer.pub("work", b"tcp-body")
    quick = TCPClient(daemon.tcp_addr, client_id=ODD_ID, hostname="qh", msg_timeout=1000)
    quick.sub("work", "ch")
    quick.rdy(9)
    ids = [quick.message()[0] for _ in range(9)]
    quick.rdy(0)
    for msg_id in ids[:5]:
        quick.fin(msg_id)
    for msg_id in ids[5:7]:
        quick.req(msg_id, 60_000)
    holder = TCPClient(daemon.tcp_addr, client_id="holder", hostname="hh")
    holder.sub("work", "ch")
    holder.rdy(1)
    assert holder.message()[2] == b"tcp-body"
    holder.rdy(0)

    def settled() -> bool:
        c = stats(client, topic="work")["topics"][0]["channels"][0]
        return c["timeout_count"] == 2 and c["deferred_count"] == 2

    wait_until(settled, timeout=10.0)
    return producer, quick, holder


def test_metrics_match_stats_for_a_workload(daemon: Daemon, client: httpx.Client) -> None:
    conns = run_workload(daemon, client)
    quick_addr = f"{HOST}:{conns[1].sock.getsockname()[1]}"
    try:
        snap = stats(client)
        samples, types = scrape(client)
    finally:
        for conn in conns:
            conn.close()
    assert check_against_stats(samples, snap) == 5 + 9 + 2 * 5 + 1  # every figure checked
    work, ch = {"topic": "work"}, {"topic": "work", "channel": "ch"}
    # the workload's own figures, not only /stats' (a renderer and /stats both wrong would pass)
    assert value(samples, "nsq_topic_messages_total", **work) == 10
    assert value(samples, "nsq_topic_channels", **work) == 1
    assert value(samples, "nsq_channel_depth", **ch) == 2  # the two that timed out
    assert value(samples, "nsq_channel_in_flight", **ch) == 1
    assert value(samples, "nsq_channel_deferred", **ch) == 2
    assert value(samples, "nsq_channel_requeued_total", **ch) == 2
    assert value(samples, "nsq_channel_timed_out_total", **ch) == 2
    assert value(samples, "nsq_channel_clients", **ch) == 2
    assert value(samples, "nsq_channel_e2e_processing_latency_seconds_count", **ch) == 5
    assert value(samples, "nsq_channel_e2e_processing_latency_seconds", **ch, quantile="1.0") > 0
    for name in ("dead_lettered", "expired", "dropped"):  # no queue policy set
        assert value(samples, f"nsq_channel_{name}_total", **ch) == 0
    for name in ("expired", "dropped"):
        assert value(samples, f"nsq_topic_{name}_total", **work) == 0
    odd = {**ch, "client_id": ODD_ID, "hostname": "qh"}
    assert value(samples, "nsq_client_finished_total", **odd, remote_address=quick_addr) == 5
    assert value(samples, "nsq_client_requeued_total", **odd, remote_address=quick_addr) == 2
    assert value(samples, "nsq_client_connections") == 3
    assert (value(samples, "nsq_healthy"), value(samples, "nsq_build_info", version="1.3.0")) == (
        1,
        1,
    )
    assert value(samples, "nsq_start_time_seconds") == snap["start_time"]
    assert value(samples, "nsq_memory_heap_in_use_bytes") > 0
    assert types["nsq_channel_requeued"] == "counter"  # the parser drops _total from the name
    assert types["nsq_channel_depth"] == "gauge"
    assert types["nsq_channel_e2e_processing_latency_seconds"] == "summary"


def test_label_escaping_and_odd_topic_names(daemon: Daemon, client: httpx.Client) -> None:
    topic = "a.b_c-d#ephemeral"
    with TCPClient(daemon.tcp_addr, client_id='x"y\\z\nw', hostname="h\\1") as consumer:
        consumer.sub(topic, "e.f_g-h#ephemeral")
        assert client.post("/pub", params={"topic": topic}, content=b"odd").is_success
        wait_until(lambda: stats(client, topic=topic)["topics"][0]["channels"][0]["depth"] == 1)
        raw = client.get("/metrics", params={"topic": topic}).text
        samples, _ = scrape(client, topic=topic)
        snap = stats(client, topic=topic)
    assert 'client_id="x\\"y\\\\z\\nw",hostname="h\\\\1"' in raw
    assert check_against_stats(samples, snap) == 5 + 9 + 5
    labels = {"topic": topic, "channel": "e.f_g-h#ephemeral"}
    assert value(samples, "nsq_channel_depth", **labels) == 1
    assert {dict(k[1]).get("topic") for k in samples} <= {None, topic}


def test_filters_as_stats(daemon: Daemon, client: httpx.Client) -> None:
    for topic, channel in (("f1", "x"), ("f1", "y"), ("f2", "x")):
        assert client.post("/topic/create", params={"topic": topic}).is_success
        r = client.post("/channel/create", params={"topic": topic, "channel": channel})
        assert r.is_success
    samples, _ = scrape(client, topic="f1", channel="y")
    series = {(dict(k[1]).get("topic"), dict(k[1]).get("channel")) for k in samples}
    assert series == {(None, None), ("f1", None), ("f1", "y")}
    assert value(samples, "nsq_topic_channels", topic="f1") == 2  # all, like the topic's e2e
    assert check_against_stats(samples, stats(client, topic="f1", channel="y")) == 5 + 9
    samples, _ = scrape(client, channel="x")
    assert {dict(k[1]).get("channel") for k in samples} == {None, "x"}
    samples, _ = scrape(client, topic="missing", include_mem="false")
    assert {name for name, _ in samples} == NODE
    assert client.get("/metrics?x=%zz").status_code == 400  # a bad escape, as /stats
    r = client.post("/metrics")
    assert (r.status_code, r.json()) == (405, {"message": "METHOD_NOT_ALLOWED"})


def test_empty_daemon() -> None:
    d = start("ours")
    try:
        with httpx.Client(base_url=d.url, timeout=5.0) as c:
            samples, types = scrape(c)
            snap = stats(c)
            no_clients, _ = scrape(c, include_clients="false")
    finally:
        assert d.stop() == 0
    assert snap["topics"] == []
    assert {name for name, _ in samples} == {*NODE, *MEMORY}
    assert value(samples, "nsq_client_connections") == 0
    assert value(samples, "nsq_start_time_seconds") == snap["start_time"]
    assert 0 <= value(samples, "nsq_uptime_seconds") < 60
    assert value(samples, "nsq_memory_gc_runs_total") >= 0
    assert types["nsq_memory_gc_runs"] == "counter"
    assert set(no_clients) == set(samples)


# -- a real Prometheus ---------------------------------------------------------------------------


def prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        subprocess.run(
            ["bash", str(nsqd_process.REPO_ROOT / "scripts" / "install_prometheus.sh")],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=900,
            check=False,
        )
        found = shutil.which("prometheus")
    if found is None:  # a missing tool fails, never skips
        pytest.fail("prometheus not installed (scripts/install_prometheus.sh)", pytrace=False)
    return found


def run_prometheus(target: str, tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = nsqd_process.free_ports(1)[0]
    config = tmp / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: nsqd\n    scrape_interval: 1s\n"
        f"    static_configs:\n      - targets: ['{target}']\n"
    )
    argv = [
        prometheus_binary(),
        f"--config.file={config}",
        f"--storage.tsdb.path={tmp / 'data'}",
        f"--web.listen-address={HOST}:{port}",
    ]
    proc = nsqd_process.launch(argv, tmp / "prometheus.log")
    return proc, f"http://{HOST}:{port}"


def test_scraped_by_prometheus(daemon: Daemon, client: httpx.Client, tmp_path: Path) -> None:
    for _ in range(7):
        assert client.post("/pub", params={"topic": "scraped"}, content=b"m").is_success
    consumer = TCPClient(daemon.tcp_addr, client_id=ODD_ID, hostname="ph")
    consumer.sub("watched", "c")  # a label that needs every escape, through Go's parser
    proc, url = run_prometheus(f"{HOST}:{daemon.http_port}", tmp_path)
    try:
        with httpx.Client(base_url=url, timeout=5.0) as prom:

            def query(q: str) -> list[dict[str, Any]]:
                try:
                    r = prom.get("/api/v1/query", params={"query": q})
                except httpx.TransportError:
                    return []
                return r.json()["data"]["result"] if r.status_code == 200 else []

            result = wait_until(lambda: query('nsq_topic_depth{topic="scraped"}'), timeout=60.0)
            targets = prom.get("/api/v1/targets").json()["data"]["activeTargets"]
            counted = query('nsq_topic_messages_total{topic="scraped"}')
            connections = query("nsq_client_connections")
            ready = query('nsq_client_ready{topic="watched"}')
    finally:
        rc = nsqd_process.terminate(proc, 10.0)
        consumer.close()
    log = (tmp_path / "prometheus.log").read_text(errors="replace")
    assert [(t["health"], t["lastError"]) for t in targets] == [("up", "")], log[-2000:]
    assert result[0]["value"][1] == "7"
    assert result[0]["metric"]["job"] == "nsqd"
    assert counted[0]["value"][1] == "7"
    assert connections[0]["value"][1] == "1"
    assert [(r["metric"]["client_id"], r["metric"]["channel"]) for r in ready] == [(ODD_ID, "c")]
    assert rc == 0, log[-2000:]
