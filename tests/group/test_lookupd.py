"""A group behind nsqlookupd: registered once, as one nsqd (the supervisor holds the
connection and registers the union of the workers' topics and channels), through a worker's
restart, a topic's deletion and a change of the nsqlookupd addresses; go-nsq and pynsq
consumers that only know nsqlookupd find the group's address and receive what every worker
took. The topic is made over HTTP, which makes it in every worker, and the consumers subscribe
before anything is published (a message that waits in a topic without channels goes to its
first channel only, in nsqd as here)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request

from tests.ops.conftest import (  # noqa: F401 (a fixture)
    START_TIMEOUT,
    Launcher,
    Proc,
    http_json,
    http_post,
    launcher,
    wait_until,
)
from tests.ops.test_lookupd import (  # noqa: F401 (a fixture)
    PYNSQ_CONSUMER,
    WAIT,
    channels,
    gonsq_consumer,
    producers,
)

from .conftest import Group


def rows(lookupd: Proc) -> dict[str, int]:
    """How many producers nsqlookupd lists under each registration (category:topic:channel)."""
    db = http_json(f"http://{lookupd.addr('http')}/debug")
    return {key: len(found) for key, found in db.items() if found}


def nodes(lookupd: Proc) -> list[dict]:
    return http_json(f"http://{lookupd.addr('http')}/nodes")["producers"]


def put_lookupd_addresses(group: Group, addresses: list[str]) -> int:
    body = ("[" + ",".join(f'"{a}"' for a in addresses) + "]").encode()
    url = f"http://127.0.0.1:{group.http}/config/nsqlookupd_tcp_addresses"
    req = urllib.request.Request(url, data=body, method="PUT")
    with urllib.request.urlopen(req, timeout=5) as resp:
        return resp.status


def test_the_group_registers_once(launcher: Launcher, group: Group) -> None:  # noqa: F811
    lookupd = launcher.nsqlookupd()
    group.start(f"--lookupd-tcp-address={lookupd.addr('tcp')}", "--broadcast-address=127.0.0.1")
    with group.pin(1) as pub:
        pub.pub("only-in-1", b"x")  # a topic that worker 1 alone has
    with group.pin(0) as sub:
        sub.sub("both", "c")  # a channel made in every worker
    wanted = {
        "client::": 1,
        "topic:only-in-1:": 1,
        "topic:both:": 1,
        "channel:both:c": 1,
    }
    wait_until(lambda: rows(lookupd) == wanted, WAIT, "one registration of each")
    (node,) = nodes(lookupd)
    assert (node["tcp_port"], node["http_port"]) == (group.tcp, group.http)
    assert sorted(node["topics"]) == ["both", "only-in-1"]

    # worker 1 killed: its topic stays registered while it is down and after its restart
    before = group.pids()[1]
    os.kill(before, signal.SIGKILL)
    seen = []
    deadline = time.monotonic() + START_TIMEOUT
    while not (group.pids()[1] != before and group.link(1)) and time.monotonic() < deadline:
        seen.append(rows(lookupd))
        time.sleep(0.02)
    assert group.pids()[1] != before and group.link(1)
    assert seen and all(r == wanted for r in seen), seen
    time.sleep(0.3)  # the restarted worker's state has reached the supervisor
    assert rows(lookupd) == wanted

    # deleted in the group: unregistered once no worker has it
    url = f"http://127.0.0.1:{group.http}"
    assert http_post(f"{url}/channel/delete?topic=both&channel=c")[0] == 200
    wanted.pop("channel:both:c")
    wait_until(lambda: rows(lookupd) == wanted, WAIT, "the channel unregistered")
    assert http_post(f"{url}/topic/delete?topic=only-in-1")[0] == 200
    wanted.pop("topic:only-in-1:")
    wait_until(lambda: rows(lookupd) == wanted, WAIT, "the topic unregistered")

    # the group's nsqlookupd addresses: none, then this one again (the whole state replayed)
    assert put_lookupd_addresses(group, []) == 200
    wait_until(lambda: not nodes(lookupd), WAIT, "the group gone from nsqlookupd")
    with group.pin(1) as pub:
        pub.pub("later", b"x")
    assert put_lookupd_addresses(group, [lookupd.addr("tcp")]) == 200
    wanted["topic:later:"] = 1
    wait_until(lambda: rows(lookupd) == wanted, WAIT, "registered again")
    assert "worker 1 exited (signal 9)" in group.log_text()


def test_gonsq_and_pynsq_consumers_find_the_group_through_lookupd(
    launcher: Launcher,  # noqa: F811
    gonsq_consumer,  # noqa: F811
    group: Group,
) -> None:
    lookupd = launcher.nsqlookupd()
    group.start(f"--lookupd-tcp-address={lookupd.addr('tcp')}", "--broadcast-address=127.0.0.1")
    topic, n = "found", 20
    assert http_post(f"http://127.0.0.1:{group.http}/topic/create?topic={topic}")[0] == 200
    wait_until(lambda: producers(lookupd, topic), WAIT, "the topic in lookupd")
    assert [p["tcp_port"] for p in producers(lookupd, topic)] == [group.tcp]
    http = lookupd.addr("http")
    gonsq = ("-lookupd", http, "-topic", topic, "-channel", "gonsq", "-n", str(n))
    pynsq = ("--lookupd", http, "--topic", topic, "--channel", "pynsq", "--n", str(n))
    argv = {
        "gonsq": [str(gonsq_consumer), *gonsq, "-timeout", "40s"],
        "pynsq": [sys.executable, str(PYNSQ_CONSUMER), *pynsq, "--timeout", "40"],
    }
    procs = {
        name: subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=open(group.workdir / f"{name}.err", "wb"),  # noqa: SIM115
            text=True,
        )
        for name, args in argv.items()
    }
    try:
        wait_until(lambda: {"gonsq", "pynsq"} <= set(channels(lookupd, topic)), 30, "consumers")
        # a channel made by a SUB reaches the other worker a moment later (docs/workers.md):
        # published before that, a message there goes to the channels it already has
        wait_until(
            lambda: all({"gonsq", "pynsq"} <= _channels_in(group, k, topic) for k in (0, 1)),
            WAIT,
            "both channels in both workers",
        )
        bodies = []
        for k in (0, 1):
            with group.pin(k) as pub:
                for i in range(n // 2):
                    body = f"{k}-{i}"
                    pub.pub(topic, body.encode())
                    bodies.append(body)
        for name, proc in procs.items():
            out, _ = proc.communicate(timeout=45)
            err = (group.workdir / f"{name}.err").read_text(errors="replace")[-3000:]
            assert proc.returncode == 0, (name, out, err)
            assert sorted(out.split()) == sorted(bodies), (name, out, err)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)


def _channels_in(group: Group, k: int, topic: str) -> set[str]:
    stats = group.worker_stats(k, f"&topic={topic}")
    return {c["channel_name"] for t in stats["topics"] for c in t["channels"]}
