"""The sink's options and its HTTP publisher against a real nsqd, without Spark."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from spark_support import Proc, drain, our_nsqd

from pyspark_nsq.addresses import Address
from pyspark_nsq.httppub import HttpPublisher, PublishRefused, mpub_body
from pyspark_nsq.options import OptionError, SinkOptions
from pyspark_nsq.sinkkeys import task_prefix


def test_sink_dedupe_options() -> None:
    opts = SinkOptions.parse({"nsqd": "h:4150,g:5000", "topic": "t"})
    assert opts.dedupe == "auto" and opts.dedupe_key is None
    assert opts.nsqd_http == (Address("h", 4151), Address("g", 5001))
    opts = SinkOptions.parse({"nsqd": "h:1", "nsqdHttp": "h:9", "dedupe": "ON", "dedupeKey": "k"})
    assert (opts.dedupe, opts.dedupe_key, opts.nsqd_http) == ("on", "k", (Address("h", 9),))
    with pytest.raises(OptionError, match="dedupe: 'maybe' is not one of auto, on, off"):
        SinkOptions.parse({"nsqd": "h:1", "dedupe": "maybe"})
    with pytest.raises(OptionError, match="one HTTP address per nsqd"):
        SinkOptions.parse({"nsqd": "h:1,h:2", "nsqdHttp": "h:9"})


def test_no_task_context_no_keys() -> None:
    assert task_prefix(False, "k", "w") is None  # outside a Spark task


def test_mpub_body_is_nsqds_binary_format() -> None:
    assert mpub_body([b"ab", b"c"]) == b"\0\0\0\2" + b"\0\0\0\2ab" + b"\0\0\0\1c"


@pytest.fixture(scope="module")
def dnsqd() -> Iterator[Proc]:
    daemon = our_nsqd(["--dedupe-window=1m", "--max-msg-size=100"])
    try:
        yield daemon
    finally:
        daemon.stop()


def test_http_publisher_keys_and_refusal(dnsqd: Proc, nsqd: Proc) -> None:
    with HttpPublisher(Address.parse(dnsqd.http)) as pub:
        assert pub.dedupe_window() == 60 * 10**9
        pub.mpub("u", [b"a", b"b", b"c"], "p:0", 0)
        pub.mpub("u", [b"b2", b"c\n2", b"d"], "p:0", 1)  # keys p:0/1, /2 seen: only d stored
        pub.mpub("u", [b"e\nf", b"g"], "p:0", 4)  # binary (a newline in a message)
        pub.mpub("u", [b"e2", b"g2", b"h"], "p:0", 4)  # text: /4, /5 seen
        with pytest.raises(PublishRefused, match="HTTP 413 MSG_TOO_BIG"):
            pub.mpub("u", [b"x" * 101], "p:0", 9)  # text form: MSG_TOO_BIG
    assert sorted(drain(dnsqd.tcp, "u", "c", 7)) == [b"a", b"b", b"c", b"d", b"e\nf", b"g", b"h"]
    with HttpPublisher(Address.parse(nsqd.http)) as pub:
        assert pub.dedupe_window() == 0  # ours without --dedupe-window
