"""Publish demo JSON events for events_per_minute.py: --minutes minutes of event time, starting
at --start, --per-minute events each, kinds click/view/buy in turn."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys

from pyspark_nsq.addresses import Address
from pyspark_nsq.conn import Publisher

KINDS = ("click", "view", "buy")


def events(start: dt.datetime, minutes: int, per_minute: int) -> list[bytes]:
    out = []
    for m in range(minutes):
        for i in range(per_minute):
            ts = start + dt.timedelta(minutes=m, seconds=i * 60 / per_minute)
            body = {
                "ts": ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                "kind": KINDS[i % len(KINDS)],
                "user": i,
            }
            out.append(json.dumps(body).encode())
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nsqd", default="127.0.0.1:4150")
    parser.add_argument("--topic", default="events")
    parser.add_argument("--start", default="2026-01-01T10:00:00+00:00")
    parser.add_argument("--minutes", type=int, default=5)
    parser.add_argument("--per-minute", type=int, default=600)
    args = parser.parse_args()
    bodies = events(dt.datetime.fromisoformat(args.start), args.minutes, args.per_minute)
    with Publisher(Address.parse(args.nsqd)) as pub:
        pub.publish_many(args.topic, bodies)
    print(f"published {len(bodies)} events to {args.topic} on {args.nsqd}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
