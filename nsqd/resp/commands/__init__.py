"""The RESP commands by family; importing this package fills registry.TABLE."""

from . import (  # noqa: F401  (they register themselves)
    admin,
    clients,
    connection,
    hashes,
    keys,
    lists,
    mpop,
    pubsub,
    scripting,
    sets,
    sort,
    stream_claims,
    stream_groups,
    stream_info,
    stream_read,
    streams,
    strings,
    transactions,
    zpop,
    zsets,
)
from .registry import Block, Deferred, ReplyError, Session, dispatch

__all__ = ["Block", "Deferred", "ReplyError", "Session", "dispatch"]
