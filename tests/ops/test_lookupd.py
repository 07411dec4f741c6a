"""nsqlookupd: our nsqd registers with the real nsqlookupd v1.3.0 as nsqd does; clients that only
know the lookupd HTTP address (go-nsq v1.1.0, pynsq 0.9.1) find our topic and consume."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.append(str(Path(__file__).resolve().parents[2] / "scripts"))
import gobuild

from .conftest import HOST, V2, Launcher, Proc, http_get, http_json, http_post, wait_until

GONSQ_DIR = Path(__file__).resolve().parent / "gonsq"
GONSQ_BIN = GONSQ_DIR / "bin" / "lookupd-consumer"
PYNSQ_CONSUMER = Path(__file__).resolve().parent / "pynsq_consumer.py"
WAIT = 10.0


def lookup(lookupd: Proc, topic: str) -> dict[str, Any] | None:
    status, body = http_get(f"http://{lookupd.addr('http')}/lookup?topic={topic}")
    if status == 404:
        return None
    assert status == 200, body

    return json.loads(body)


def producers(lookupd: Proc, topic: str) -> list[dict[str, Any]]:
    found = lookup(lookupd, topic)
    return (found or {}).get("producers") or []


def channels(lookupd: Proc, topic: str) -> list[str]:
    return http_json(f"http://{lookupd.addr('http')}/channels?topic={topic}")["channels"] or []


def registrations(lookupd: Proc) -> set[str]:
    """nsqlookupd's registration keys (category:topic:channel) that list a producer."""
    db = http_json(f"http://{lookupd.addr('http')}/debug")
    return {key for key, found in db.items() if found}


def start_pair(launcher: Launcher, kind: str, *args: str) -> tuple[Proc, Proc]:
    lookupd = launcher.nsqlookupd()
    nsqd = launcher.nsqd(
        kind, f"--lookupd-tcp-address={lookupd.addr('tcp')}", f"--broadcast-address={HOST}", *args
    )
    return lookupd, nsqd


def create_topic(nsqd: Proc, topic: str) -> None:
    status, body = http_post(f"http://{nsqd.addr('http')}/topic/create?topic={topic}")
    assert status == 200, body


@pytest.mark.parametrize("kind", ["ours", "reference"])
def test_registers_topic_and_channel(launcher: Launcher, kind: str) -> None:
    lookupd, nsqd = start_pair(launcher, kind)
    node = wait_until(
        lambda: http_json(f"http://{lookupd.addr('http')}/nodes")["producers"], WAIT, "the node"
    )[0]
    assert node["broadcast_address"] == HOST
    assert node["hostname"] == socket.gethostname()
    assert node["tcp_port"] == nsqd.ports["tcp"]
    assert node["http_port"] == nsqd.ports["http"]
    assert node["version"] == "1.3.0"

    pub = V2(nsqd.ports["tcp"])
    pub.pub("reg_topic", b"x")
    found = wait_until(lambda: producers(lookupd, "reg_topic"), WAIT, "/lookup to list us")
    assert [(p["broadcast_address"], p["tcp_port"]) for p in found] == [(HOST, nsqd.ports["tcp"])]
    sub = V2(nsqd.ports["tcp"])
    sub.sub("reg_topic", "reg_channel")
    wait_until(lambda: "reg_channel" in channels(lookupd, "reg_topic"), WAIT, "the channel")
    assert "reg_topic" in http_json(f"http://{lookupd.addr('http')}/topics")["topics"]
    nodes = http_json(f"http://{lookupd.addr('http')}/nodes")["producers"]
    assert nodes[0]["topics"] == ["reg_topic"]
    pub.close()
    sub.close()


@pytest.mark.parametrize("kind", ["ours", "reference"])
def test_topic_and_channel_delete_unregister(launcher: Launcher, kind: str) -> None:
    lookupd, nsqd = start_pair(launcher, kind)
    create_topic(nsqd, "del_topic")
    status, _ = http_post(
        f"http://{nsqd.addr('http')}/channel/create?topic=del_topic&channel=del_channel"
    )
    assert status == 200
    wait_until(lambda: "del_channel" in channels(lookupd, "del_topic"), WAIT, "the channel")
    lookup_url = f"http://{lookupd.addr('http')}/lookup?topic=del_topic"
    assert http_json(lookup_url)["producers"]

    assert registrations(lookupd) == {
        "client::",
        "topic:del_topic:",
        "channel:del_topic:del_channel",
    }

    status, _ = http_post(
        f"http://{nsqd.addr('http')}/channel/delete?topic=del_topic&channel=del_channel"
    )
    assert status == 200
    wait_until(
        lambda: registrations(lookupd) == {"client::", "topic:del_topic:"},
        WAIT,
        "the channel to be unregistered",
    )
    status, _ = http_post(f"http://{nsqd.addr('http')}/topic/delete?topic=del_topic")
    assert status == 200
    wait_until(lambda: registrations(lookupd) == {"client::"}, WAIT, "the topic to be unregistered")
    assert not producers(lookupd, "del_topic")


@pytest.mark.parametrize("kind", ["ours", "reference"])
def test_ephemeral_channel_goes_from_lookupd_with_its_last_client(
    launcher: Launcher, kind: str
) -> None:
    lookupd, nsqd = start_pair(launcher, kind)
    sub = V2(nsqd.ports["tcp"])
    sub.sub("eph_topic", "tmp#ephemeral")
    wait_until(lambda: "tmp#ephemeral" in channels(lookupd, "eph_topic"), WAIT, "the channel")
    sub.close()
    wait_until(lambda: not channels(lookupd, "eph_topic"), WAIT, "the channel to go")


@pytest.mark.parametrize("kind", ["ours", "reference"])
def test_broadcast_flags(launcher: Launcher, kind: str) -> None:
    lookupd = launcher.nsqlookupd()
    launcher.nsqd(
        kind,
        f"--lookupd-tcp-address={lookupd.addr('tcp')}",
        "--broadcast-address=nsqd-7.example.test",
        "--broadcast-tcp-port=14150",
        "--broadcast-http-port=14151",
    )
    node = wait_until(
        lambda: http_json(f"http://{lookupd.addr('http')}/nodes")["producers"], WAIT, "the node"
    )[0]
    assert (node["broadcast_address"], node["tcp_port"], node["http_port"]) == (
        "nsqd-7.example.test",
        14150,
        14151,
    )
    assert node["remote_address"].startswith(f"{HOST}:")


def test_lookupd_restart_reregisters(launcher: Launcher) -> None:
    lookupd, nsqd = start_pair(launcher, "ours")
    create_topic(nsqd, "rr_topic")
    sub = V2(nsqd.ports["tcp"])
    sub.sub("rr_topic", "rr_channel")
    wait_until(lambda: "rr_channel" in channels(lookupd, "rr_topic"), WAIT, "the channel")
    tcp, http = lookupd.ports["tcp"], lookupd.ports["http"]
    assert lookupd.stop() == 0
    launcher.procs.remove(lookupd)
    time.sleep(0.5)
    again = launcher.nsqlookupd(tcp=tcp, http=http)  # a new nsqlookupd knows nothing...
    # ... until our nsqd reconnects and replays IDENTIFY and every REGISTER
    wait_until(lambda: "rr_channel" in channels(again, "rr_topic"), 20, "re-registration")
    assert [p["tcp_port"] for p in producers(again, "rr_topic")] == [nsqd.ports["tcp"]]
    sub.close()


def test_two_lookupds(launcher: Launcher) -> None:
    one, two = launcher.nsqlookupd(), launcher.nsqlookupd()
    nsqd = launcher.nsqd(
        "ours",
        f"--lookupd-tcp-address={one.addr('tcp')}",
        f"--lookupd-tcp-address={two.addr('tcp')}",
        f"--broadcast-address={HOST}",
    )
    create_topic(nsqd, "two_topic")
    for lookupd in (one, two):
        wait_until(lambda lk=lookupd: producers(lk, "two_topic"), WAIT, "both lookupds")


# -- real clients that only know nsqlookupd ---------------------------------------------------


@pytest.fixture(scope="session")
def gonsq_consumer() -> Path:
    """Build tests/ops/gonsq (go-nsq v1.1.0 per go.mod/go.sum) unless up to date."""
    try:
        return gobuild.build(GONSQ_DIR, GONSQ_BIN)
    except gobuild.GoBuildError as exc:
        pytest.fail(f"the go-nsq consumer did not build: {exc}", pytrace=False)


@pytest.mark.parametrize("kind", ["ours", "reference"])
def test_gonsq_and_pynsq_consumers_find_our_topic_through_lookupd(
    launcher: Launcher, gonsq_consumer: Path, kind: str
) -> None:
    lookupd, nsqd = start_pair(launcher, kind)
    topic, n = "found_by_lookup", 5
    create_topic(nsqd, topic)
    wait_until(lambda: producers(lookupd, topic), WAIT, "the topic in lookupd")
    lookupd_http = lookupd.addr("http")
    logs = launcher.workdir
    consumers = {
        "gonsq": [
            str(gonsq_consumer),
            "-lookupd",
            lookupd_http,
            "-topic",
            topic,
            "-channel",
            "gonsq",
            "-n",
            str(n),
            "-timeout",
            "40s",
        ],
        "pynsq": [
            sys.executable,
            str(PYNSQ_CONSUMER),
            "--lookupd",
            lookupd_http,
            "--topic",
            topic,
            "--channel",
            "pynsq",
            "--n",
            str(n),
            "--timeout",
            "40",
        ],
    }
    procs = {}
    for name, argv in consumers.items():
        procs[name] = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=open(logs / f"{name}.err", "wb"),  # noqa: SIM115
            text=True,
        )
    try:
        # both subscribed (their channels registered) before anything is published
        wait_until(
            lambda: {"gonsq", "pynsq"} <= set(channels(lookupd, topic)), 30, "both consumers"
        )
        pub = V2(nsqd.ports["tcp"])
        bodies = [f"msg-{i}" for i in range(n)]
        for body in bodies:
            pub.pub(topic, body.encode())
        pub.close()
        for name, proc in procs.items():
            out, _ = proc.communicate(timeout=45)
            err = (logs / f"{name}.err").read_text(errors="replace")[-3000:]
            assert proc.returncode == 0, (name, out, err)
            assert sorted(out.split()) == bodies, (name, out, err)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)


@pytest.mark.parametrize("kind", ["ours", "reference"])
def test_new_topic_gets_the_channels_the_cluster_knows(launcher: Launcher, kind: str) -> None:
    """nsqd's GetTopic: a topic new to this node first asks nsqlookupd for its channels, so the
    first message reaches a channel that consumers elsewhere in the cluster use (our query
    goes through a small h11 client, not an HTTP library imported on the event loop)."""
    lookupd = launcher.nsqlookupd()
    other = launcher.nsqd(
        "reference", f"--lookupd-tcp-address={lookupd.addr('tcp')}", f"--broadcast-address={HOST}"
    )
    create_topic(other, "known")
    status, body = http_post(f"http://{other.addr('http')}/channel/create?topic=known&channel=c9")
    assert status == 200, body
    wait_until(lambda: "c9" in channels(lookupd, "known"), WAIT, "the channel in nsqlookupd")
    nsqd = launcher.nsqd(
        kind, f"--lookupd-tcp-address={lookupd.addr('tcp')}", f"--broadcast-address={HOST}"
    )
    wait_until(
        lambda: len(http_json(f"http://{lookupd.addr('http')}/nodes")["producers"]) == 2,
        WAIT,
        "both nodes",
    )
    V2(nsqd.ports["tcp"]).pub("known", b"first")

    def held() -> list[tuple[str, int]]:
        stats = http_json(f"http://{nsqd.addr('http')}/stats?format=json&topic=known")
        return [(c["channel_name"], c["depth"]) for c in stats["topics"][0]["channels"]]

    # ours answers the PUB at once and fans the message out when nsqlookupd has answered
    assert wait_until(lambda: held() == [("c9", 1)], WAIT, "the channel with the message")
