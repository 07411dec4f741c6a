"""Unit checks of the Go formatting helpers (nsqd/gocompat) and the e2e latency quantiles
(nsqd/metrics/snapshot.py)."""

from __future__ import annotations

import pytest

from nsqd.engine.e2e import E2ELatency
from nsqd.gocompat.json import go_float, go_json
from nsqd.gocompat.timefmt import go_duration, nanoseconds_to_human
from nsqd.metrics.snapshot import e2e_result


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (0, "0s"),
        (1, "1ns"),
        (999, "999ns"),
        (1_000, "1µs"),
        (65_643, "65.643µs"),
        (2_300_000, "2.3ms"),
        (1_000_000_000, "1s"),
        (58_208_313_268, "58.208313268s"),
        (65_000_000_000, "1m5s"),
        (3_600_000_000_000, "1h0m0s"),
        (3_723_500_000_000, "1h2m3.5s"),
        (-1_500_000, "-1.5ms"),
    ],
)
def test_go_duration(ns: int, text: str) -> None:
    assert go_duration(ns) == text


def test_go_json_and_floats() -> None:
    assert go_json({"a": [1, "<&>"], "b": None}) == b'{"a":[1,"\\u003c\\u0026\\u003e"],"b":null}'
    assert go_json({"q": go_float(1.0), "v": go_float(0.99)}) == (b'{"q":1,"v":0.99}')
    assert go_json("é\u2028") == '"é\\u2028"'.encode()


@pytest.mark.parametrize(
    ("ns", "text"),
    [(500, "500.0ns"), (2_323_275, "2.3ms"), (1_500, "1.5us"), (3e9, "3.0s")],
)
def test_nanoseconds_to_human(ns: float, text: str) -> None:
    assert nanoseconds_to_human(ns) == text


def test_e2e_latency_quantiles() -> None:
    e2e = E2ELatency(600.0, [1.0, 0.99, 0.5])
    now = 10**18
    e2e._last_move = now
    assert e2e_result(e2e.buckets(), e2e.percentiles) == {
        "count": 0,
        "percentiles": [
            {"quantile": 1, "value": 0},
            {"quantile": 0.99, "value": 0},
            {"quantile": 0.5, "value": 0},
        ],
    }
    e2e.insert(now - 2_323_275, now_ns=now)  # a lone sample is reported exactly
    result = e2e_result(e2e.buckets(), e2e.percentiles)
    assert result["count"] == 1
    assert [p["value"] for p in result["percentiles"]] == [2_323_275] * 3
    for i in range(1, 1001):  # 1µs .. 1ms
        e2e.insert(now - i * 1000, now_ns=now)
    result = e2e_result(e2e.buckets(), e2e.percentiles)
    values = {p["quantile"]: p["value"] for p in result["percentiles"]}
    assert result["count"] == 1001
    assert values[1] == 2_323_275
    assert abs(values[0.99] - 990_000) / 990_000 < 0.02
    assert abs(values[0.5] - 500_000) / 500_000 < 0.02
    assert e2e_result(None, [0.5]) == {"count": 0, "percentiles": None}


def test_e2e_latency_window_slides() -> None:
    e2e = E2ELatency(2.0, [0.5])  # two generations of one second each
    start = e2e._last_move

    def counts() -> tuple[int, int]:
        return (
            sum(n for n, _ in e2e._previous.values()),
            sum(n for n, _ in e2e._current.values()),
        )

    e2e.insert(start - 1_000, now_ns=start)
    e2e.insert(start - 1_000, now_ns=start + 1_100_000_000)  # the next half window
    assert counts() == (1, 1)
    e2e._rotate(start + 2_300_000_000)  # the first sample has left the window
    assert counts() == (1, 0)
    e2e._rotate(start + 60_000_000_000)  # a long idle spell: nothing left
    assert counts() == (0, 0)
