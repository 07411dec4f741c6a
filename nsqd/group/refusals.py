"""A peer's refusal as the group's: when the worker that got a request lacks the topic or
channel, the answer is the refusal of a peer that has it (it judged the request's other
arguments), and a peer's CHANNEL_NOT_FOUND beats a TOPIC_NOT_FOUND here (the group has the
topic: one nsqd would say CHANNEL_NOT_FOUND)."""

from __future__ import annotations

import json

from ..http.v1 import HTTPError

_QUEUE_MISSING = ("TOPIC_NOT_FOUND", "CHANNEL_NOT_FOUND")


def queue_missing(status: int, body: bytes) -> bool:
    """Whether a peer's answer says it lacks the topic or channel (it judged nothing else)."""
    return status == 404 and any(b'"%s"' % m.encode() in body for m in _QUEUE_MISSING)


def peer_error(status: int, body: bytes) -> HTTPError:
    """A peer's refusal as this worker's own: the same status, message and extra keys."""
    try:
        doc = json.loads(body)
        message = doc.pop("message")
    except (ValueError, TypeError, AttributeError, KeyError):
        return HTTPError(status, body.decode("utf-8", "replace"))
    return HTTPError(status, str(message), doc or None)


def refusal(err: HTTPError, answers: list[tuple[int, bytes]]) -> HTTPError:
    """The refusal of a request that failed here: this worker's, unless it lacks the queue
    and a peer that has it refused the request (its arguments, or the id): then that one's;
    and a peer's CHANNEL_NOT_FOUND over a TOPIC_NOT_FOUND here (the group has the topic)."""
    if err.status == 404 and err.message in _QUEUE_MISSING:
        for status, body in answers:
            if status != 200 and not queue_missing(status, body):
                return peer_error(status, body)
        if err.message == "TOPIC_NOT_FOUND":
            for status, body in answers:
                if status == 404 and b'"CHANNEL_NOT_FOUND"' in body:
                    return peer_error(status, body)
    return err
