"""nsqd's options: every v1.3.0 flag with its name, default, config-file key and meaning.

Durations are held in seconds (float); flags and config files take Go durations ("60s",
"250ms"); a bare integer in a config file means milliseconds, as with nsqd's go-options."""

from __future__ import annotations

import os
import re
import socket
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from ..gocompat.strconv import (
    OptionError,
    format_float,
    parse_bool,
    parse_duration,
    parse_int,
)

LOG_LEVELS = ("debug", "info", "warn", "error", "fatal")
TLS_VERSIONS = ("tls1.0", "tls1.1", "tls1.2", "tls1.3")


def default_node_id() -> int:
    try:  # CPython's own MD5: hashlib's would load OpenSSL at every start just for this
        from _md5 import md5
    except ImportError:  # pragma: no cover - a build without it
        from hashlib import md5
    digest = md5(socket.gethostname().encode()).digest()
    return zlib.crc32(digest) % 1024


@dataclass(frozen=True, slots=True)
class Flag:
    name: str  # flag name without dashes
    # str | int | bool | duration | list | floats | tls_required | log_level | tls_version
    kind: str
    default: Any
    help: str
    group: str
    cfg: str = ""  # config-file key when it is not the flag name with _ for -

    @property
    def attr(self) -> str:
        return self.name.replace("-", "_")

    @property
    def cfg_key(self) -> str:
        return self.cfg or self.attr


EXTENSIONS = "trio-nsqd extensions (not in nsqd)"
_B, _D, _M, _C, _S, _E, _T, _X = (
    "basic",
    "disk queue",
    "msg and command",
    "client overridable",
    "statsd",
    "end to end latency",
    "TLS",
    "compression",
)

FLAGS: list[Flag] = [
    Flag("config", "str", "", "path to config file", _B),
    Flag("version", "bool", False, "print version string", _B),
    Flag(
        "log-level",
        "log_level",
        "info",
        "set log verbosity: debug, info, warn, error, or fatal",
        _B,
    ),
    Flag("log-prefix", "str", "[nsqd] ", "log message prefix", _B),
    Flag("verbose", "bool", False, "[deprecated] has no effect, use --log-level", _B),
    Flag(
        "node-id",
        "int",
        None,
        "unique part for message IDs, (int) in range [0,1024) (default is hash of hostname)",
        _B,
        cfg="id",
    ),
    Flag("worker-id", "bool", False, "[deprecated] use --node-id", _B),
    Flag(
        "https-address", "str", "0.0.0.0:4152", "<addr>:<port> to listen on for HTTPS clients", _B
    ),
    Flag(
        "http-address",
        "str",
        "0.0.0.0:4151",
        "address to listen on for HTTP clients "
        "(<addr>:<port> for TCP/IP or <path> for unix socket)",
        _B,
    ),
    Flag(
        "tcp-address",
        "str",
        "0.0.0.0:4150",
        "address to listen on for TCP clients (<addr>:<port> for TCP/IP or <path> for unix socket)",
        _B,
    ),
    Flag(
        "auth-http-address",
        "list",
        [],
        "<addr>:<port> or a full url to query auth server (may be given multiple times)",
        _B,
        cfg="auth_http_addresses",
    ),
    Flag(
        "broadcast-address",
        "str",
        None,
        "address that will be registered with lookupd (defaults to the OS hostname)",
        _B,
    ),
    Flag(
        "broadcast-tcp-port",
        "int",
        0,
        "TCP port that will be registered with lookupd "
        "(defaults to the TCP port that this nsqd is listening on)",
        _B,
    ),
    Flag(
        "broadcast-http-port",
        "int",
        0,
        "HTTP port that will be registered with lookupd "
        "(defaults to the HTTP port that this nsqd is listening on)",
        _B,
    ),
    Flag(
        "lookupd-tcp-address",
        "list",
        [],
        "lookupd TCP address (may be given multiple times)",
        _B,
        cfg="nsqlookupd_tcp_addresses",
    ),
    Flag("http-client-connect-timeout", "duration", 2.0, "timeout for HTTP connect", _B),
    Flag("http-client-request-timeout", "duration", 5.0, "timeout for HTTP request", _B),
    Flag("data-path", "str", "", "path to store disk-backed messages", _D),
    Flag(
        "mem-queue-size",
        "int",
        10000,
        "number of messages to keep in memory (per topic/channel)",
        _D,
    ),
    Flag(
        "max-bytes-per-file",
        "int",
        104857600,
        "number of bytes per diskqueue file before rolling",
        _D,
    ),
    Flag("sync-every", "int", 2500, "number of messages per diskqueue fsync", _D),
    Flag("sync-timeout", "duration", 2.0, "duration of time per diskqueue fsync", _D),
    Flag(
        "queue-scan-worker-pool-max",
        "int",
        4,
        "max concurrency for checking in-flight and deferred message timeouts",
        _D,
    ),
    Flag(
        "queue-scan-selection-count",
        "int",
        20,
        "number of channels to check per cycle (every 100ms) for in-flight and deferred timeouts",
        _D,
    ),
    Flag(
        "msg-timeout",
        "duration",
        60.0,
        "default duration to wait before auto-requeing a message",
        _M,
    ),
    Flag(
        "max-msg-timeout", "duration", 900.0, "maximum duration before a message will timeout", _M
    ),
    Flag("max-msg-size", "int", 1048576, "maximum size of a single message in bytes", _M),
    Flag("max-req-timeout", "duration", 3600.0, "maximum requeuing timeout for a message", _M),
    Flag("max-body-size", "int", 5242880, "maximum size of a single command body", _M),
    Flag(
        "max-heartbeat-interval",
        "duration",
        60.0,
        "maximum client configurable duration of time between client heartbeats",
        _C,
    ),
    Flag("max-rdy-count", "int", 2500, "maximum RDY count for a client", _C),
    Flag(
        "max-output-buffer-size",
        "int",
        65536,
        "maximum client configurable size (in bytes) for a client output buffer",
        _C,
    ),
    Flag(
        "max-output-buffer-timeout",
        "duration",
        30.0,
        "maximum client configurable duration of time between flushing to a client",
        _C,
    ),
    Flag(
        "min-output-buffer-timeout",
        "duration",
        0.025,
        "minimum client configurable duration of time between flushing to a client",
        _C,
    ),
    Flag(
        "output-buffer-timeout",
        "duration",
        0.25,
        "default duration of time between flushing data to clients",
        _C,
    ),
    Flag(
        "max-channel-consumers",
        "int",
        0,
        "maximum channel consumer connection count per nsqd instance (default 0, i.e., unlimited)",
        _C,
    ),
    Flag("statsd-address", "str", "", "UDP <addr>:<port> of a statsd daemon for pushing stats", _S),
    Flag("statsd-interval", "duration", 60.0, "duration between pushing to statsd", _S),
    Flag("statsd-mem-stats", "bool", True, "toggle sending memory and GC stats to statsd", _S),
    Flag(
        "statsd-prefix",
        "str",
        "nsq.%s",
        "prefix used for keys sent to statsd (%s for host replacement)",
        _S,
    ),
    Flag("statsd-udp-packet-size", "int", 508, "the size in bytes of statsd UDP packets", _S),
    Flag(
        "statsd-exclude-ephemeral",
        "bool",
        False,
        "Skip ephemeral topics and channels when sending stats to statsd",
        _S,
    ),
    Flag(
        "e2e-processing-latency-percentile",
        "floats",
        [],
        "message processing time "
        "percentiles (as float (0, 1.0]) to track (can be specified multiple times or comma "
        'separated "1.0,0.99,0.95", default none)',
        _E,
        cfg="e2e_processing_latency_percentiles",
    ),
    Flag(
        "e2e-processing-latency-window-time",
        "duration",
        600.0,
        "calculate end to end latency "
        "quantiles for this duration of time (ie: 60s would only show quantile calculations "
        "from the past 60 seconds)",
        _E,
    ),
    Flag("tls-cert", "str", "", "path to certificate file", _T),
    Flag("tls-key", "str", "", "path to key file", _T),
    Flag(
        "tls-client-auth-policy",
        "str",
        "",
        "client certificate auth policy ('require' or 'require-verify')",
        _T,
    ),
    Flag("tls-root-ca-file", "str", "", "path to certificate authority file", _T),
    Flag(
        "tls-required",
        "tls_required",
        "false",
        "require TLS for client connections (true, false, tcp-https)",
        _T,
    ),
    Flag(
        "tls-min-version",
        "tls_version",
        "tls1.0",
        "minimum SSL/TLS version acceptable ('ssl3.0', 'tls1.0', 'tls1.1', 'tls1.2' or 'tls1.3')",
        _T,
    ),
    Flag("deflate", "bool", True, "enable deflate feature negotiation (client compression)", _X),
    Flag(
        "max-deflate-level",
        "int",
        6,
        "max deflate compression level a client can negotiate (> values == > nsqd CPU usage)",
        _X,
    ),
    Flag("snappy", "bool", True, "enable snappy feature negotiation (client compression)", _X),
    # -- what nsqd does not have: all off by default, so the daemon stays nsqd byte for byte --
    Flag(
        "durable-inflight",
        "bool",
        False,
        "keep in-flight and deferred messages (and deferred due times) across kill -9 and restarts",
        EXTENSIONS,
    ),
    Flag(
        "dedupe-window",
        "duration",
        0.0,
        "how long a /pub or /mpub dedupe_key is remembered: a repeat is acknowledged, not stored "
        "(0 = off)",
        EXTENSIONS,
    ),
    Flag(
        "resp-address",
        "str",
        "",
        "<addr>:<port> to listen on for Redis (RESP2) clients; off when empty",
        EXTENSIONS,
    ),
    Flag(
        "resp-password",
        "str",
        "",
        "password Redis clients must AUTH with (off when empty)",
        EXTENSIONS,
    ),
    Flag(
        "resp-max-bulk",
        "int",
        536870912,
        "maximum size of one Redis bulk argument in bytes (Redis's proto-max-bulk-len)",
        EXTENSIONS,
    ),
    Flag(
        "resp-enable-debug-command",
        "bool",
        False,
        "allow the Redis DEBUG command (Redis's enable-debug-command; its test suite needs it)",
        EXTENSIONS,
    ),
    Flag(
        "resp-expiry-topic",
        "str",
        "",
        "topic that gets one message per expired Redis string or hash key (off when empty)",
        EXTENSIONS,
    ),
    Flag(
        "workers",
        "str",
        "1",
        "worker processes behind the same ports, one partition each (a number, or auto: one "
        "per core this process may use)",
        EXTENSIONS,
    ),
]
# Flags of ours that the Go nsqd lacks (its --help and GET /config know none of them).
EXTENSION_FLAGS = frozenset(f.name for f in FLAGS if f.group == EXTENSIONS)
FLAGS_BY_NAME = {f.name: f for f in FLAGS}
FLAGS_BY_CFG = {f.cfg_key: f for f in FLAGS}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def convert(flag: Flag, value: Any, *, from_config: bool = False) -> Any:
    """Coerce a flag string or a config-file value to the option's type (go-options' coerce
    for config values: a TOML integer for a duration is milliseconds, a string list may be
    comma separated)."""
    kind = flag.kind
    if from_config and not isinstance(value, str | bool | int | float | list):
        raise OptionError(f"invalid value type {type(value).__name__}")
    if kind == "duration":
        if from_config and _is_int(value):
            return value / 1000  # go-options: a bare config integer is milliseconds
        if from_config and not isinstance(value, str):
            raise OptionError("invalid value type, want a duration string or milliseconds")
        return parse_duration(str(value))
    if kind == "int":
        if _is_int(value):
            return value
        if isinstance(value, str):
            return parse_int(value, base_prefixes=not from_config)
        raise OptionError(f"invalid value type {type(value).__name__}, want an integer")
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if from_config and _is_int(value):
            return value == 0  # go-options' coerceBool quirk: an integer is true when 0
        if isinstance(value, str):
            return parse_bool(value)
        raise OptionError(f"invalid value type {type(value).__name__}, want a boolean")
    if kind == "list":
        if isinstance(value, list):
            if not all(isinstance(v, str) for v in value):
                raise OptionError("invalid value, want an array of strings")
            return list(value)
        if from_config and isinstance(value, str):
            return value.split(",")
        return [str(value)]
    if kind == "floats":
        items = value if isinstance(value, list) else str(value).split(",")
        out = []
        for item in items:
            if isinstance(item, bool) or not isinstance(item, str | int | float):
                raise OptionError(f"invalid value {item!r}, want a float")
            if isinstance(item, str) and not item.strip():
                continue
            try:
                out.append(float(item))
            except ValueError:
                raise OptionError(f'parse error: invalid float "{item}"') from None
        return out
    if kind == "tls_required":
        if isinstance(value, bool):
            return "true" if value else "false"
        text = str(value)
        if text == "tcp-https":
            return text
        return "true" if parse_bool(text) else "false"
    if kind == "log_level":
        text = str(value)
        if text.lower() not in LOG_LEVELS:
            raise OptionError(f"invalid log level '{text}' (debug, info, warn, error, fatal)")
        return text.lower()
    if kind == "tls_version":
        text = str(value)
        if text and text.lower() not in TLS_VERSIONS:
            raise OptionError(f'unknown tlsVersionOption "{text}"')
        return text.lower()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        raise OptionError("invalid value, want a string")
    return str(value)


def _defaults() -> dict[str, Any]:
    return {f.attr: (list(f.default) if isinstance(f.default, list) else f.default) for f in FLAGS}


@dataclass(slots=True)
class Options:
    values: dict[str, Any] = field(default_factory=_defaults)

    def __getattr__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None

    @classmethod
    def build(cls, **overrides: Any) -> Options:
        opts = cls()
        for key, value in overrides.items():
            if key not in opts.values:
                raise OptionError(f"unknown option {key}")
            opts.values[key] = value
        opts.finalize()
        return opts

    def finalize(self) -> None:
        """Fill derived defaults and validate, with nsqd's startup messages."""
        v = self.values
        if v["node_id"] is None:
            v["node_id"] = default_node_id()
        if v["broadcast_address"] is None:
            v["broadcast_address"] = socket.gethostname()
        if not 0 <= v["node_id"] < 1024:
            raise OptionError("--node-id must be [0,1024)")
        if not 1 <= v["max_deflate_level"] <= 9:
            raise OptionError("--max-deflate-level must be [1,9]")
        if v["tls_client_auth_policy"] and v["tls_required"] == "false":
            v["tls_required"] = "true"
        if v["tls_required"] != "false" and not (v["tls_cert"] and v["tls_key"]):
            raise OptionError("cannot require TLS client connections without TLS key and cert")
        for p in v["e2e_processing_latency_percentile"]:
            if not 0 < p <= 1:
                raise OptionError(f"invalid E2E processing latency percentile: {format_float(p)}")
        v["e2e_processing_latency_percentile"] = sorted(
            v["e2e_processing_latency_percentile"], reverse=True
        )
        if v["log_level"].lower() not in LOG_LEVELS:
            raise OptionError(f"invalid log level '{v['log_level']}'")
        for key in ("mem_queue_size", "max_msg_size", "max_body_size", "max_rdy_count"):
            if v[key] < 0:
                raise OptionError(f"--{key.replace('_', '-')} must be >= 0")
        if v["resp_max_bulk"] < 1:
            raise OptionError("--resp-max-bulk must be >= 1")
        topic = v["resp_expiry_topic"]
        if (topic and not re.fullmatch(r"[.a-zA-Z0-9_-]+(#ephemeral)?", topic)) or len(topic) > 64:
            raise OptionError(f"--resp-expiry-topic: invalid topic name {topic!r}")
        v["workers"] = _workers(v["workers"])

    @property
    def tls_required_tcp(self) -> bool:
        return self.values["tls_required"] != "false"


def _workers(value: Any) -> int:
    """--workers: a count >= 1, or auto (the cores this process may run on)."""
    if _is_int(value):
        count = value
    elif str(value).strip().lower() == "auto":
        return len(os.sched_getaffinity(0))
    else:
        try:
            count = int(str(value))
        except ValueError:
            raise OptionError(f"--workers must be a number or auto, not {value!r}") from None
    if not 1 <= count <= 1024:
        raise OptionError("--workers must be [1,1024]")
    return count


_ = (fields, Callable)  # re-exported helpers for type checkers
