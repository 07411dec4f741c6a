"""Connector pieces without Spark: command bytes (checked with the project's own V2 parser),
addresses, options, lookupd/stats JSON, schema checks, partition reading."""

from __future__ import annotations

import datetime as dt

import pytest

import protocol.v2 as p
from protocol.v2 import encoders as commands
from pyspark_nsq.addresses import Address, parse_list
from pyspark_nsq.conn import parse_error
from pyspark_nsq.http import parse_channel_counts, parse_producers
from pyspark_nsq.options import OptionError, SinkOptions, SourceOptions

MSG_ID = b"0123456789abcdef"


def parse_all(data: bytes) -> list[object]:
    conn = p.V2Connection()
    conn.receive_data(data)
    events: list[object] = []
    while True:
        event = conn.next_command()
        if event is p.PAUSED:
            conn.resume()
            continue
        if event is p.NEED_DATA:
            return events
        events.append(event)


def test_commands_parse_as_nsqd_parses_them() -> None:
    wire = b"".join(
        [
            p.MAGIC_V2,
            commands.identify({"msg_timeout": 5000, "feature_negotiation": True}),
            commands.pub("t", b"x\ny"),
            commands.mpub("t", [b"a", b"\n", b"ccc"]),
            commands.sub("t", "c#ephemeral"),
            commands.rdy(2500),
            commands.fin(MSG_ID),
            commands.touch(MSG_ID),
            commands.req(MSG_ID, 1500),
            commands.NOP,
            commands.CLS,
        ]
    )
    events = parse_all(wire)
    assert isinstance(events[0], p.Identify) and events[0].settings.msg_timeout_ms == 5000
    assert events[1:] == [
        p.Pub("t", b"x\ny"),
        p.MPubStart("t"),
        p.MPub("t", [b"a", b"\n", b"ccc"]),
        p.Sub("t", "c#ephemeral"),
        p.Rdy(2500),
        p.Fin([MSG_ID]),
        p.Touch(MSG_ID),
        p.Req(MSG_ID, 1500),
        p.Nop(),
        p.Cls(),
    ]
    mpub = commands.mpub("t", [b"ab", b"cd"])
    assert commands.mpub_size(4, 2) == len(mpub) - len(b"MPUB t\n") - 4


def test_error_frames_map_to_protocol_errors() -> None:
    err = parse_error(b"E_FIN_FAILED FIN 0123 failed")
    assert err.code == p.ErrorCode.E_FIN_FAILED and not err.fatal
    assert parse_error(b"E_BAD_BODY IDENTIFY msg timeout (1) is invalid").fatal
    assert parse_error(b"garbage").fatal


def test_addresses() -> None:
    assert Address.parse("127.0.0.1:4150") == Address("127.0.0.1", 4150)
    assert Address.parse("http://localhost:4161/") == Address("localhost", 4161)
    assert Address.parse("[::1]:4150") == Address("::1", 4150)
    assert str(Address("::1", 4150)) == "[::1]:4150"
    assert parse_list(" a:1, b:2\nc:3 ", what="x") == [
        Address("a", 1),
        Address("b", 2),
        Address("c", 3),
    ]
    for bad in ("nohost", ":1", "h:0", "h:99999", "h:x"):
        with pytest.raises(ValueError, match="expected host:port"):
            Address.parse(bad)


def test_source_options() -> None:
    opts = SourceOptions.parse(
        {
            "nsqd": "127.0.0.1:4150,127.0.0.1:5150",
            "topic": "t",
            "channel": "c",
            "maxmessagespertrigger": "10",
            "rdy": "7",
        }
    )
    assert opts.nsqd_http == (Address("127.0.0.1", 4151), Address("127.0.0.1", 5151))
    assert (opts.max_messages_per_trigger, opts.rdy, opts.msg_timeout_ms) == (10, 7, 60_000)
    for options, message in [
        ({"topic": "t", "channel": "c"}, "set option 'nsqd'"),
        ({"nsqd": "h:1", "channel": "c"}, "option 'topic' is required"),
        ({"nsqd": "h:1", "topic": "t", "channel": "c", "rdy": "0"}, "below 1"),
        ({"nsqd": "h:1", "topic": "t", "channel": "c", "rdy": "x"}, "not an integer"),
        ({"nsqd": "h:1", "topic": "t", "channel": "c", "nsqdHttp": "a:1,b:2"}, "one HTTP"),
        ({"nsqd": "h:1", "topic": "t" * 65, "channel": "c"}, "not a valid NSQ name"),
        (
            {"nsqd": "h:1", "topic": "t", "channel": "c", "maxMessagesPerTriger": "5"},
            r"unknown option 'maxMessagesPerTriger'; the valid ones are nsqd, nsqdHttp, .*"
            r"maxMessagesPerTrigger, maxBytesPerTrigger",
        ),
        ({"nsqd": "h:1", "topic": "t", "channel": "c", "maxInFlight": "0"}, "below 1"),
    ]:
        with pytest.raises(OptionError, match=message):
            SourceOptions.parse(options)
    sink = SinkOptions.parse({"lookupd": "h:4161", "batchSize": "5"})
    assert (sink.topic, sink.batch_size, sink.lookupd) == (None, 5, (Address("h", 4161),))
    with pytest.raises(
        OptionError,
        match=r"nsq sink: unknown options 'bachSize', 'rdy'; "
        r"the valid ones are nsqd, lookupd, topic, batchSize",
    ):
        SinkOptions.parse({"nsqd": "h:1", "topic": "t", "bachSize": "5", "rdy": "1"})
    # defaults: 32 MiB per trigger, 8 MiB per task, 20,000 in flight per nsqd
    defaults = SourceOptions.parse(
        {"nsqd": "h:1", "topic": "t", "channel": "c", "checkpointLocation": "/x"}
    )
    assert (
        defaults.max_bytes_per_trigger,
        defaults.max_bytes_per_partition,
        defaults.max_in_flight,
        defaults.connections_per_nsqd,
    ) == (32 << 20, 8 << 20, 20_000, None)


def test_in_flight_budget_shares() -> None:
    """maxInFlight spread over connections of at most min(rdy, --max-rdy-count) each."""
    from pyspark_nsq.subscriptions import shares

    assert shares(20_000, 2500, None) == [2500] * 8
    assert shares(20_000, 3000, None) == [2858] + [2857] * 6
    assert shares(5000, 2500, 4) == [1250] * 4
    assert shares(100, 2500, None) == [100]
    assert shares(3, 2500, 5) == [1, 1, 1, 1, 1]  # never RDY 0 on a connection
    assert sum(shares(30_001, 2500, None)) == 30_001


def test_partitions_split_by_bytes() -> None:
    """A batch of large messages becomes tasks of at most maxBytesPerPartition each."""
    from pyspark_nsq.consumer import Held
    from pyspark_nsq.http import Producer
    from pyspark_nsq.planning import driver_partitions, split

    class FakeLink:  # only the address is read
        nsqd = Address("127.0.0.1", 4150)

    def held(n: int, size: int) -> list[Held]:
        return [
            Held(FakeLink(), b"%016d" % i, b"x" * size, 0, 1, 0.0)  # type: ignore[arg-type]
            for i in range(n)
        ]

    assert [len(g) for g in split(held(10, 10), 2, 1 << 20)] == [5, 5]
    groups = split(held(100, 1 << 20), 2, 16 << 20)  # 100 MiB
    assert [len(g) for g in groups] == [15] * 6 + [10]  # 7 tasks of <= 16 MiB
    assert sum(len(g) for g in groups) == 100
    assert [len(g) for g in split(held(2, 5 << 20), 2, 1 << 20)] == [1, 1]  # one alone is ok
    assert split([], 2, 1) == []
    (part,) = driver_partitions(held(3, 1), "t", "c", 1, 1 << 20)
    assert (part.nsqds, part.nsqd_index) == (["127.0.0.1:4150"], [0, 0, 0])
    assert Producer  # the address type the consumer keys on


def test_lookupd_and_stats_json_shapes() -> None:
    # nsqlookupd v1.3 /lookup (plain) and the pre-1.0 envelope
    doc = {
        "channels": ["c"],
        "producers": [
            {
                "remote_address": "127.0.0.1:50000",
                "hostname": "box",
                "broadcast_address": "10.0.0.5",
                "tcp_port": 4150,
                "http_port": 4151,
                "version": "1.3.0",
            }
        ],
    }
    want = [(Address("10.0.0.5", 4150), Address("10.0.0.5", 4151))]
    assert [(x.tcp, x.http) for x in parse_producers(doc)] == want
    wrapped = {"status_code": 200, "status_txt": "OK", "data": doc}
    assert [(x.tcp, x.http) for x in parse_producers(wrapped)] == want
    assert parse_producers(None) == []
    stats = {
        "topics": [
            {
                "topic_name": "t",
                "depth": 3,
                "channels": [
                    {
                        "channel_name": "c",
                        "depth": 5,
                        "in_flight_count": 2,
                        "deferred_count": 1,
                        "client_count": 1,
                    }
                ],
            }
        ]
    }
    counts = parse_channel_counts(stats, "t", "c")
    assert counts is not None and (counts.topic_depth, counts.depth, counts.in_flight) == (3, 5, 2)
    assert parse_channel_counts(stats, "t", "x") is None


def test_schema_checks_and_partition_read() -> None:
    from pyspark.sql.types import BinaryType, IntegerType, StringType, StructField, StructType

    from pyspark_nsq.reader import NsqPartition, NsqStreamReader
    from pyspark_nsq.schema import SchemaError, check_sink_schema, source_schema

    opts = SourceOptions.parse({"nsqd": "h:1", "topic": "t", "channel": "c"})
    full = source_schema()
    reader = NsqStreamReader(opts, full)
    ts = dt.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC)
    us = int(ts.timestamp()) * 1_000_000 + ts.microsecond
    part = NsqPartition(
        [MSG_ID.decode()], [b"\x00\xff"], [us], [2], "t", "c", ["127.0.0.1:4150"], [0]
    )
    (batch,) = list(reader.read(part))
    row = batch.to_pylist()[0]
    assert row == {
        "id": MSG_ID.decode(),
        "body": b"\x00\xff",
        "timestamp": ts,
        "attempts": 2,
        "topic": "t",
        "channel": "c",
        "nsqd": "127.0.0.1:4150",
    }
    assert list(reader.read(NsqPartition([], [], [], [], "t", "c"))) == []
    sub = NsqStreamReader(opts, source_schema("attempts", "body"))
    assert next(sub.read(part)).column_names == ["attempts", "body"]
    with pytest.raises(SchemaError, match="must be binary"):
        NsqStreamReader(opts, StructType([StructField("body", StringType())]))
    with pytest.raises(SchemaError, match="needs a 'body' column"):
        check_sink_schema(StructType([StructField("value", StringType())]), topic_option="t")
    sink = StructType(
        [
            StructField("body", BinaryType()),
            StructField("topic", StringType()),
            StructField("x", IntegerType()),
        ]
    )
    check_sink_schema(sink, topic_option=None)


def test_reader_pickles_without_its_connections() -> None:
    import pickle

    from pyspark_nsq.reader import NsqStreamReader
    from pyspark_nsq.schema import source_schema

    opts = SourceOptions.parse({"nsqd": "h:1", "topic": "t", "channel": "c"})
    reader = NsqStreamReader(opts, source_schema())
    reader._consumer = object()  # type: ignore[assignment]
    clone = pickle.loads(pickle.dumps(reader))
    assert clone._consumer is None and clone.opts == opts
