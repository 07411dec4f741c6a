"""nsqd-certs: the files it writes, and that both nsqds take them (RSA as well as ECDSA)."""

from __future__ import annotations

import ipaddress
import json
import ssl
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from tls_support import REPO_ROOT, RawClient, start_daemon

from nsqd.certs import write_all


def test_cli_writes_ca_server_and_client(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "nsqd.certs",
            "--out",
            str(tmp_path),
            "--client-cn",
            "alice",
            "nsq.example",
            "10.1.2.3",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert "server certificate" in proc.stdout
    names = {p.name for p in tmp_path.iterdir()}
    assert names == {"ca.pem", "ca.key", "server.pem", "server.key", "client.pem", "client.key"}
    for key in ("ca.key", "server.key", "client.key"):
        assert stat.S_IMODE((tmp_path / key).stat().st_mode) == 0o600
    ca = x509.load_pem_x509_certificate((tmp_path / "ca.pem").read_bytes())
    server = x509.load_pem_x509_certificate((tmp_path / "server.pem").read_bytes())
    client = x509.load_pem_x509_certificate((tmp_path / "client.pem").read_bytes())
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    san = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(san.get_values_for_type(x509.DNSName)) == {"localhost", "nsq.example"}
    assert set(san.get_values_for_type(x509.IPAddress)) == {
        ipaddress.ip_address(a) for a in ("127.0.0.1", "::1", "10.1.2.3")
    }
    assert client.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "alice"
    usage = client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    for cert in (server, client):
        cert.verify_directly_issued_by(ca)


@pytest.mark.parametrize("kind", ["ours", "reference"])
def test_rsa_certificates_work(tmp_path: Path, kind: str) -> None:
    files = write_all(tmp_path, use_rsa=True)
    d = start_daemon(
        kind,
        [
            f"--tls-cert={files.server_cert}",
            f"--tls-key={files.server_key}",
            f"--tls-root-ca-file={files.ca}",
            "--tls-client-auth-policy=require-verify",
        ],
    )
    try:
        ctx = ssl.create_default_context(cafile=str(files.ca))
        ctx.load_cert_chain(files.client_cert, files.client_key)
        with RawClient(d.tcp_port) as c:
            assert json.loads(c.identify(feature_negotiation=True, tls_v1=True).data)["tls_v1"]
            c.start_tls(ctx, server_hostname="localhost")
            assert c.read_frame().data == b"OK"
            c.send(b"PUB t_rsa\n\x00\x00\x00\x01x")
            assert c.read_frame().data == b"OK"
    finally:
        assert d.stop() == 0
