"""What an auth server granted: its JSON answer parsed as Go's encoding/json would take it (types,
duplicate keys, constants), and the authorizations checked against a topic and channel."""

from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass
from typing import Any

from ..gocompat.regex import Matcher, RegexError, compile_go_regex

PERMISSIONS = frozenset({"subscribe", "publish"})


_INT64 = (-(2**63), 2**63 - 1)


class AuthError(Exception):
    """Why an auth server's answer was not used (only logged; clients see `AUTH failed`)."""


@dataclass(frozen=True)
class Authorization:
    topic: Matcher  # RE2: linear in the name, whatever pattern the auth server sends
    channels: tuple[Matcher, ...]
    permissions: frozenset[str]

    def is_allowed(self, topic: str, channel: str) -> bool:
        needed = "subscribe" if channel else "publish"
        if needed not in self.permissions:
            return False
        if not self.topic.search(topic):
            return False
        return any(c.search(channel) for c in self.channels)


@dataclass
class AuthState:
    ttl: int
    identity: str
    identity_url: str
    authorizations: list[Authorization]
    expires: float  # time.monotonic()

    def is_allowed(self, topic: str, channel: str) -> bool:
        return any(a.is_allowed(topic, channel) for a in self.authorizations)

    def is_expired(self) -> bool:
        return self.expires < time.monotonic()


class _Object(list):  # type: ignore[type-arg]
    """A decoded JSON object, as its (key, value) pairs in order."""


_SURROGATE = re.compile("[\ud800-\udfff]")


def _fields(obj: Any, names: tuple[str, ...]) -> dict[str, Any]:
    """Go's json.Unmarshal into a struct: keys matched case-insensitively, last one wins,
    unknown keys ignored, null leaves the zero value."""
    if obj is None:
        return {}
    if not isinstance(obj, _Object):
        raise AuthError(f"cannot unmarshal {obj!r} into an object")
    found: dict[str, Any] = {}
    for key, value in obj:
        name = key if key in names else key.casefold()
        if name in names and value is not None:
            found[name] = value
    return found


def _string(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise AuthError(f"cannot unmarshal {value!r} into {what} (string)")
    # Go's decoder turns a lone surrogate escape into U+FFFD
    return _SURROGATE.sub("\ufffd", value)


def _strings(value: Any, what: str) -> list[str]:
    if type(value) is not list:
        raise AuthError(f"cannot unmarshal {value!r} into {what} ([]string)")
    return ["" if v is None else _string(v, what) for v in value]


def parse_auth_response(body: bytes) -> AuthState:
    """Decode and validate an auth server's 200 answer, as nsqd's auth.QueryAuthd."""
    try:
        doc = json.loads(
            body.decode("utf-8", "replace"),
            object_pairs_hook=_Object,
            parse_constant=_refuse_constant,
        )
    except (ValueError, RecursionError) as exc:
        raise AuthError(f"invalid JSON: {exc}") from exc
    top = _fields(doc, ("ttl", "identity", "identity_url", "authorizations"))
    ttl = top.get("ttl", 0)
    if type(ttl) is not int or not _INT64[0] <= ttl <= _INT64[1]:
        raise AuthError(f"cannot unmarshal {ttl!r} into ttl (int)")
    identity = _string(top.get("identity", ""), "identity")
    identity_url = _string(top.get("identity_url", ""), "identity_url")
    raw_auths = top.get("authorizations", [])
    if type(raw_auths) is not list:
        raise AuthError("cannot unmarshal authorizations (not an array)")
    authorizations: list[Authorization] = []
    for raw in raw_auths:
        f = _fields(raw, ("topic", "channels", "permissions"))
        topic = _string(f.get("topic", ""), "topic")
        channels = _strings(f.get("channels", []), "channels")
        permissions = _strings(f.get("permissions", []), "permissions")
        for p in permissions:
            if p not in PERMISSIONS:
                raise AuthError(f"unknown permission {p}")
        try:
            topic_re = compile_go_regex(topic)
        except RegexError as exc:
            raise AuthError(f"unable to compile topic {topic!r} {exc}") from exc
        channel_res: list[Matcher] = []
        for channel in channels:
            try:
                channel_res.append(compile_go_regex(channel))
            except RegexError as exc:
                raise AuthError(f"unable to compile channel {channel!r} {exc}") from exc
        authorizations.append(Authorization(topic_re, tuple(channel_res), frozenset(permissions)))
    if ttl <= 0:
        raise AuthError(f"invalid TTL {ttl} (must be >0)")
    return AuthState(ttl, identity, identity_url, authorizations, time.monotonic() + ttl)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"invalid JSON constant {name}")


def everything() -> AuthState:
    """Every topic and channel, to publish and subscribe, for good: what a secret the daemon
    trusts is granted (a group's links: Node.trusted_secrets) without asking a server."""
    anything = re.compile("")
    grant = Authorization(anything, (anything,), PERMISSIONS)
    return AuthState(0, "", "", [grant], math.inf)
