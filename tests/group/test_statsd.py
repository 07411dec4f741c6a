"""statsd from a group: worker 0 alone pushes, the group's figures (summed as /stats sums
them, the pulling links no clients), so a gauge is the group's, not whichever worker pushed
last, and the counters' deltas add up to what every worker took."""

from __future__ import annotations

import socket

from tests.ops.conftest import HOST, http_post
from tests.ops.test_statsd import collect_pushes, parse

from .conftest import Group


def test_worker_0_pushes_the_groups_figures(group: Group) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.bind((HOST, 0))
        udp.settimeout(0.5)
        group.start(
            f"--statsd-address={HOST}:{udp.getsockname()[1]}",
            "--statsd-interval=2s",
            f"--broadcast-address={HOST}",
        )
        base = f"http://127.0.0.1:{group.http}"
        assert http_post(f"{base}/topic/create?topic=t")[0] == 200
        assert http_post(f"{base}/channel/create?topic=t&channel=c")[0] == 200
        for k, n in ((0, 3), (1, 4)):  # 3 messages taken by worker 0, 4 by worker 1
            with group.pin(k) as pub:
                for i in range(n):
                    pub.pub("t", b"%d-%d" % (k, i))
        prefix = f"nsq.{HOST.replace('.', '_')}_{group.http}."
        pushes = [parse(p, prefix) for p in collect_pushes(udp, 3, timeout=20)]
    channel = "topic.t.channel.c"
    # every push is the group's: one worker's push would say 3 or 4
    settled = [p for p in pushes if f"{channel}.depth" in p][1:]
    assert settled, pushes
    for push in settled:
        assert push[f"{channel}.depth"] == ("g", 7), push
        assert push[f"{channel}.clients"] == ("g", 0), push
        assert push["topic.t.depth"] == ("g", 0), push
    taken = sum(p.get("topic.t.message_count", ("c", 0))[1] for p in pushes)
    assert taken == 7, pushes
