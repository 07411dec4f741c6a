"""A pynsq 0.9.1 consumer that only knows nsqlookupd's HTTP address.

    python tests/ops/pynsq_consumer.py --lookupd 127.0.0.1:4161 --topic T --channel C --n 3

Prints each message body on its own line; exits 0 once it has n messages, 1 on timeout."""

from __future__ import annotations

import argparse
import logging
import sys

import nsq
import tornado.ioloop


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lookupd", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--channel", required=True)
    parser.add_argument("--n", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    loop = tornado.ioloop.IOLoop.current()
    state = {"got": 0, "rc": 1}

    def handler(message: nsq.Message) -> bool:
        print(message.body.decode(), flush=True)
        state["got"] += 1
        if state["got"] >= args.n:
            state["rc"] = 0
            loop.add_callback(loop.stop)
        return True

    def give_up() -> None:
        print(f"timed out with {state['got']} of {args.n}", file=sys.stderr)
        loop.stop()

    nsq.Reader(
        topic=args.topic,
        channel=args.channel,
        message_handler=handler,
        lookupd_http_addresses=[f"http://{args.lookupd}"],
        lookupd_poll_interval=1,
        max_in_flight=10,
    )
    loop.call_later(args.timeout, give_up)
    loop.start()
    return state["rc"]


if __name__ == "__main__":
    sys.exit(main())
