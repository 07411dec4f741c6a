"""The Lua that EVAL runs, fenced as Redis 7.0 fences it: one client's script must not reach
the machine, stop the daemon or stall it (the same loop serves NSQ).

- Globals: a script runs in an environment of its own that holds what Redis 7.0 exposes (the
  base library less dofile/loadfile/print/getfenv/setfenv/newproxy/module/require, and
  coroutine, math, string, table, and cmsgpack and cjson: Lua of their own, lua_cmsgpack.py and
  lua_cjson.py), `redis`, KEYS and ARGV. No os, io, debug, package, and none
  of lupa's `python` bridge (the runtime is made without eval and builtins). The only Python
  objects a script holds are redis.call, redis.pcall and redis.sha1hex (and the exception a
  pcall of them catches, where Redis gives a string): every attribute of theirs is refused,
  and `getmetatable` gives nil for them (lupa's metatable has a __gc a script could call). A
  chunk that `loadstring` or `load` makes gets the script's environment too.
- Read only, as in Redis 7.0: the environment and the library tables refuse writes
  ("Attempt to modify a readonly table"), `rawset` and table.insert/remove/sort included,
  and reading a global that does not exist is an error ("Script attempted to access
  nonexistent global variable"), so a script cannot leave anything behind for the next one.
- `loadstring` and `load` refuse precompiled chunks (Lua 5.1 does not verify bytecode: a
  crafted one corrupts memory; Redis refuses them too).
- Time: a script that runs past `time_limit` seconds (Redis's busy-reply-threshold, 5 s) is
  killed: from then on every line it reaches raises, as Redis's SCRIPT KILL does, and the
  client gets an error. Redis keeps serving other clients with -BUSY meanwhile and refuses to
  kill a script that wrote; here every front-end waits for the script, so it always ends, and
  what it wrote before stays written.
- Memory: while a script's own code runs the Lua state may use at most `MAX_MEMORY` bytes;
  past it the script fails with "not enough memory". Outside it (the owner's tables, a
  callback's reply) the limit is lifted: an allocation failing there would abort the process.
  The clock is read every HOOK_EVERY instructions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .lua_cjson import CJSON
from .lua_cmsgpack import CMSGPACK

MAX_MEMORY = 256 << 20
TIME_LIMIT_S = 5.0
# instructions between two looks at the clock: ~10 us of plain Lua (the look costs ~0.5 us),
# and bounded where each instruction is a costly string operation (copies of megabytes)
HOOK_EVERY = 1_000

# Run once in a fresh state with (call, pcall, sha1hex, now, killed, time_limit, hook_every,
# cmsgpack, cjson);
# returns the sandbox's own functions and the table KEYS and ARGV go in.
_SANDBOX = r"""
local call, pcall_, sha1hex, now, killed, caught, time_limit, hook_every, cmsgpack, cjson = ...
local G = _G
local error, getmetatable, setmetatable, rawset, type, select, tostring, pairs = error,
    getmetatable, setmetatable, rawset, type, select, tostring, pairs
local loadstring, setfenv, unpack, concat, byte = loadstring, setfenv, unpack, table.concat,
    string.byte
local sethook, getinfo = debug.sethook, debug.getinfo
local create, resume, status = coroutine.create, coroutine.resume, coroutine.status
local xpcall, maxn, huge = xpcall, table.maxn, math.huge

local protected = setmetatable({}, {__mode = "k"})
local function bad_arguments() return {err = "ERR wrong number or type of arguments"} end
local function readonly() error("Attempt to modify a readonly table", 2) end
local function fenced(t)
  local p = setmetatable({}, {__index = t, __newindex = readonly, __metatable = false})
  protected[p] = true
  return p
end

-- the time limit: a count hook looks at the clock; past the limit a line hook raises at
-- every line (a pcall that catches it is left at its next line)
local deadline, dead = huge, false
local hook
hook = function()
  if dead or now() > deadline then
    if not dead then
      dead = true
      killed((getinfo(2, "l") or {}).currentline or 0)
    end
    sethook(hook, "l")
    error("Script killed", 0)
  end
end
local function arm()
  deadline, dead = now() + time_limit, false
  sethook(hook, "", hook_every)
end

local env
local function load_text(text, name)
  if type(text) == "string" and byte(text, 1) == 27 then
    return nil, "bytecode loading is not allowed"
  end
  local f, problem = loadstring(text, name)
  if f == nil then return nil, problem end
  return setfenv(f, env)  -- (a chunk's own environment would be the state's globals)
end

local lib = {}
for _, name in pairs({"assert", "collectgarbage", "error", "gcinfo", "getmetatable",
    "ipairs", "next", "pairs", "rawequal", "rawget", "select", "setmetatable",
    "tonumber", "tostring", "type", "unpack", "_VERSION"}) do
  lib[name] = G[name]
end
lib.loadstring = load_text
lib.load = function(reader, name)
  local parts = {}
  while true do
    local part = reader()
    if part == nil or part == "" then break end
    if type(part) ~= "string" then return nil, "reader function must return a string" end
    parts[#parts + 1] = part
  end
  return load_text(concat(parts), name or "=(load)")
end
lib.getmetatable = function(value)  -- a Python object's metatable (lupa's) is not the script's:
  if type(value) == "userdata" then return nil end  -- its __gc would free the object twice
  return getmetatable(value)
end
lib.rawset = function(t, k, v)
  if protected[t] then error("Attempt to modify a readonly table", 0) end
  return rawset(t, k, v)
end
-- An error raised by redis.call (or another Python callable) reaches Lua as the Python
-- exception; a script that catches one gets Redis's value instead: its text from pcall, a
-- table {err = text} in an xpcall handler and from coroutine.resume (as redis-server 7.0.15)
local function settled(as_table, ok, ...)
  if ok then return true, ... end
  local e = ...
  if type(e) == "userdata" then
    e = caught(e)
    if as_table then e = {err = e} end
  end
  return false, e
end
lib.pcall = function(f, ...) return settled(false, pcall(f, ...)) end
lib.xpcall = function(f, handler)  -- a killed script's error skips the handler (it would run
  return xpcall(f, function(e)     -- with hooks off)
    if dead then return e end
    if type(e) == "userdata" then e = {err = caught(e)} end
    return handler(e)
  end)
end
local function hooked(f)
  local co = create(f)
  sethook(co, hook, "", hook_every)
  return co
end
lib.coroutine = fenced({
  create = hooked,
  resume = function(co, ...) return settled(true, resume(co, ...)) end,
  running = coroutine.running,
  status = status,
  yield = coroutine.yield,
  wrap = function(f)
    local co = hooked(f)
    return function(...)
      local out = {settled(true, resume(co, ...))}
      if not out[1] then error(out[2], 2) end
      return unpack(out, 2, maxn(out))
    end
  end,
})
lib.math = fenced(math)
lib.cmsgpack = fenced(cmsgpack)  -- (lua_cmsgpack.py, lua_cjson.py: Lua of their own)
lib.cjson = fenced(cjson)
lib.string = fenced(string)
-- the table library writes raw: on a fenced table that would get past its __newindex
local function writes(f)
  return function(t, ...)
    if protected[t] then error("Attempt to modify a readonly table", 0) end  -- (as Redis:
    return f(t, ...)  -- no position, raised in C there)
  end
end
lib.table = fenced({
  concat = table.concat, foreach = table.foreach, foreachi = table.foreachi,
  getn = table.getn, maxn = table.maxn, setn = table.setn,
  insert = writes(table.insert), remove = writes(table.remove), sort = writes(table.sort),
})
lib.redis = fenced({
  -- the Python callables themselves: a call of a C function keeps the script's frame (a Lua
  -- function around them would not, where the script ends in `return redis.call(..)`), and
  -- the error's line is read from it
  call = call,
  pcall = pcall_,
  -- Redis 7.0's helpers, their argument checks and texts included
  status_reply = function(...)
    local text = ...
    if select("#", ...) ~= 1 or type(text) ~= "string" then return bad_arguments() end
    return {ok = text}
  end,
  error_reply = function(...)
    local text = ...
    if select("#", ...) ~= 1 or type(text) ~= "string" then return bad_arguments() end
    if byte(text, 1) == 45 then text = text:sub(2) end  -- "-CODE message", or "message":
    if not text:find(" ", 1, true) then text = "ERR " .. text end  -- then the code is ERR
    return {err = text}
  end,
  sha1hex = sha1hex,  -- a Python callable too: its argument error names the script's line
  log = function() end,
  LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
})
-- a script's environment: its reads go to `lib`, its writes are refused. lupa itself keeps
-- the state's real globals (it reads `debug` from there), which no script can name
env = setmetatable({}, {
  __index = function(_, name)
    local value = lib[name]
    if value == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
    end
    return value
  end,
  __newindex = readonly,
  __metatable = false,
})
protected[env] = true
lib._G = env

-- methods on strings ("x"):rep(3) go through the fenced string table too
local string_mt = getmetatable("")
string_mt.__index = lib.string
string_mt.__metatable = fenced(string_mt)

local function line()  -- the script's line that is running (for a redis.call error)
  local level = 2
  while true do
    local info = getinfo(level, "Sl")
    if info == nil then return 0 end
    if info.source == "@user_script" then return info.currentline end
    level = level + 1
  end
end

-- a script's run: (true, its first value) or (false, the error's text, the script's line
-- that raised it, whether the text is the reply as it stands: error({err = ...}))
local function run(f)
  local where = 0
  local ok, value = xpcall(f, function(e) where = line() return e end)
  if ok then return true, value, 0, false end
  if type(value) == "table" then
    local text = rawget(value, "err")
    if type(text) == "string" then return false, text, where, true end
  end
  if type(value) == "number" then value = tostring(value) end
  if type(value) ~= "string" then value = "(error object is a " .. type(value) .. " value)" end
  return false, value, where, false
end

return {
  run = run,
  lib = lib,
  loader = function(body) return load_text(body, "@user_script") end,
  line = line,
  rawget = rawget,
  collect = function() collectgarbage("collect") end,
  arm = arm,
  disarm = sethook,  -- called with nothing: no hook (a C function: no line of it is hooked)
}
"""


# The error of a library of Lua (cmsgpack, cjson) as a C library's luaL_error gives it: the
# text after the position of the code that called the library ("user_script:3: "; none where
# the script's frame is gone: `return cjson.decode(...)` is a tail call to a Lua function, where
# Redis's C function keeps the frame, and names the line).
_RAISE = r"""
local getinfo, error = debug.getinfo, error
return function(text)
  local mine, level = getinfo(2, "S").source, 3
  while true do
    local info = getinfo(level, "Sl")
    if info == nil then error(text, 0) end
    if info.source ~= mine and info.what ~= "tail" then  -- (its own calls may be tail calls)
      if info.currentline > 0 then
        text = info.short_src .. ":" .. info.currentline .. ": " .. text
      end
      error(text, 0)
    end
    level = level + 1
  end
end
"""


def _no_attribute(obj: Any, name: Any, *value: Any) -> Any:
    raise AttributeError("not reachable from a script")


def new_runtime(
    call: Callable[..., Any],
    pcall: Callable[..., Any],
    sha1hex: Callable[[Any], bytes],
    now: Callable[[], float],
    killed: Callable[[int], None],
    caught: Callable[[Any], bytes],
    time_limit: float | None = None,
) -> tuple[Any, Any]:
    """A fenced Lua 5.1 state and its sandbox's functions (`lib`, where KEYS and ARGV go;
    `run`, `loader`, `line`, `rawget`, `arm`, `disarm`, `collect`). `now()` is the
    clock the time limit reads (the hook's call: the owner also sets the memory limit back
    there); `killed(line)` is told when the limit ends a script; `caught(exception)` gives the
    text of an error a Python callable raised that the script caught. ImportError without
    lupa."""
    from lupa import lua51

    rt = lua51.LuaRuntime(
        encoding=None,
        unpack_returned_tuples=False,
        register_eval=False,
        register_builtins=False,
        attribute_handlers=(_no_attribute, _no_attribute),
        max_memory=MAX_MEMORY,
    )
    limit = TIME_LIMIT_S if time_limit is None else time_limit
    raise_ = rt.execute(_RAISE)
    cmsgpack = rt.execute(CMSGPACK, raise_)
    # cjson.null: a userdata, as Redis's lightuserdata NULL
    cjson = rt.execute(CJSON, rt.eval("newproxy(false)"), raise_)
    box = rt.execute(
        _SANDBOX, call, pcall, sha1hex, now, killed, caught, limit, HOOK_EVERY, cmsgpack, cjson
    )
    return rt, box
