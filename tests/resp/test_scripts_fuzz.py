"""Random scripts against the fence (a seeded, bounded run of what two fuzz campaigns found
their way in with): pieces that reach for the machine, the real globals, the fenced tables,
metamethods, error objects, coroutines, redis.call's objects and the memory limit, glued
into scripts at random. After every script the connection still answers PING, and at the end
the daemon is up, its log has no traceback, PANIC or "unexpected error", and the next script
sees nothing a previous one left. Loops that run to the time limit are tested on their own
(test_scripting_sandbox.py): here each would cost 5 s."""

from __future__ import annotations

import random

from .test_scripting_sandbox import command, exchange, ping_http

SEED = 20261203
SCRIPTS = 400

PIECES = [
    "local x = os",
    "local x = python",
    "x = 1",
    "rawset(_G, 'k', 1)",
    "table.insert(_G, 1)",
    "table.insert(string, 'x')",
    "string.rep = nil",
    "getmetatable('').__index = nil",
    "local m = getmetatable(redis.call) if m then m.__gc(redis.call) end",
    "local x = redis.call.__class__",
    "local ok, e = pcall(redis.call, 'nosuch') local y = e .. ''",
    "local ok, e = pcall(redis.call, 'lpush', 'fz-s', 'x')",
    "redis.call('set', 'fz-s', 'v')",
    "local ok, e = pcall(redis.sha1hex) local y = tostring(e)",
    "local ok, e = pcall(redis.call, {}) local y = tostring(e)",
    "local co = coroutine.create(function() redis.call('nosuch') end) coroutine.resume(co)",
    "local w = coroutine.wrap(function() coroutine.yield(1) error({}) end) pcall(w) pcall(w)",
    "xpcall(function() error(setmetatable({}, {__tostring = function() error('t') end})) end,"
    " function(e) return tostring(e) end)",
    "pcall(error, setmetatable({}, {__index = function() error('i') end}))",
    "local f = loadstring(string.dump(function() return 1 end))",
    "local f = loadstring('x = 2') if f then pcall(f) end",
    "local f = load(function() return nil end)",
    "local t = {} t[1] = t",
    "local t = {} for i = 1, 1000 do t[i] = string.rep('y', i) end",
    "local t = {} pcall(function() while true do t[#t + 1] = string.rep('z', 1e6) .. #t end end)",
    "collectgarbage('collect')",
    "local ok = pcall(string.rep, 'x', -1)",
    "local y = ('%d'):format(2^53)",
    "local y = tostring(1/0) .. tostring(0/0)",
    "redis.call('rpush', 'fz-l', 1, 2, 3)",
    "local ok = pcall(redis.call, 'multi')",
    "local ok = pcall(redis.call, 'eval', 'return 1', 0)",
    "local ok = pcall(redis.call, 'script', 'flush')",
]
RETURNS = [
    "return 1",
    "return 0/0",
    "return {1, {err = 'e'}, {ok = 's'}, 2.5, false, 'x'}",
    "return function() end",
    "return redis.call('lrange', 'fz-l', 0, -1)",
    "return redis.error_reply('x')",
    "return redis.status_reply('y')",
    "return setmetatable({}, {__index = function() return 1 end})",
    "return {coroutine.create(function() end)}",
    "local t = {} t[1] = t return t",
    "return KEYS",
    "",
]


def test_random_scripts_leave_the_daemon_answering(ours) -> None:
    server = ours.start()
    rng = random.Random(SEED)
    for n in range(SCRIPTS):
        body = "\n".join([*rng.sample(PIECES, rng.randint(1, 4)), rng.choice(RETURNS)])
        reply = exchange(
            server.port, command("EVAL", body, "1", "k") + command("PING"), b"+PONG\r\n", timeout=30
        )
        assert reply.endswith(b"+PONG\r\n"), (n, body, reply[-300:], server.log())
    assert server.proc.poll() is None, server.log()
    assert ping_http(server) == b"OK"
    log = server.log()
    for bad in ("Traceback", "PANIC", "unexpected error"):
        assert bad not in log, log
    # nothing left behind: the globals and the libraries are as they were
    check = "return {type(x), type(k), rawget(_G, 1), rawget(string, 1), string.rep('a', 2)}"
    reply = exchange(server.port, command("EVAL", check, "0"), b"\r\n")
    assert b"nonexistent global variable 'x'" in reply, reply
