"""A group's admin changes made while a worker is down (killed, not yet started again): once
it is back the group answers as one nsqd would have after the same change. A topic or channel
deleted meanwhile stays deleted (its partition's nsqd.dat still lists it), in the group's
/stats and in nsqlookupd. The worker is held down by stopping the supervisor (SIGSTOP), so
the change is made while it is surely down, then the supervisor goes on and starts it again."""

from __future__ import annotations

import os
import signal

from tests.ops.conftest import (  # noqa: F401 (a fixture)
    START_TIMEOUT,
    Launcher,
    http_json,
    http_post,
    launcher,
    port_open,
    wait_until,
)
from tests.ops.test_lookupd import WAIT

from .conftest import Group
from .test_lookupd import rows


def _queues(stats: dict) -> dict[str, list[str]]:
    topics = stats["topics"]
    return {t["topic_name"]: sorted(c["channel_name"] for c in t["channels"]) for t in topics}


def test_a_deletion_made_while_a_worker_is_down_holds_once_it_is_back(
    launcher: Launcher,  # noqa: F811
    group: Group,
) -> None:
    lookupd = launcher.nsqlookupd()
    group.start(f"--lookupd-tcp-address={lookupd.addr('tcp')}", "--broadcast-address=127.0.0.1")
    url = f"http://127.0.0.1:{group.http}"
    for target in ("topic/create?topic=gone", "topic/create?topic=kept"):
        assert http_post(f"{url}/{target}")[0] == 200
    assert http_post(f"{url}/channel/create?topic=kept&channel=c")[0] == 200
    assert http_post(f"{url}/channel/create?topic=kept&channel=d")[0] == 200
    with group.pin(1) as pub:  # worker 1's partition holds messages of both
        pub.pub("gone", b"x")
        pub.pub("kept", b"y")
    wanted = {"client::": 1, "topic:gone:": 1, "topic:kept:": 1, "channel:kept:c": 1}
    wanted["channel:kept:d"] = 1
    wait_until(lambda: rows(lookupd) == wanted, WAIT, "registered")

    assert group.proc is not None
    before = group.pids()[1]
    group.proc.send_signal(signal.SIGSTOP)  # it starts nobody again until SIGCONT
    try:
        link = group.link(1)
        os.kill(before, signal.SIGKILL)
        # its sockets closed: no connection to the shared ports lands in its listener now
        wait_until(lambda: not port_open(link), START_TIMEOUT, "worker 1 gone")
        assert http_post(f"{url}/topic/delete?topic=gone")[0] == 200
        assert http_post(f"{url}/channel/delete?topic=kept&channel=c")[0] == 200
    finally:
        group.proc.send_signal(signal.SIGCONT)
    listened = group.listened(1)
    wait_until(lambda: group.listened(1) > listened, START_TIMEOUT, "worker 1 back")
    assert group.pids()[1] != before

    expected = {"kept": ["d"]}
    assert _queues(group.worker_stats(1)) == expected  # not back from its nsqd.dat
    assert _queues(http_json(f"{url}/stats?format=json")) == expected
    wanted = {"client::": 1, "topic:kept:": 1, "channel:kept:d": 1}
    wait_until(lambda: rows(lookupd) == wanted, WAIT, "unregistered")
    # and at worker 1's next start: what it deleted is off its disk too
    listened = group.listened(1)
    os.kill(group.pids()[1], signal.SIGKILL)
    wait_until(lambda: group.listened(1) > listened, START_TIMEOUT, "worker 1 back again")
    assert _queues(group.worker_stats(1)) == expected
    assert rows(lookupd) == wanted
