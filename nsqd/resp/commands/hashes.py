"""Hashes (seed 003): HSET/HMSET, HGET, HGETALL, HDEL, HLEN, HEXISTS."""

from __future__ import annotations

from protocol.resp.codec import OK, ZERO, bulk, integer

from .registry import Session, command, wrong_arity


@command("hset", -4)
def hset(s: Session, argv: list[bytes]) -> bytes:
    if len(argv) % 2:
        raise wrong_arity("hset")
    return integer(s.ks.hset(argv[1], argv[2:]))


@command("hmset", -4)
def hmset(s: Session, argv: list[bytes]) -> bytes:
    if len(argv) % 2:
        raise wrong_arity("hmset")
    s.ks.hset(argv[1], argv[2:])
    return OK


@command("hget", 3)
def hget(s: Session, argv: list[bytes]) -> bytes:
    h = s.ks.get_hash(argv[1])
    return s.enc.bulk(None if h is None else h.get(argv[2]))


@command("hgetall", 2)
def hgetall(s: Session, argv: list[bytes]) -> bytes:
    h = s.ks.get_hash(argv[1])
    if h is None:
        return s.enc.map([])
    return s.enc.map([bulk(x) for kv in h.items() for x in kv])


@command("hdel", -3)
def hdel(s: Session, argv: list[bytes]) -> bytes:
    if s.ks.get_hash(argv[1]) is None:
        return ZERO
    return integer(s.ks.hdel(argv[1], argv[2:]))


@command("hlen", 2)
def hlen(s: Session, argv: list[bytes]) -> bytes:
    h = s.ks.get_hash(argv[1])
    return integer(0 if h is None else len(h))


@command("hexists", 3)
def hexists(s: Session, argv: list[bytes]) -> bytes:
    h = s.ks.get_hash(argv[1])
    return integer(int(h is not None and argv[2] in h))
