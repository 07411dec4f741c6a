"""What the HTTP message-access tests share: a request to our daemon's HTTP API (JSON decoded
unless binary was asked), the messages of an answer, a channel's /stats, and a queue made
with messages in it."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from durability import helpers

REPO = Path(__file__).resolve().parents[2]


def call(
    daemon: helpers.Daemon,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    url = f"http://{helpers.HOST}:{daemon.http_port}{path}"
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as err:
        status, raw = err.code, err.read()
    if headers and "octet" in headers.get("Accept", ""):
        return status, raw
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode()


def msgs(daemon: helpers.Daemon, path: str, method: str = "POST") -> list[dict[str, Any]]:
    status, doc = call(daemon, method, path)
    assert status == 200, doc
    for m in doc["messages"]:
        m["body"] = base64.b64decode(m["body"])
    return doc["messages"]


def channel_stats(daemon: helpers.Daemon, topic: str, channel: str) -> dict[str, Any]:
    _, doc = call(daemon, "GET", f"/stats?format=json&topic={topic}&channel={channel}")
    return doc["topics"][0]["channels"][0]


def setup_queue(daemon: helpers.Daemon, topic: str, bodies: list[bytes]) -> None:
    assert call(daemon, "POST", f"/topic/create?topic={topic}")[0] == 200
    assert call(daemon, "POST", f"/channel/create?topic={topic}&channel=c")[0] == 200
    if bodies:
        assert call(daemon, "POST", f"/mpub?topic={topic}", b"\n".join(bodies)) == (200, "OK")


Q = "topic=q&channel=c"
