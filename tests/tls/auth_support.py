"""What the AUTH tests share: a scriptable auth server policy, a pair of daemons (ours and the
real nsqd v1.3.0) started with the same flags, and a session runner that records every frame
up to the close, so a scenario's transcripts on both daemons can be compared."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

from tls_support import Certs, Closed, Daemon, RawClient, command_bytes, negotiate, start_daemon

from protocol.v2 import FrameType

KINDS = ("ours", "reference")
_seq = itertools.count()


def grant(
    *authorizations: dict[str, Any], ttl: int = 3600, identity: str = "", url: str = ""
) -> tuple[int, Any]:
    return 200, {
        "ttl": ttl,
        "identity": identity,
        "identity_url": url,
        "authorizations": list(authorizations),
    }


PUBLISH = {"topic": "^allowed", "channels": [".*"], "permissions": ["publish"]}
SUBSCRIBE = {"topic": "^allowed", "channels": ["^ch$"], "permissions": ["subscribe"]}


class Policy:
    """The auth server's answers, by secret (unknown secrets: 404)."""

    def __init__(self) -> None:
        self.by_secret: dict[str, tuple[int, Any] | Callable[[], tuple[int, Any]]] = {}
        self.lock = threading.Lock()

    def __call__(self, secret: str, query: dict[str, list[str]]) -> tuple[int, Any]:
        with self.lock:
            entry = self.by_secret.get(secret, (404, {"message": "unknown secret"}))
        return entry() if callable(entry) else entry

    def secret(self, answer: tuple[int, Any] | Callable[[], tuple[int, Any]]) -> str:
        name = f"secret-{next(_seq)}"
        with self.lock:
            self.by_secret[name] = answer
        return name


def start_pair(args: list[str]) -> dict[str, Daemon]:
    started: dict[str, Daemon] = {}
    try:
        for kind in KINDS:
            started[kind] = start_daemon(kind, args)
    except BaseException:
        for d in started.values():
            d.stop()
        raise
    return started


def stop_pair(pair: dict[str, Daemon]) -> None:
    codes = {kind: d.stop() for kind, d in pair.items()}
    assert codes == dict.fromkeys(pair, 0), codes


Frames = list[tuple[int, bytes]]


def session(
    d: Daemon,
    commands: list[bytes],
    *,
    identify: bool = True,
    certs: Certs | None = None,
    tls: bool = False,
    client_cert: bool = False,
) -> Frames:
    """Run `commands` one by one, recording each answer, until the daemon closes."""
    out: Frames = []
    with RawClient(d.tcp_port) as c:
        if identify:
            reply = negotiate(c, certs, tls=tls, client_cert=client_cert)
            assert reply["auth_required"] is True
        for cmd in commands:
            c.send(cmd)
            try:
                f = c.read_response(3.0)
            except Closed:
                out.append((-1, b"closed"))
                return out
            out.append((f.frame_type, f.data))
            if f.frame_type == FrameType.ERROR:
                break
        try:
            c.expect_closed(0.3)
            out.append((-1, b"closed"))
        except AssertionError:
            pass
    return out


def both(pair: dict[str, Daemon], commands: list[bytes], **kw: Any) -> Frames:
    results = {kind: session(d, commands, **kw) for kind, d in pair.items()}
    assert results["ours"] == results["reference"]
    return results["ours"]


def auth(secret: str | bytes) -> bytes:
    return command_bytes("AUTH", secret.encode() if isinstance(secret, str) else secret)


def pub(topic: str) -> bytes:
    return command_bytes(f"PUB {topic}", b"body")


def err(text: bytes) -> list[tuple[int, bytes]]:
    return [(FrameType.ERROR, text), (-1, b"closed")]
