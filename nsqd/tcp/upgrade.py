"""IDENTIFY's stream upgrades, in nsqd's order: TLS, then snappy or deflate, each followed by
an OK frame sent through the new layer. The negotiation reply has already gone out in
plaintext; bytes the client sent behind IDENTIFY are handed to the new layer, not lost.

As in nsqd, a later IDENTIFY's layers replace the earlier ones instead of stacking on them:
TLS goes on the TCP socket itself (dropping any compression), snappy or deflate on the TLS
layer or the socket. Bytes the replaced layer had already decoded are dropped, as nsqd drops
its replaced reader's buffer."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from protocol.v2 import OK_FRAME, ErrorCode, Negotiation, NSQError

from ..net.tls_stream import TLSStream
from ..net.transport import StreamTransport
from .streams import DeflateStream, PrefixedStream, SnappyStream

if TYPE_CHECKING:
    from .connection import Client

TLS_HANDSHAKE_TIMEOUT = 5.0


async def upgrade(client: Client, negotiation: Negotiation) -> None:
    conn = client.conn
    prefix = conn.trailing_data
    conn.clear_trailing_data()
    stream = client.base_stream if negotiation.tls else client.tls_stream or client.base_stream
    if stream is not client.stream:
        prefix = b""  # decoded by the layer being replaced: not the new layer's input
    try:
        if negotiation.tls:
            ctx = client.node.tls_context
            assert ctx is not None
            tls: TLSStream | trio.SSLStream[trio.abc.Stream]
            if isinstance(stream, trio.SocketStream):
                tls = TLSStream(stream, ctx, prefix)  # on the fd: whole batches per receive
            else:
                tls = trio.SSLStream(
                    PrefixedStream(stream, prefix), ctx, server_side=True, https_compatible=True
                )
            prefix = b""
            with trio.fail_after(TLS_HANDSHAKE_TIMEOUT):
                await tls.do_handshake()
            if client.node.options.tls_client_auth_policy and not tls.getpeercert(True):
                # "require": Python's ssl asks for a certificate but cannot insist on one
                raise NSQError(
                    ErrorCode.E_IDENTIFY_FAILED,
                    "IDENTIFY failed tls: client didn't provide a certificate",
                )
            stream = tls
            client.tls_stream = tls
            conn.tls_active = True
            await _switch(client, stream)
        if negotiation.snappy:
            stream = SnappyStream(stream, prefix)
            prefix = b""
            client.snappy = True
            await _switch(client, stream)
        if negotiation.deflate:
            stream = DeflateStream(stream, negotiation.deflate_level, prefix)
            prefix = b""
            client.deflate = True
            await _switch(client, stream)
    except trio.TooSlowError as exc:
        raise NSQError(ErrorCode.E_IDENTIFY_FAILED, f"IDENTIFY failed {_timeout(client)}") from exc
    except (trio.BrokenResourceError, OSError) as exc:
        why = str(exc) or str(exc.__cause__ or "")  # the TLS layer's error is the cause
        raise NSQError(ErrorCode.E_IDENTIFY_FAILED, f"IDENTIFY failed {why}") from exc
    if prefix:
        conn.receive_data(prefix)


async def _switch(client: Client, stream: trio.abc.Stream) -> None:
    client.stream = stream
    client.transport = StreamTransport(stream)
    await client.transport.send(OK_FRAME, TLS_HANDSHAKE_TIMEOUT)


def _timeout(client: Client) -> str:
    """Go's words for a deadline passed on the connection: "read tcp LOCAL->REMOTE: i/o
    timeout" (a handshake that stalled)."""
    sock = getattr(client.base_stream, "socket", None)
    try:
        local, remote = _address(sock.getsockname()), _address(sock.getpeername())
    except (AttributeError, OSError):
        local, remote = "", client.remote_address
    return f"read tcp {local}->{remote}: i/o timeout"


def _address(addr: tuple[str, int]) -> str:
    host, port = addr[:2]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
