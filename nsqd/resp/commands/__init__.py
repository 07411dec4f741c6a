"""The RESP commands by family; importing this package fills registry.TABLE."""

from . import admin, clients, connection, hashes, keys, lists, strings, transactions, zsets  # noqa: F401  (they register themselves)
from .registry import Block, ReplyError, Session, dispatch

__all__ = ["Block", "ReplyError", "Session", "dispatch"]
