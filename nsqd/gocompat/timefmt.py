"""Go's text forms of times and durations: time.Duration.String, RFC 3339 in local time, and
nsq's NanoSecondToHuman."""

from __future__ import annotations

from datetime import datetime


def _frac(v: int, digits: int) -> str:
    whole, frac = divmod(v, 10**digits)
    text = f"{frac:0{digits}d}".rstrip("0")
    return f"{whole}.{text}" if text else str(whole)


def go_duration(ns: int) -> str:
    """time.Duration.String: 0s, 850ns, 1.5µs, 65.643µs, 2.3ms, 58.2s, 1m5s, 2h0m1s."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    u = abs(ns)
    if u < 1000:
        return f"{sign}{u}ns"
    if u < 1_000_000:
        return f"{sign}{_frac(u, 3)}µs"
    if u < 1_000_000_000:
        return f"{sign}{_frac(u, 6)}ms"
    minutes, rem = divmod(u, 60_000_000_000)
    text = f"{_frac(rem, 9)}s"
    if minutes:
        hours, minutes = divmod(minutes, 60)
        text = f"{minutes}m{text}"
        if hours:
            text = f"{hours}h{text}"
    return sign + text


def nanoseconds_to_human(v: float) -> str:
    """nsq's stringy.NanoSecondToHuman, used for e2e% in the text page."""
    if v > 1e9:
        return f"{v / 1e9:0.1f}s"
    if v > 1e6:
        return f"{v / 1e6:0.1f}ms"
    if v > 1e3:
        return f"{v / 1e3:0.1f}us"
    return f"{v:0.1f}ns"


def rfc3339(ts: int) -> str:
    """Go's time.Format(time.RFC3339) in local time: 2006-01-02T15:04:05Z07:00."""
    dt = datetime.fromtimestamp(ts).astimezone()
    offset = dt.utcoffset()
    if offset is not None and offset.total_seconds() == 0:
        return dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    return dt.isoformat(timespec="seconds")
