"""--tls-required with --workers: clients upgrade to TLS on the shared ports as with one nsqd;
the workers' private listeners (loopback, for their peers) take the group's secret instead of
TLS: a worker's pull links AUTH with it, and its HTTP asks carry it. So a TLS consumer receives
what TLS publishers published in either worker, HTTPS /stats sums both, and a client without
the secret is refused on the private listeners."""

from __future__ import annotations

import json
import ssl
import sys
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tls"))

from tls_support import Certs, RawClient, command_bytes, make_certs, negotiate

from protocol.v2 import (
    FrameType,
    encoders,
)
from tests.ops.conftest import V2, free_ports

from .conftest import PEER_HEADER, Group


def _tls_client(port: int, certs: Certs) -> RawClient:
    client = RawClient(port)
    negotiate(client, certs, tls=True)
    return client


def test_tls_clients_and_the_links_between_workers(group: Group, tmp_path: Path) -> None:
    certs = make_certs(tmp_path / "certs")
    (https,) = free_ports(1)
    group.start(*certs.server_args, f"--https-address=127.0.0.1:{https}", "--tls-required=true")
    with _tls_client(group.tcp, certs) as sub:
        sub.send(command_bytes("SUB t c") + command_bytes("RDY 100"))
        assert sub.read_response().data == b"OK"
        for i in range(20):  # a connection each: the kernel spreads them over both workers
            with _tls_client(group.tcp, certs) as pub:
                pub.send(command_bytes("PUB t", b"m%d" % i))
                assert pub.read_response().data == b"OK"
        got = set()
        while len(got) < 20:
            frame = sub.read_frame()
            assert frame.frame_type == FrameType.MESSAGE, frame
            got.add(frame.data[26:])
            sub.send(command_bytes(b"FIN " + frame.data[10:26]))
        assert got == {b"m%d" % i for i in range(20)}
    secret = _secret(group)
    stats = [group.worker_stats(k, mark=secret.decode()) for k in (0, 1)]
    took = [doc["topics"][0]["message_count"] for doc in stats]
    assert sum(took) == 20 and all(took), took  # both workers took publishers (the premise)
    context = ssl.create_default_context(cafile=certs.ca)
    url = f"https://127.0.0.1:{https}/stats?format=json&topic=t"
    for _ in range(4):  # whichever worker answers, it sums its peer's (asked with the secret)
        with urllib.request.urlopen(url, timeout=5, context=context) as resp:
            (topic,) = json.loads(resp.read())["topics"]
        assert topic["message_count"] == 20


def test_the_private_listeners_ask_for_the_groups_secret(group: Group, tmp_path: Path) -> None:
    certs = make_certs(tmp_path / "certs")
    group.start(*certs.server_args, "--tls-required=true")
    secret = _secret(group)
    for k in (0, 1):
        url = f"http://{group.private_http(k)}/stats?format=json"
        for header in ({}, {PEER_HEADER: "1"}):
            try:
                urllib.request.urlopen(urllib.request.Request(url, headers=header), timeout=5)
            except urllib.error.HTTPError as exc:
                assert (exc.code, json.loads(exc.read())["message"]) == (403, "TLS_REQUIRED")
            else:
                raise AssertionError("a request without the secret was answered")
        assert group.worker_stats(k, mark=secret.decode())["health"] == "OK"
        with V2(group.link(k)) as conn:  # plain, on the private link: AUTH first, not TLS
            conn.send(encoders.sub("t", "c"))
            assert conn.frame() == (1, b"E_AUTH_FIRST AUTH required before SUB")
        with V2(group.link(k)) as conn:
            conn.send(encoders.auth(b"guess"))
            assert conn.frame() == (1, b"E_AUTH_FAILED AUTH failed")
        with V2(group.link(k)) as conn:
            conn.send(encoders.auth(secret))
            assert conn.frame()[0] == 0
            conn.sub("t", "c")


def _secret(group: Group) -> bytes:
    """The group's secret, from a worker's environment (as any process of its user can)."""
    pid = group.pids()[0]
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    (secret,) = [v.split(b"=", 1)[1] for v in environ if v.startswith(b"NSQD_GROUP_SECRET=")]
    return secret
