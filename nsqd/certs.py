"""nsqd-certs: a throwaway certificate authority, a server certificate and a client certificate
for trying nsqd's TLS (--tls-cert/--tls-key, --tls-root-ca-file, --tls-client-auth-policy).

    nsqd-certs --out ./certs nsq.example.com 10.0.0.5

writes into ./certs: ca.pem, ca.key, server.pem, server.key, client.pem, client.key. The server
certificate names 127.0.0.1, ::1 and localhost plus any names/IPs given; the client
certificate's common name (what nsqd passes to an auth server as `common_name`) is
--client-cn. Keys are ECDSA P-256 (or RSA 2048 with --rsa), unencrypted PKCS#8, written mode
0600. Meant for tests and development, not for production PKI."""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PrivateKey = ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
DEFAULT_NAMES = ("127.0.0.1", "::1", "localhost")


@dataclass
class Issued:
    cert: x509.Certificate
    key: PrivateKey

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )


def _new_key(use_rsa: bool) -> PrivateKey:
    if use_rsa:
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return ec.generate_private_key(ec.SECP256R1())


def _name(cn: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "nsqd-certs"),
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
        ]
    )


def _general_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def make_ca(cn: str = "nsqd-certs test CA", *, days: int = 365, use_rsa: bool = False) -> Issued:
    key = _new_key(use_rsa)
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(_name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Issued(cert, key)


def issue(
    ca: Issued,
    cn: str,
    *,
    names: Sequence[str] = (),
    server: bool,
    days: int = 365,
    use_rsa: bool = False,
) -> Issued:
    """A leaf certificate signed by `ca`: for a server (SANs = names) or a client (clientAuth)."""
    key = _new_key(use_rsa)
    now = datetime.datetime.now(datetime.UTC)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=use_rsa,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
            critical=False,
        )
    )
    unique = list(dict.fromkeys(names))
    if unique:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([_general_name(n) for n in unique]), critical=False
        )
    return Issued(builder.sign(ca.key, hashes.SHA256()), key)


@dataclass
class CertFiles:
    """Paths of everything nsqd-certs writes."""

    ca: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def write_all(
    out: Path | str,
    names: Sequence[str] = (),
    *,
    client_cn: str = "nsq-client",
    server_cn: str = "nsqd",
    days: int = 365,
    use_rsa: bool = False,
) -> CertFiles:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    ca = make_ca(days=days, use_rsa=use_rsa)
    server = issue(
        ca, server_cn, names=[*DEFAULT_NAMES, *names], server=True, days=days, use_rsa=use_rsa
    )
    client = issue(ca, client_cn, server=False, days=days, use_rsa=use_rsa)
    files = CertFiles(
        ca=out / "ca.pem",
        ca_key=out / "ca.key",
        server_cert=out / "server.pem",
        server_key=out / "server.key",
        client_cert=out / "client.pem",
        client_key=out / "client.key",
    )
    for path, data, secret in (
        (files.ca, ca.cert_pem(), False),
        (files.ca_key, ca.key_pem(), True),
        (files.server_cert, server.cert_pem(), False),
        (files.server_key, server.key_pem(), True),
        (files.client_cert, client.cert_pem(), False),
        (files.client_key, client.key_pem(), True),
    ):
        _write(path, data, 0o600 if secret else 0o644)
    return files


def _write(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, mode)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="nsqd-certs",
        description="Write a test CA, a server certificate and a client certificate for nsqd TLS.",
    )
    parser.add_argument(
        "names",
        nargs="*",
        help="extra DNS names or IP addresses for the server certificate "
        "(127.0.0.1, ::1 and localhost are always included)",
    )
    parser.add_argument("--out", "-o", default=".", help="directory to write to (default: .)")
    parser.add_argument("--client-cn", default="nsq-client", help="client certificate common name")
    parser.add_argument("--server-cn", default="nsqd", help="server certificate common name")
    parser.add_argument("--days", type=int, default=365, help="validity in days (default 365)")
    parser.add_argument("--rsa", action="store_true", help="RSA 2048 keys instead of ECDSA P-256")
    args = parser.parse_args(argv)
    if args.days <= 0:
        parser.error("--days must be > 0")
    files = write_all(
        args.out,
        args.names,
        client_cn=args.client_cn,
        server_cn=args.server_cn,
        days=args.days,
        use_rsa=args.rsa,
    )
    for label, path in (
        ("CA certificate", files.ca),
        ("CA key", files.ca_key),
        ("server certificate", files.server_cert),
        ("server key", files.server_key),
        ("client certificate", files.client_cert),
        ("client key", files.client_key),
    ):
        print(f"{label + ':':20} {path}")
    print(
        f"\nnsqd --tls-cert={files.server_cert} --tls-key={files.server_key} "
        f"--tls-root-ca-file={files.ca}",
        file=sys.stdout,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
