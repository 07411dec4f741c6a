"""What each V2 command does, one function per command, as nsqd's protocol_v2 Exec table.

The parser has already checked state, names, sizes and counts; these do the engine work and
queue the reply. All synchronous: nothing here waits."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from protocol.v2 import (
    CLOSE_WAIT_FRAME,
    OK_FRAME,
    Cls,
    DPub,
    Fin,
    Identify,
    MPub,
    MPubStart,
    Negotiation,
    Nop,
    Pub,
    Rdy,
    Req,
    ServerFeatures,
    Sub,
    Touch,
    encode_error,
    negotiate,
)

from ..engine.api import Refused

if TYPE_CHECKING:
    from .connection import Client


def identify(client: Client, cmd: Identify) -> Negotiation | None:
    """None for a plain OK reply; else the negotiated reply and upgrades."""
    settings = cmd.settings
    if not settings.feature_negotiation:
        return None
    node = client.node
    opts = node.options
    features = ServerFeatures(
        tls=node.tls_context is not None,
        deflate=opts.deflate,
        snappy=opts.snappy,
        max_deflate_level=opts.max_deflate_level,
        auth_required=client.auth is not None,
    )
    return negotiate(settings, features, node.limits)


def sub(client: Client, cmd: Sub) -> None:
    client.channel = client.broker.subscribe(cmd.topic, cmd.channel, client)
    client.accepting = True
    client.respond(OK_FRAME)


def pub(client: Client, cmd: Pub) -> None:
    mark = len(client._out)  # its out_mark(), inline: one call a PUB
    try:
        client.broker.publish(cmd.topic, [cmd.body])
    except Refused as exc:
        raise exc.nsq("PUB") from exc
    client.pub_counts[cmd.topic] += 1
    client.respond(OK_FRAME, before=mark)


def mpub_start(client: Client, cmd: MPubStart) -> None:
    # nsqd creates the topic before it reads MPUB's body.
    client.broker.create_topic(cmd.topic)


def mpub(client: Client, cmd: MPub) -> None:
    mark = client.out_mark()
    try:
        client.broker.publish(cmd.topic, cmd.bodies)
    except Refused as exc:
        raise exc.nsq("MPUB") from exc
    client.pub_counts[cmd.topic] += len(cmd.bodies)
    client.respond(OK_FRAME, before=mark)


def dpub(client: Client, cmd: DPub) -> None:
    mark = client.out_mark()
    try:
        client.broker.publish_deferred(cmd.topic, cmd.body, cmd.delay_ms)
    except Refused as exc:
        raise exc.nsq("DPUB") from exc
    client.pub_counts[cmd.topic] += 1
    client.respond(OK_FRAME, before=mark)


def rdy(client: Client, cmd: Rdy) -> None:
    client.rdy = cmd.count
    client.needs_refresh = True


def fin(client: Client, cmd: Fin) -> None:
    assert client.channel is not None
    for err in client.channel.finish(client, cmd.msg_ids):
        client.respond(encode_error(bytes(err)))
    client.needs_refresh = True  # refilled once per read, not once per FIN


def req(client: Client, cmd: Req) -> None:
    assert client.channel is not None
    client.channel.requeue(client, cmd.msg_id, cmd.delay_ms)
    client.needs_refresh = True


def touch(client: Client, cmd: Touch) -> None:
    assert client.channel is not None
    client.channel.touch(client, cmd.msg_id)


def cls(client: Client, cmd: Cls) -> None:
    client.rdy = 0
    client.accepting = False
    client.respond(CLOSE_WAIT_FRAME)


def nop(client: Client, cmd: Nop) -> None:
    pass


TABLE: dict[type, Callable[[Client, Any], None]] = {
    Fin: fin,
    Rdy: rdy,
    Req: req,
    Pub: pub,
    MPubStart: mpub_start,
    MPub: mpub,
    DPub: dpub,
    Nop: nop,
    Touch: touch,
    Sub: sub,
    Cls: cls,
}


def execute(client: Client, cmd: Any) -> None:
    TABLE[type(cmd)](client, cmd)
