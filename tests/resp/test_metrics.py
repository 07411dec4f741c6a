"""Redis lists appear in GET /metrics with their length (nsq_resp_list_length{key=...}),
parsed with prometheus_client's parser; without --resp-address the family is absent."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from .helpers import client


def list_lengths(http_port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {
        s.labels["key"]: s.value
        for family in text_string_to_metric_families(text)
        if family.name == "nsq_resp_list_length"
        for s in family.samples
    }


def test_list_lengths_in_metrics(ours) -> None:
    server = ours.start()
    r = client(server.port)
    r.rpush("jobs", "a", "b", "c")
    r.rpush('odd "key"\n', "x")
    r.set("not-a-list", "v")
    assert list_lengths(server.http_port) == {"jobs": 3.0, 'odd "key"\n': 1.0}
    r.lpop("jobs", 3)  # the last pop deletes the key, as in Redis
    assert list_lengths(server.http_port) == {'odd "key"\n': 1.0}
    r.close()
