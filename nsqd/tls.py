"""TLS for the TCP upgrade and HTTPS: the server context from nsqd's --tls-* options, and the
client certificate's common name (for AUTH's `common_name`)."""

from __future__ import annotations

import ssl

import trio

from .config.options import Options
from .gocompat.strconv import OptionError

# names of ssl.TLSVersion members: read only when a context is built, so that a daemon without
# TLS never loads OpenSSL (see nsqd.lazy)
_VERSIONS = {"tls1.0": "TLSv1", "tls1.1": "TLSv1_1", "tls1.2": "TLSv1_2", "tls1.3": "TLSv1_3"}


def server_context(opts: Options) -> ssl.SSLContext | None:
    """None when no certificate and key are configured (then IDENTIFY answers tls_v1 false).
    Unreadable files refuse the start with nsqd's words."""
    if not (opts.tls_cert and opts.tls_key):
        return None
    try:
        return _server_context(opts)
    except OSError as exc:  # ssl.SSLError included
        name = f"open {exc.filename}: " if exc.filename else ""
        reason = (exc.strerror or str(exc)).lower()
        raise OptionError(f"failed to build TLS config - {name}{reason}") from None


def _server_context(opts: Options) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    version = (opts.tls_min_version or "tls1.0").lower()
    if version not in _VERSIONS:
        raise OptionError(f"unknown tls_min_version: {opts.tls_min_version}")
    ctx.minimum_version = getattr(ssl.TLSVersion, _VERSIONS[version])
    if ctx.minimum_version < ssl.TLSVersion.TLSv1_2:
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")  # let old clients in when asked to, as nsqd
    for path in (opts.tls_cert, opts.tls_key):
        with open(path, "rb"):  # Go names the file it could not open; ssl does not
            pass
    ctx.load_cert_chain(opts.tls_cert, opts.tls_key)
    policy = opts.tls_client_auth_policy
    if policy == "require":
        # Any certificate will do (Go's RequireAnyClientCert); checked in peer_common_name.
        ctx.verify_mode = ssl.CERT_OPTIONAL
        ctx.check_hostname = False
        ctx.load_default_certs()
        if opts.tls_root_ca_file:
            ctx.load_verify_locations(opts.tls_root_ca_file)
    elif policy == "require-verify":
        ctx.verify_mode = ssl.CERT_REQUIRED
        if opts.tls_root_ca_file:
            ctx.load_verify_locations(opts.tls_root_ca_file)
        else:
            ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    elif policy:
        raise OptionError(f"invalid --tls-client-auth-policy {policy!r}")
    return ctx


def peer_common_name(stream: trio.SSLStream[trio.abc.Stream]) -> str:
    der = stream.getpeercert(binary_form=True)
    if not der:
        return ""
    from cryptography import x509  # only for TLS clients: a slow import otherwise not needed
    from cryptography.x509.oid import NameOID

    cert = x509.load_der_x509_certificate(der)
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(names[0].value) if names else ""
