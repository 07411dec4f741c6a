"""A pynsq 0.9.1 consumer that REQs every message at once (for the max_attempts tests).

    python tests/policies/pynsq_req.py --nsqd 127.0.0.1:4150 --topic T --channel C --for 4

Prints `<body> <attempts>` per delivery; exits 0 after --for seconds."""

from __future__ import annotations

import argparse
import logging
import sys

import nsq
import tornado.ioloop


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nsqd", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--channel", required=True)
    parser.add_argument("--for", dest="run", type=float, default=4.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    loop = tornado.ioloop.IOLoop.current()

    def handler(message: nsq.Message) -> bool:
        print(message.body.decode(), message.attempts, flush=True)
        message.requeue(backoff=False, delay=0)
        return None  # type: ignore[return-value]

    def on_message(message: nsq.Message) -> bool | None:
        message.enable_async()
        return handler(message)

    nsq.Reader(
        topic=args.topic,
        channel=args.channel,
        message_handler=on_message,
        nsqd_tcp_addresses=[args.nsqd],
        max_in_flight=100,
        max_tries=0,  # pynsq itself never gives up: the daemon's max_attempts decides
    )
    loop.call_later(args.run, loop.stop)
    loop.start()
    return 0


if __name__ == "__main__":
    sys.exit(main())
