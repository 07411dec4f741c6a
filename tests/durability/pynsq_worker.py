"""A pynsq 0.9.1 consumer for the --durable-inflight tests.

    python tests/durability/pynsq_worker.py --nsqd 127.0.0.1:4150 --topic T --channel C --n 200
        [--hold PREFIX]

Prints `<body> <attempts>` per message; finishes every message except those whose body starts
with PREFIX (left in flight, never finished); exits 0 one second after the n-th message (FINs
sent), 1 on timeout."""

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
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--hold", default="")
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--max-in-flight", type=int, default=0, help="default: --n")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    loop = tornado.ioloop.IOLoop.current()
    state = {"got": 0, "rc": 1}
    held: list[nsq.Message] = []  # kept referenced: pynsq must not finish them

    def handler(message: nsq.Message) -> bool | None:
        body = message.body.decode()
        print(body, message.attempts, flush=True)
        state["got"] += 1
        if state["got"] == args.n:
            state["rc"] = 0
            loop.call_later(1.0, loop.stop)
        if args.hold and body.startswith(args.hold):
            message.enable_async()
            held.append(message)
            return None
        return True

    def give_up() -> None:
        print(f"timed out with {state['got']} of {args.n}", file=sys.stderr)
        loop.stop()

    nsq.Reader(
        topic=args.topic,
        channel=args.channel,
        message_handler=handler,
        nsqd_tcp_addresses=[args.nsqd],
        max_in_flight=args.max_in_flight or args.n,
    )
    loop.call_later(args.timeout, give_up)
    loop.start()
    return state["rc"]


if __name__ == "__main__":
    sys.exit(main())
