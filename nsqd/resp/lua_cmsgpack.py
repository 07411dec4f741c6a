"""`cmsgpack` for scripts (BullMQ's scripts unpack their options with it), as Redis 7.0's
lua_cmsgpack.c 0.4.0 packs and unpacks, written in Lua: it runs inside the sandbox
(lua_sandbox.py) under the script's time and memory limits, with nothing of the state but
the string and math functions it keeps.

pack(...): each value after the other. A number that is a whole int64 packs as the smallest
MessagePack int (fixnum, u8-u64, i8-i64), another as a float32 where that holds it exactly,
else as a float64; a string as fixstr/str8/str16/str32; a table whose keys are 1..n as an
array, any other as a map in `next` order; tables nested 16 deep, functions and the rest as
nil. unpack(s): every value in `s` (unpack_one(s, offset) and unpack_limit(s, limit, offset)
return the next offset first, -1 at the end); "Missing bytes in input." or "Bad data format
in input." as Redis raises them."""

from __future__ import annotations

# Run once in the Lua state with lua_sandbox's `raise` (an error that names the script's
# line, as a C library's does); returns the module's table (the sandbox fences it read only).
CMSGPACK = r"""
local raise = ...
local char, byte, sub, concat = string.char, string.byte, string.sub, table.concat
local floor, frexp, ldexp, huge = math.floor, math.frexp, math.ldexp, math.huge
local type, next, select, tostring, tonumber, unpack = type, next, select, tostring,
  tonumber, unpack
local MAX_NESTING = 16
local TWO32 = 4294967296

local function be(n, bytes)  -- a whole number 0 <= n < 256^bytes, big-endian
  local out = {}
  for i = bytes, 1, -1 do
    local b = n % 256
    out[i] = char(b)
    n = (n - b) / 256
  end
  return concat(out)
end

local function u64(n)  -- 0 <= n < 2^64, exactly
  local hi = floor(n / TWO32)
  return be(hi, 4) .. be(n - hi * TWO32, 4)
end

local function int(n)
  if n >= 0 then
    if n <= 127 then return char(n) end
    if n <= 0xff then return "\204" .. char(n) end
    if n <= 0xffff then return "\205" .. be(n, 2) end
    if n <= 0xffffffff then return "\206" .. be(n, 4) end
    return "\207" .. u64(n)
  end
  if n >= -32 then return char(n + 256) end
  if n >= -128 then return "\208" .. char(n + 256) end
  if n >= -32768 then return "\209" .. be(n + 65536, 2) end
  if n >= -2147483648 then return "\210" .. be(n + TWO32, 4) end
  local hi = floor(n / TWO32)  -- two's complement: the high word wraps, the low word does not
  return "\211" .. be(hi + TWO32, 4) .. be(n - hi * TWO32, 4)
end

local function float32(x)  -- x packed as a float32 when (double)(float)x == x, else nil
  if x ~= x then return nil end
  local sign = (x < 0 or 1 / x < 0) and 0x80000000 or 0
  local a = x < 0 and -x or x
  if a == huge then return "\202" .. be(sign + 0x7f800000, 4) end
  local m, e = frexp(a)  -- a = m * 2^e, 0.5 <= m < 1
  if e > 128 then return nil end
  if e >= -125 then
    local frac = m * 16777216  -- 24 bits of mantissa
    if frac ~= floor(frac) then return nil end
    return "\202" .. be(sign + (e + 126) * 8388608 + (frac - 8388608), 4)
  end
  local frac = ldexp(a, 149)  -- a subnormal float32: a multiple of 2^-149
  if frac ~= floor(frac) then return nil end
  return "\202" .. be(sign + frac, 4)
end

local function float64(x)
  if x ~= x then return "\203\255\248\0\0\0\0\0\0" end  -- (the x86 NaN of 0/0)
  local sign = (x < 0 or 1 / x < 0) and 2147483648 or 0
  local a = x < 0 and -x or x
  local hi, lo
  if a == huge then
    hi, lo = 0x7ff00000, 0
  else
    local m, e = frexp(a)
    if e >= -1021 then
      local frac = (m * 2 - 1) * 4503599627370496  -- 52 bits below the implicit one
      local top = floor(frac / TWO32)
      hi, lo = (e + 1022) * 1048576 + top, frac - top * TWO32
    else  -- subnormal: a multiple of 2^-1074
      local frac = ldexp(a, 1074)
      local top = floor(frac / TWO32)
      hi, lo = top, frac - top * TWO32
    end
  end
  return "\203" .. be(sign + hi, 4) .. be(lo, 4)
end

local function number(n)
  -- IS_INT64_EQUIVALENT: whole and within int64 (2^63 itself is not)
  if n == floor(n) and n >= -9223372036854775808 and n < 9223372036854775808 then
    return int(n)
  end
  return float32(n) or float64(n)
end

local function str(s)
  local n = #s
  if n < 32 then return char(0xa0 + n) .. s end
  if n <= 0xff then return "\217" .. char(n) .. s end
  if n <= 0xffff then return "\218" .. be(n, 2) .. s end
  return "\219" .. be(n, 4) .. s
end

local function header(n, fix, b16, b32)
  if n <= 15 then return char(fix + n) end
  if n <= 0xffff then return b16 .. be(n, 2) end
  return b32 .. be(n, 4)
end

local encode

local function is_array(t)  -- every key a whole number >= 1, and no gap
  local count, max = 0, 0
  for k in next, t do
    if type(k) ~= "number" or k <= 0 or k ~= floor(k) or k >= 2147483648 then return false end
    if k > max then max = k end
    count = count + 1
  end
  return max == count
end

local function tbl(t, level, out)
  if is_array(t) then
    local n = #t
    out[#out + 1] = header(n, 0x90, "\220", "\221")
    for i = 1, n do encode(t[i], level + 1, out) end
    return
  end
  local n = 0
  for _ in next, t do n = n + 1 end
  out[#out + 1] = header(n, 0x80, "\222", "\223")
  for k, v in next, t do
    encode(k, level + 1, out)
    encode(v, level + 1, out)
  end
end

encode = function(v, level, out)
  local t = type(v)
  if t == "table" and level == MAX_NESTING then t = "nil" end
  if t == "string" then out[#out + 1] = str(v)
  elseif t == "boolean" then out[#out + 1] = v and "\195" or "\194"
  elseif t == "number" then out[#out + 1] = number(v)
  elseif t == "table" then tbl(v, level, out)
  else out[#out + 1] = "\192" end
end

local function pack(...)
  local n = select("#", ...)
  if n == 0 then raise("bad argument #0 to 'pack' (MessagePack pack needs input.)") end
  local out = {}
  for i = 1, n do encode((select(i, ...)), 0, out) end
  return concat(out)
end

-- unpacking: a cursor over s; `need` raises where the input ends too soon
local MISSING, BADFMT = "Missing bytes in input.", "Bad data format in input."

local function need(s, pos, n)
  if pos + n - 1 > #s then raise(MISSING) end
end

local function uint(s, pos, n)
  need(s, pos, n)
  local v = 0
  for i = pos, pos + n - 1 do v = v * 256 + byte(s, i) end
  return v
end

local function sint(s, pos, n)
  local v = uint(s, pos, n)
  local half = 2 ^ (8 * n - 1)
  if v >= half then v = v - 2 * half end
  return v
end

local function i64(s, pos)
  local hi, lo = uint(s, pos, 4), uint(s, pos + 4, 4)
  if hi >= 2147483648 then hi = hi - TWO32 end
  return hi * TWO32 + lo  -- one rounding, as (lua_Number) of the int64
end

local function f32(s, pos)
  local v = uint(s, pos, 4)
  local sign = v >= 2147483648 and -1 or 1
  v = v % 2147483648
  local e, frac = floor(v / 8388608), v % 8388608
  if e == 255 then return frac == 0 and sign * huge or 0 / 0 end
  if e == 0 then return sign * ldexp(frac, -149) end
  return sign * ldexp(frac + 8388608, e - 150)
end

local function f64(s, pos)
  local hi, lo = uint(s, pos, 4), uint(s, pos + 4, 4)
  local sign = hi >= 2147483648 and -1 or 1
  hi = hi % 2147483648
  local e, top = floor(hi / 1048576), hi % 1048576
  local frac = top * TWO32 + lo
  if e == 2047 then return frac == 0 and sign * huge or 0 / 0 end
  if e == 0 then return sign * ldexp(frac, -1074) end
  return sign * ldexp(frac + 4503599627370496, e - 1075)
end

local decode

local function array(s, pos, n)
  local t = {}
  for i = 1, n do
    local v
    v, pos = decode(s, pos)
    t[i] = v
  end
  return t, pos
end

local function map(s, pos, n)
  local t = {}
  for _ = 1, n do
    local k, v
    k, pos = decode(s, pos)
    v, pos = decode(s, pos)
    t[k] = v
  end
  return t, pos
end

local function bytes(s, pos, n)
  need(s, pos, n)
  return sub(s, pos, pos + n - 1), pos + n
end

-- a value's first byte -> function(s, pos after it) returning the value and the next pos
local FIXED = {
  [0xc0] = function(s, p) return nil, p end,
  [0xc2] = function(s, p) return false, p end,
  [0xc3] = function(s, p) return true, p end,
  [0xca] = function(s, p) return f32(s, p), p + 4 end,
  [0xcb] = function(s, p) return f64(s, p), p + 8 end,
  [0xcc] = function(s, p) return uint(s, p, 1), p + 1 end,
  [0xcd] = function(s, p) return uint(s, p, 2), p + 2 end,
  [0xce] = function(s, p) return uint(s, p, 4), p + 4 end,
  [0xcf] = function(s, p) return uint(s, p, 4) * TWO32 + uint(s, p + 4, 4), p + 8 end,
  [0xd0] = function(s, p) return sint(s, p, 1), p + 1 end,
  [0xd1] = function(s, p) return sint(s, p, 2), p + 2 end,
  [0xd2] = function(s, p) return sint(s, p, 4), p + 4 end,
  [0xd3] = function(s, p) return i64(s, p), p + 8 end,
  [0xc4] = function(s, p) return bytes(s, p + 1, uint(s, p, 1)) end,
  [0xc5] = function(s, p) return bytes(s, p + 2, uint(s, p, 2)) end,
  [0xc6] = function(s, p) return bytes(s, p + 4, uint(s, p, 4)) end,
  [0xd9] = function(s, p) return bytes(s, p + 1, uint(s, p, 1)) end,
  [0xda] = function(s, p) return bytes(s, p + 2, uint(s, p, 2)) end,
  [0xdb] = function(s, p) return bytes(s, p + 4, uint(s, p, 4)) end,
  [0xdc] = function(s, p) return array(s, p + 2, uint(s, p, 2)) end,
  [0xdd] = function(s, p) return array(s, p + 4, uint(s, p, 4)) end,
  [0xde] = function(s, p) return map(s, p + 2, uint(s, p, 2)) end,
  [0xdf] = function(s, p) return map(s, p + 4, uint(s, p, 4)) end,
}

decode = function(s, pos)
  need(s, pos, 1)
  local b = byte(s, pos)
  pos = pos + 1
  if b <= 0x7f then return b, pos end
  if b >= 0xe0 then return b - 256, pos end
  if b >= 0xa0 and b <= 0xbf then return bytes(s, pos, b - 0xa0) end
  if b >= 0x90 and b <= 0x9f then return array(s, pos, b - 0x90) end
  if b >= 0x80 and b <= 0x8f then return map(s, pos, b - 0x80) end
  local f = FIXED[b]
  if f == nil then raise(BADFMT) end
  return f(s, pos)
end

local function input(s, fn)
  local t = type(s)
  if t == "number" then return tostring(s) end
  if t ~= "string" then
    raise("bad argument #1 to '" .. fn .. "' (string expected, got " ..
      (t == "nil" and "no value" or t) .. ")")
  end
  return s
end

-- mp_unpack_full: `limit` values (0: all) from byte `offset` (0-based)
local function unpack_full(s, limit, offset, fn)
  s = input(s, fn)
  if offset < 0 or limit < 0 then
    raise("Invalid request to unpack with offset of " .. offset .. " and limit of " .. #s .. ".")
  elseif offset > #s then
    raise("Start offset " .. offset .. " greater than input length " .. #s .. ".")
  end
  local all = limit == 0 and offset == 0
  if all then limit = huge end
  local out, n, pos = {}, 0, offset + 1
  while pos <= #s and n < limit do
    n = n + 1
    out[n], pos = decode(s, pos)
  end
  if all then return unpack(out, 1, n) end
  return (pos > #s) and -1 or pos - 1, unpack(out, 1, n)
end

local function count(v, default)
  if v == nil then return default end
  return floor(tonumber(v) or raise("bad argument (number expected)"))
end

return {
  pack = pack,
  unpack = function(s) return unpack_full(s, 0, 0, "unpack") end,
  unpack_one = function(s, offset) return unpack_full(s, 1, count(offset, 0), "unpack_one") end,
  unpack_limit = function(s, limit, offset)
    return unpack_full(s, count(limit, 0), count(offset, 0), "unpack_limit")
  end,
  _NAME = "cmsgpack",
  _VERSION = "lua-cmsgpack 0.4.0",
  _COPYRIGHT = "Copyright (C) 2012, Salvatore Sanfilippo",
  _DESCRIPTION = "MessagePack C implementation for Lua",
}
"""
