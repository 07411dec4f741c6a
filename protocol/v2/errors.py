"""nsqd's client errors as data: a code, a description and whether the connection closes."""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    E_INVALID = "E_INVALID"
    E_BAD_PROTOCOL = "E_BAD_PROTOCOL"
    E_BAD_TOPIC = "E_BAD_TOPIC"
    E_BAD_CHANNEL = "E_BAD_CHANNEL"
    E_BAD_BODY = "E_BAD_BODY"
    E_BAD_MESSAGE = "E_BAD_MESSAGE"
    E_PUB_FAILED = "E_PUB_FAILED"
    E_MPUB_FAILED = "E_MPUB_FAILED"
    E_DPUB_FAILED = "E_DPUB_FAILED"
    E_FIN_FAILED = "E_FIN_FAILED"
    E_REQ_FAILED = "E_REQ_FAILED"
    E_TOUCH_FAILED = "E_TOUCH_FAILED"
    E_SUB_FAILED = "E_SUB_FAILED"
    E_IDENTIFY_FAILED = "E_IDENTIFY_FAILED"
    E_AUTH_FAILED = "E_AUTH_FAILED"
    E_AUTH_FIRST = "E_AUTH_FIRST"
    E_AUTH_DISABLED = "E_AUTH_DISABLED"
    E_UNAUTHORIZED = "E_UNAUTHORIZED"


# nsqd keeps the connection open after only these three; every other error closes it.
NON_FATAL_CODES = frozenset(
    {ErrorCode.E_FIN_FAILED, ErrorCode.E_REQ_FAILED, ErrorCode.E_TOUCH_FAILED}
)


class NSQError(Exception):
    """An error nsqd reports to a client in an error frame (`bytes(err)` is the frame body)."""

    def __init__(self, code: ErrorCode, desc: str | None = None, *, fatal: bool | None = None):
        self.code = code
        self.desc = desc
        self.fatal = code not in NON_FATAL_CODES if fatal is None else fatal
        super().__init__(str(self))

    def __str__(self) -> str:
        return self.code.value if self.desc is None else f"{self.code.value} {self.desc}"

    def __bytes__(self) -> bytes:
        return str(self).encode("utf-8", "surrogateescape")


class ProtocolClosed(Exception):
    """The peer broke the framing in a way nsqd answers by closing without an error frame
    (a command line longer than nsqd's read buffer, or end of stream mid-line)."""
