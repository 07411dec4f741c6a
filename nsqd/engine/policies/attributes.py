"""Per-topic and per-channel attributes: their names, their checks and their stored form.

Set over HTTP (`POST /topic/config`, `/channel/config`), kept by storage in a file of our own,
read by policy.py. Every attribute is 0 or empty when off; a queue whose attributes are all off
has no policy at all (nsqd's behaviour, byte for byte)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, TypeVar

from protocol.v2.names import is_valid_name

from ...gocompat.strconv import parse_int64

OVERFLOW_MODES = ("", "reject", "drop_oldest")


class AttributeRefused(Exception):
    """A name or value the daemon refuses; `code` is what an HTTP client sees (400)."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code


@dataclass(frozen=True)
class Limits:
    """The daemon's own bounds that attribute values must respect (from its flags)."""

    max_msg_size: int = 1048576
    max_msg_timeout_ms: int = 900_000
    max_req_timeout_ms: int = 3_600_000


@dataclass(frozen=True)
class TopicAttributes:
    ttl: int = 0  # ms from publish; 0 = messages never expire
    expired_topic: str = ""
    max_depth: int = 0  # messages in the topic's own queue; 0 = unbounded
    overflow: str = ""  # reject (the default when max_depth is set) | drop_oldest
    max_msg_size: int = 0  # bytes, below --max-msg-size
    delay: int = 0  # ms every new message is deferred by

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def off(self) -> bool:
        return self == type(self)()


@dataclass(frozen=True)
class ChannelAttributes:
    msg_timeout: int = 0  # ms, for consumers whose IDENTIFY set none
    max_attempts: int = 0
    dead_letter_topic: str = ""  # default: dead_letter_name(topic)
    ttl: int = 0
    expired_topic: str = ""
    max_depth: int = 0  # queued + in flight + deferred; 0 = unbounded
    overflow: str = ""
    delay: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def off(self) -> bool:
        return self == type(self)()


A = TypeVar("A", TopicAttributes, ChannelAttributes)


def dead_letter_name(topic: str) -> str:
    """The dead-letter topic of a channel that names none: `<topic>.dead` (an ephemeral
    topic's stays ephemeral: `<name>.dead#ephemeral`)."""
    base, ephemeral = topic.removesuffix("#ephemeral"), topic.endswith("#ephemeral")
    return base + ".dead" + ("#ephemeral" if ephemeral else "")


def _int(name: str, raw: str, low: int, high: int) -> int:
    # ASCII digits only (Go's parser): no sign, no spaces, no "1e3", no "²" or "١٢"
    value = parse_int64(raw) if raw[:1] not in ("+", "-") else None
    if value is None:
        raise AttributeRefused("INVALID_VALUE", f"{name}={raw!r} is not a whole number")
    if value != 0 and not low <= value <= high:
        raise AttributeRefused("INVALID_VALUE", f"{name}={value} is outside {low}..{high}")
    return value


def _topic_name(name: str, raw: str, own_topic: str) -> str:
    if raw and not is_valid_name(raw.encode()):
        raise AttributeRefused("INVALID_VALUE", f"{name}={raw!r} is not a valid topic name")
    if raw and raw == own_topic:
        raise AttributeRefused("INVALID_VALUE", f"{name} cannot be the topic itself")
    return raw


def _parse(name: str, raw: str, limits: Limits, topic: str) -> Any:
    if name in ("ttl", "max_depth", "max_attempts"):
        return _int(name, raw, 1, 2**53)
    if name == "delay":
        return _int(name, raw, 1, limits.max_req_timeout_ms)
    if name == "msg_timeout":
        return _int(name, raw, 1000, limits.max_msg_timeout_ms)
    if name == "max_msg_size":
        return _int(name, raw, 1, limits.max_msg_size)
    if name in ("expired_topic", "dead_letter_topic"):
        return _topic_name(name, raw, topic)
    if name == "overflow":
        if raw not in OVERFLOW_MODES:
            raise AttributeRefused("INVALID_VALUE", f"overflow={raw!r}: reject or drop_oldest")
        return raw
    raise AssertionError(name)  # pragma: no cover - names are checked first


def update(current: A, params: Mapping[str, str], limits: Limits, topic: str) -> A:
    """`current` with `params` applied (all or nothing); AttributeRefused names the first bad
    one. An empty value turns an attribute off."""
    names = {f.name for f in fields(current)}
    changes: dict[str, Any] = {}
    for name, raw in params.items():
        if name not in names:
            raise AttributeRefused("INVALID_ATTRIBUTE", f"no attribute {name!r}")
        kind = type(getattr(current, name))
        changes[name] = kind() if raw == "" else _parse(name, raw, limits, topic)
    result = replace(current, **changes)
    if isinstance(result, ChannelAttributes) and result.max_attempts:
        target = result.dead_letter_topic or dead_letter_name(topic)
        if not is_valid_name(target.encode()):
            raise AttributeRefused(
                "INVALID_VALUE", f"max_attempts needs a dead_letter_topic ({target!r} is too long)"
            )
    return result


def from_json(kind: type[A], data: Any) -> A:
    """The stored form back (unknown keys, from a newer version, are ignored)."""
    names = {f.name: type(getattr(kind(), f.name)) for f in fields(kind)}
    values = {k: v for k, v in data.items() if k in names and isinstance(v, names[k])}
    return kind(**values)
