"""nsqd's flags: every v1.3.0 flag with its name, kind, default, meaning, --help group and
config-file key, and ours after them (off by default). The table alone: options.py turns
flags and config values into validated Options."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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
    Flag(
        "worker-timeout",
        "duration",
        60.0,
        "with --workers: a worker that answers no /ping for this long is killed and started "
        "again (0 = never)",
        EXTENSIONS,
    ),
]
# Flags of ours that the Go nsqd lacks (its --help and GET /config know none of them).
EXTENSION_FLAGS = frozenset(f.name for f in FLAGS if f.group == EXTENSIONS)
FLAGS_BY_NAME = {f.name: f for f in FLAGS}
FLAGS_BY_CFG = {f.cfg_key: f for f in FLAGS}
