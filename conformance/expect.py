"""`expect:` lines: optional assertions on what the current connection received.

Each connection keeps a queue of received events not yet checked; every `expect:` except `open`
and `nothing` takes the next one and compares it:

    expect: response OK                  exact rendered event
    expect: error E_BAD_BODY ...         a trailing `...` matches any rest
    expect: error b'E_INVALID x '        (texts with odd bytes or edge spaces render as a
                                         Python bytes literal; either form matches)
    expect: message body=hello attempts=1   the listed message fields only
    expect: heartbeat                    = response _heartbeat_
    expect: closed                       the server closed the connection
    expect: open                         the connection is still open (consumes nothing)
    expect: nothing [200ms]              (after collecting that much longer) no unchecked event
"""

from __future__ import annotations

from dataclasses import dataclass

from .wire import Event

KINDS = ("response", "error", "message", "heartbeat", "closed", "open", "nothing")


@dataclass(frozen=True)
class Expectation:
    kind: str
    text: str = ""
    wait: float | None = None  # only for `nothing`

    def matches(self, event: Event) -> bool:
        if self.kind == "heartbeat":
            return event.kind == "response" and event.text == "_heartbeat_"
        if event.kind != self.kind:
            return False
        if self.kind == "message":
            wanted = dict(tok.split("=", 1) for tok in self.text.split())
            return all(event.fields.get(k) == v for k, v in wanted.items())
        texts = (event.text, event.fields.get("raw", event.text))
        if self.text.endswith("..."):
            return any(t.startswith(self.text[:-3].rstrip()) for t in texts)
        return self.text in texts


def parse_expectation(arg: str) -> Expectation:
    from .scenario import parse_duration

    kind, _, text = arg.strip().partition(" ")
    text = text.strip()
    if kind not in KINDS:
        raise ValueError(f"unknown expectation {kind!r} (one of {', '.join(KINDS)})")
    if kind == "nothing":
        return Expectation(kind, wait=parse_duration(text) if text else None)
    if kind == "message":
        for tok in text.split():
            if "=" not in tok:
                raise ValueError(f"message expectation wants key=value fields, got {tok!r}")
    elif kind in ("heartbeat", "closed", "open") and text:
        raise ValueError(f"'expect: {kind}' takes no argument")
    return Expectation(kind, text)
