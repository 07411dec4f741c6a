"""nsqd's log line: `[nsqd] 2006/01/02 15:04:05.000000 INFO: message`, to stderr."""

from __future__ import annotations

import logging
import sys
import time

log = logging.getLogger("nsqd")

LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "fatal": logging.CRITICAL,
}
_NAMES = {
    logging.DEBUG: "DEBUG",
    logging.INFO: "INFO",
    logging.WARNING: "WARNING",
    logging.ERROR: "ERROR",
    logging.CRITICAL: "FATAL",
}


class _Formatter(logging.Formatter):
    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(record.created))
        micros = int((record.created % 1) * 1_000_000)
        level = _NAMES.get(record.levelno, record.levelname)
        return f"{self.prefix}{stamp}.{micros:06d} {level}: {record.getMessage()}"


def setup(level: str = "info", prefix: str = "[nsqd] ") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter(prefix))
    log.handlers[:] = [handler]
    log.setLevel(LEVELS[level.lower()])
    log.propagate = False
