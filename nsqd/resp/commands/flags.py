"""Which of our commands Redis 7.0.15 flags `write` (its COMMAND INFO; a test holds the list to
redis-server's): while resp.log cannot be written these are refused with -MISCONF, as Redis
refuses them after a failed AOF write (processCommand: `is_write_command`, and PING)."""

from __future__ import annotations

WRITE = frozenset({
    "append", "blmove", "blmpop", "blpop", "brpop", "brpoplpush", "decr", "decrby", "del", "expire",
    "expireat", "flushall", "flushdb", "function|flush", "getdel", "getex", "getset", "hdel",
    "hincrby", "hincrbyfloat", "hmset", "hset", "hsetnx", "incr", "incrby", "incrbyfloat",
    "linsert", "lmove", "lmpop", "lpop", "lpush", "lpushx", "lrem", "lset", "ltrim", "mset",
    "msetnx", "persist", "pexpire", "pexpireat", "psetex", "rename", "renamenx", "rpop",
    "rpoplpush", "rpush", "rpushx", "sadd", "sdiffstore", "set", "setex", "setnx", "sinterstore",
    "smove", "sort", "spop", "srem", "sunionstore", "unlink", "xadd", "xdel", "xtrim", "zadd",
    "zincrby", "zpopmax", "zpopmin", "zrem", "zremrangebyrank", "zremrangebyscore",
})  # fmt: skip
# refused as well while Redis cannot write its AOF (processCommand's `pingCommand` case)
DISK_BOUND = WRITE | {"ping"}
# commands that run others: a change they made is a write's (EXEC's queue, a script's calls)
RUNS_OTHERS = frozenset({"exec", "eval", "evalsha"})
# writes whose reply hands over what they removed (a popped element, the value they deleted
# or replaced): in the pass whose log write fails they keep that reply, as Redis answers
# them, where the pass's other writes get -MISCONF. Refused, the element is gone from memory
# and, once the kept record is written, from the log: lost to every client. Answered, it
# reaches its client; were the kept record never written (kill -9, or a stop with the disk
# still full), it comes back after the restart: delivered twice at worst, never lost.
HANDS_OVER = frozenset({
    "blmove", "blmpop", "blpop", "brpop", "brpoplpush", "getdel", "getset", "lmove", "lmpop",
    "lpop", "rpop", "rpoplpush", "spop", "zpopmax", "zpopmin",
})  # fmt: skip
