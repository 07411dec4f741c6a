"""The connector's options, validated once into frozen (picklable) dataclasses.

Spark hands options as a case-insensitive mapping of strings; plain dicts work too."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from protocol.v2 import is_valid_name

from .addresses import Address, parse_list

DEFAULT_RDY = 2500  # nsqd's default --max-rdy-count
DEFAULT_MAX_IN_FLIGHT = 20_000  # per nsqd, spread over ceil(20000 / 2500) = 8 connections
# The driver JVM holds a batch's tasks (and, in local mode, runs them) in its default 1 GiB
# heap: 128 MiB batches ran it out of memory. spark.rpc.message.maxSize caps a task at 128 MiB.
DEFAULT_MAX_BYTES_PER_TRIGGER = 32 * 1024 * 1024
DEFAULT_MAX_BYTES_PER_PARTITION = 8 * 1024 * 1024
DEFAULT_MSG_TIMEOUT_MS = 60_000  # nsqd's default --msg-timeout
MAX_BODY_BYTES = 5 * 1024 * 1024  # nsqd's default --max-body-size
# Executor-side reading (our nsqds): a batch's messages stay leased from the task's receive to
# the driver's FIN after the commit; below nsqd's default --max-msg-timeout (15 min).
DEFAULT_LEASE_TIMEOUT_MS = 300_000
DEFAULT_EXECUTOR_RETRY_MS = 60_000  # a task asks an unanswering nsqd again for this long


class OptionError(ValueError):
    """A missing or invalid connector option."""


SOURCE_OPTIONS = (
    "nsqd",
    "nsqdHttp",
    "lookupd",
    "topic",
    "channel",
    "maxMessagesPerTrigger",
    "maxBytesPerTrigger",
    "maxBytesPerPartition",
    "maxInFlight",
    "rdy",
    "connectionsPerNsqd",
    "msgTimeoutMs",
    "numPartitions",
    "pollTimeoutMs",
    "availableNowIdleMs",
    "lookupdPollIntervalMs",
    "connectTimeoutMs",
    "executorReads",
    "leaseTimeoutMs",
    "executorRetryMs",
)
SINK_OPTIONS = (
    "nsqd",
    "lookupd",
    "topic",
    "batchSize",
    "maxBodyBytes",
    "connectTimeoutMs",
    "nsqdHttp",
    "dedupe",
    "dedupeKey",
)
DEDUPE_MODES = ("auto", "on", "off")
# Options Spark itself may put in a data source's map (load(path), the streaming sink's
# checkpoint), not the user's.
_SPARK_OPTIONS = ("path", "checkpointLocation", "queryName")


def check_names(options: Mapping[str, str], valid: tuple[str, ...], what: str) -> None:
    """A misspelled option fails the query at start, naming it and the valid ones."""
    known = {name.lower() for name in (*valid, *_SPARK_OPTIONS)}
    unknown = sorted(k for k in options if str(k).lower() not in known)
    if unknown:
        raise OptionError(
            f"nsq {what}: unknown option{'s' if len(unknown) > 1 else ''} "
            + ", ".join(repr(k) for k in unknown)
            + "; the valid ones are "
            + ", ".join(valid)
        )


def _get(options: Mapping[str, str], name: str) -> str | None:
    value = options.get(name)
    if value is None:
        value = options.get(name.lower())
    if value is None:
        return None
    value = str(value).strip()
    return value or None


def _opt_int(options: Mapping[str, str], name: str, minimum: int) -> int | None:
    raw = _get(options, name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise OptionError(f"option {name}: {raw!r} is not an integer") from None
    if value < minimum:
        raise OptionError(f"option {name}: {value} is below {minimum}")
    return value


def _int(options: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    value = _opt_int(options, name, minimum)
    return default if value is None else value


def _name(options: Mapping[str, str], name: str, *, required: bool) -> str | None:
    value = _get(options, name)
    if value is None:
        if required:
            raise OptionError(f"option {name!r} is required")
        return None
    if not is_valid_name(value.encode()):
        raise OptionError(
            f"option {name}: {value!r} is not a valid NSQ name "
            "(1-64 of [.a-zA-Z0-9_-], optionally ending in #ephemeral)"
        )
    return value


def _addresses(options: Mapping[str, str]) -> tuple[tuple[Address, ...], tuple[Address, ...]]:
    try:
        nsqd = tuple(parse_list(_get(options, "nsqd"), what="nsqd address"))
        lookupd = tuple(parse_list(_get(options, "lookupd"), what="nsqlookupd address"))
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    if not nsqd and not lookupd:
        raise OptionError("set option 'nsqd' (host:port[,host:port...]) or 'lookupd'")
    return nsqd, lookupd


@dataclass(frozen=True, slots=True)
class SourceOptions:
    topic: str
    channel: str
    nsqd: tuple[Address, ...] = ()
    nsqd_http: tuple[Address, ...] = ()  # same order as nsqd; default: TCP port + 1
    lookupd: tuple[Address, ...] = ()
    max_messages_per_trigger: int | None = None
    max_bytes_per_trigger: int = DEFAULT_MAX_BYTES_PER_TRIGGER
    max_bytes_per_partition: int = DEFAULT_MAX_BYTES_PER_PARTITION
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    rdy: int = DEFAULT_RDY
    connections_per_nsqd: int | None = None  # default: ceil(maxInFlight / rdy)
    msg_timeout_ms: int = DEFAULT_MSG_TIMEOUT_MS
    num_partitions: int = 2
    poll_timeout_ms: int = 0
    available_now_idle_ms: int = 10_000
    lookupd_poll_interval_ms: int = 30_000
    connect_timeout_ms: int = 5_000
    executor_reads: bool = True  # "auto": executors pull from our nsqds; "off": never
    lease_timeout_ms: int = DEFAULT_LEASE_TIMEOUT_MS
    executor_retry_ms: int = DEFAULT_EXECUTOR_RETRY_MS

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        check_names(options, SOURCE_OPTIONS, "source")
        nsqd, lookupd = _addresses(options)
        http = _http_addresses(options, nsqd)
        topic = _name(options, "topic", required=True)
        channel = _name(options, "channel", required=True)
        assert topic is not None and channel is not None
        return cls(
            topic=topic,
            channel=channel,
            nsqd=nsqd,
            nsqd_http=http,
            lookupd=lookupd,
            max_messages_per_trigger=_opt_int(options, "maxMessagesPerTrigger", 1),
            max_bytes_per_trigger=_int(
                options, "maxBytesPerTrigger", DEFAULT_MAX_BYTES_PER_TRIGGER, 1
            ),
            max_bytes_per_partition=_int(
                options, "maxBytesPerPartition", DEFAULT_MAX_BYTES_PER_PARTITION, 1
            ),
            max_in_flight=_int(options, "maxInFlight", DEFAULT_MAX_IN_FLIGHT, 1),
            rdy=_int(options, "rdy", DEFAULT_RDY, 1),
            connections_per_nsqd=_opt_int(options, "connectionsPerNsqd", 1),
            msg_timeout_ms=_int(options, "msgTimeoutMs", DEFAULT_MSG_TIMEOUT_MS, 1000),
            num_partitions=_int(options, "numPartitions", 2, 1),
            poll_timeout_ms=_int(options, "pollTimeoutMs", 0, 0),
            available_now_idle_ms=_int(options, "availableNowIdleMs", 10_000, 0),
            lookupd_poll_interval_ms=_int(options, "lookupdPollIntervalMs", 30_000, 100),
            connect_timeout_ms=_int(options, "connectTimeoutMs", 5_000, 1),
            executor_reads=_executor_reads(options),
            lease_timeout_ms=_int(options, "leaseTimeoutMs", DEFAULT_LEASE_TIMEOUT_MS, 1000),
            executor_retry_ms=_int(options, "executorRetryMs", DEFAULT_EXECUTOR_RETRY_MS, 0),
        )


def _executor_reads(options: Mapping[str, str]) -> bool:
    value = (_get(options, "executorReads") or "auto").lower()
    if value not in ("auto", "off"):
        raise OptionError(f"option executorReads: {value!r} is not 'auto' or 'off'")
    return value == "auto"


@dataclass(frozen=True, slots=True)
class SinkOptions:
    nsqd: tuple[Address, ...] = ()
    nsqd_http: tuple[Address, ...] = ()  # same order as nsqd; default: TCP port + 1
    lookupd: tuple[Address, ...] = ()
    topic: str | None = None  # overrides a `topic` column, as Kafka's sink does
    batch_size: int = 1000
    max_body_bytes: int = MAX_BODY_BYTES
    connect_timeout_ms: int = 5_000
    # auto: HTTP /mpub with de-duplication keys when the nsqd is ours with --dedupe-window,
    # else TCP MPUB; on: keys or fail; off: always TCP MPUB (at-least-once)
    dedupe: str = "auto"
    dedupe_key: str | None = None  # the keys' prefix (default: the query id, or one per write)

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        check_names(options, SINK_OPTIONS, "sink")
        nsqd, lookupd = _addresses(options)
        http = _http_addresses(options, nsqd)
        dedupe = (_get(options, "dedupe") or "auto").lower()
        if dedupe not in DEDUPE_MODES:
            raise OptionError(f"option dedupe: {dedupe!r} is not one of {', '.join(DEDUPE_MODES)}")
        return cls(
            nsqd=nsqd,
            nsqd_http=http,
            lookupd=lookupd,
            topic=_name(options, "topic", required=False),
            batch_size=_int(options, "batchSize", 1000, 1),
            max_body_bytes=_int(options, "maxBodyBytes", MAX_BODY_BYTES, 16),
            connect_timeout_ms=_int(options, "connectTimeoutMs", 5_000, 1),
            dedupe=dedupe,
            dedupe_key=_get(options, "dedupeKey"),
        )


def _http_addresses(options: Mapping[str, str], nsqd: tuple[Address, ...]) -> tuple[Address, ...]:
    """Option nsqdHttp (one per nsqd address, same order), else each TCP port + 1."""
    try:
        http = tuple(parse_list(_get(options, "nsqdHttp"), what="nsqd HTTP address"))
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    if http and len(http) != len(nsqd):
        raise OptionError("option nsqdHttp must list one HTTP address per nsqd address")
    return http or tuple(Address(a.host, a.port + 1) for a in nsqd)
