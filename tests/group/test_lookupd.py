"""A group behind nsqlookupd: go-nsq and pynsq consumers that only know nsqlookupd find the
group's address and receive what every worker took. Each worker registers (one producer
row each, all with the group's one address: clients connect to it once). The topic is made
over HTTP, which makes it in every worker, and the consumers subscribe before anything is
published (a message that waits in a topic without channels goes to its first channel only,
in nsqd as here)."""

from __future__ import annotations

import subprocess
import sys

from tests.ops.conftest import Launcher, http_post, launcher, wait_until  # noqa: F401 (a fixture)
from tests.ops.test_lookupd import (  # noqa: F401 (a fixture)
    PYNSQ_CONSUMER,
    WAIT,
    channels,
    gonsq_consumer,
    producers,
)

from .conftest import Group


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
    assert {p["tcp_port"] for p in producers(lookupd, topic)} == {group.tcp}
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
