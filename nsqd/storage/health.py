"""The store's health sink (the broker, whose health is nsqd's GetHealth: /ping, /stats): a
failed disk write sets its `last_error`, and the next good write clears it, as nsqd's does.
Every file of ours that writes (the disk queues, the in-flight journals, the dedupe log) turns
health OK again through `wrote`."""

from __future__ import annotations

from typing import Protocol


class Health(Protocol):
    last_error: str | None  # the latest disk write failure, None when healthy


def wrote(health: Health) -> None:
    """A good write: health is OK again (nsqd: the next good write makes it healthy)."""
    if health.last_error is not None:
        health.last_error = None
