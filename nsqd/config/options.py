"""nsqd's options: flag and config-file values (the table is flags.py) converted and validated
into Options.

Durations are held in seconds (float); flags and config files take Go durations ("60s",
"250ms"); a bare integer in a config file means milliseconds, as with nsqd's go-options."""

from __future__ import annotations

import re
import socket
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from ..gocompat.json import NilList
from ..gocompat.strconv import (
    OptionError,
    format_float,
    parse_bool,
    parse_duration,
    parse_float,
    parse_int,
)
from .cores import usable_cores
from .flags import FLAGS, Flag

LOG_LEVELS = ("debug", "info", "warn", "error", "fatal")
TLS_VERSIONS = ("tls1.0", "tls1.1", "tls1.2", "tls1.3")


def default_node_id() -> int:
    try:  # CPython's own MD5: hashlib's would load OpenSSL at every start just for this
        from _md5 import md5
    except ImportError:  # pragma: no cover - a build without it
        from hashlib import md5
    digest = md5(socket.gethostname().encode()).digest()
    return zlib.crc32(digest) % 1024


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def convert(flag: Flag, value: Any, *, from_config: bool = False) -> Any:
    """Coerce a flag string or a config-file value to the option's type (go-options' coerce
    for config values: a TOML integer for a duration is milliseconds, a string list may be
    comma separated; a file's list that coerces to nothing is Go's nil slice, NilList)."""
    converted = _convert(flag, value, from_config=from_config)
    if from_config and flag.kind in ("list", "floats") and not converted:
        return NilList()
    return converted


def _convert(flag: Flag, value: Any, *, from_config: bool) -> Any:
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
    if kind in ("list", "floats") and from_config and not isinstance(value, str | list):
        return []  # go-options' coerce matches no case: a nil slice (NilList, above)
    if kind == "list":
        if isinstance(value, list):
            if not all(isinstance(v, str) for v in value):
                raise OptionError("invalid value, want an array of strings")
            return list(value)
        if from_config:
            return value.split(",")
        return [str(value)]
    if kind == "floats":
        if isinstance(value, list):
            if not all(type(v) is float for v in value):
                # go-options asserts each item float64 and panics on any other: refused
                raise OptionError("invalid value, want an array of floats")
            return list(value)
        # each comma-separated piece is ParseFloat's (the flag's Set); go-options' coerce of a
        # config string trims each piece first ("0.5, 0.9" is read, "0.5," refused)
        return [parse_float(p.strip() if from_config else p) for p in str(value).split(",")]
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
        if not text:
            return flag.default  # tlsMinVersionOption.Set("") keeps the version it holds
        if text.lower() not in TLS_VERSIONS:
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
    # values as the user gave them where the process changed its own (a --workers worker's
    # partition and node id): GET /config answers these, as one nsqd would
    given: dict[str, Any] = field(default_factory=dict)

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
        if v["worker_timeout"] < 0:
            raise OptionError("--worker-timeout must be >= 0")

    @property
    def tls_required_tcp(self) -> bool:
        return self.values["tls_required"] != "false"


# "index/count", set by a group's supervisor for each worker it starts (group/identity.py):
# here, where one nsqd's start reads it without importing nsqd.group
WORKER_ENV = "NSQD_GROUP_WORKER"


def _workers(value: Any) -> int:
    """--workers: a count >= 1, or auto (the cores this process may use: config/cores.py)."""
    if _is_int(value):
        count = value
    elif str(value).strip().lower() == "auto":
        return usable_cores()
    else:
        try:
            count = int(str(value))
        except ValueError:
            raise OptionError(f"--workers must be a number or auto, not {value!r}") from None
    if not 1 <= count <= 1024:
        raise OptionError("--workers must be [1,1024]")
    return count


_ = (fields, Callable)  # re-exported helpers for type checkers
