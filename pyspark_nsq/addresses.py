"""host:port addresses as the options spell them ("127.0.0.1:4150", "[::1]:4150", "http://h:p")."""

from __future__ import annotations

import re
from dataclasses import dataclass

_SPLIT = re.compile(r"[\s,]+")


@dataclass(frozen=True, slots=True, order=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @classmethod
    def parse(cls, text: str, *, what: str = "address") -> Address:
        raw = text.strip()
        for scheme in ("http://", "https://", "tcp://"):
            if raw.lower().startswith(scheme):
                raw = raw[len(scheme) :]
        raw = raw.rstrip("/")
        if raw.startswith("["):
            host, sep, port = raw[1:].partition("]:")
        else:
            host, sep, port = raw.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"invalid {what} {text!r}: expected host:port")
        return cls(host, int(port))


def parse_list(text: str | None, *, what: str) -> list[Address]:
    if not text:
        return []
    return [Address.parse(part, what=what) for part in _SPLIT.split(text.strip()) if part]
