"""`cjson` for scripts (BullMQ's scripts keep job options as JSON), as Redis 7.0's lua_cjson
2.1.0 encodes and decodes with its default settings, written in Lua: it runs inside the
sandbox (lua_sandbox.py) under the script's time and memory limits.

encode(v): strings escaped as lua_cjson escapes them (`"`, `\\`, `/`, control characters, DEL;
bytes past 127 as they are), numbers as %.14g (NaN and infinities refused), a table whose keys
are 1..n (gaps up to twice the count, or 10) as an array with null in the gaps, any other
(the empty one too) as an object in `next` order with number keys written as strings, nesting
past 1000 refused; nil and cjson.null as null. decode(s): objects and arrays as tables, null
as cjson.null, \\u escapes (surrogate pairs too) as UTF-8; lua_cjson's error texts ("Expected
value but found invalid token at character 1"). The settings functions (encode_max_depth and
the others) answer the defaults and change nothing."""

from __future__ import annotations

# Run once in the Lua state with cjson.null (a userdata, as Redis's lightuserdata NULL) and
# lua_sandbox's `raise` (an error that names the script's line, as a C library's does);
# returns the module's table (the sandbox fences it read only).
CJSON = r"""
local null, raise = ...
local char, byte, sub, find, format, gsub, concat = string.char, string.byte, string.sub,
  string.find, string.format, string.gsub, table.concat
local floor, huge = math.floor, math.huge
local type, next, tonumber = type, next, tonumber
local MAX_DEPTH = 1000

local ESCAPES = {['"'] = '\\"', ["\\"] = "\\\\", ["/"] = "\\/", ["\b"] = "\\b",
  ["\t"] = "\\t", ["\n"] = "\\n", ["\f"] = "\\f", ["\r"] = "\\r", ["\127"] = "\\u007f"}
for i = 0, 31 do
  local c = char(i)
  ESCAPES[c] = ESCAPES[c] or format("\\u%04x", i)
end

local function quote(s)
  return '"' .. gsub(s, '[%c"\\/]', ESCAPES) .. '"'
end

local function fail(what, reason)
  raise("Cannot serialise " .. what .. ": " .. reason)
end

local function number(n)
  if n ~= n or n == huge or n == -huge then fail("number", "must not be NaN or Inf") end
  return format("%.14g", n)
end

-- lua_array_length: n when every key is a whole number >= 1 and the table not too sparse;
-- -1 for an object
local function array_length(t)
  local max, items = 0, 0
  for k in next, t do
    if type(k) ~= "number" or k < 1 or k ~= floor(k) then return -1 end
    if k > max then max = k end
    items = items + 1
  end
  if max > 10 and max > items * 2 then fail("table", "excessively sparse array") end
  return max
end

local encode

local function tbl(t, depth, out)
  depth = depth + 1
  if depth > MAX_DEPTH then
    raise("Cannot serialise, excessive nesting (" .. depth .. ")")
  end
  local n = array_length(t)
  if n > 0 then
    out[#out + 1] = "["
    for i = 1, n do
      if i > 1 then out[#out + 1] = "," end
      encode(t[i], depth, out)
    end
    out[#out + 1] = "]"
    return
  end
  out[#out + 1] = "{"
  local first = true
  for k, v in next, t do
    if not first then out[#out + 1] = "," end
    first = false
    local kt = type(k)
    if kt == "string" then out[#out + 1] = quote(k)
    elseif kt == "number" then out[#out + 1] = '"' .. number(k) .. '"'
    else fail(kt, "table key must be a number or string") end
    out[#out + 1] = ":"
    encode(v, depth, out)
  end
  out[#out + 1] = "}"
end

encode = function(v, depth, out)
  local t = type(v)
  if t == "string" then out[#out + 1] = quote(v)
  elseif t == "number" then out[#out + 1] = number(v)
  elseif t == "boolean" then out[#out + 1] = v and "true" or "false"
  elseif t == "table" then tbl(v, depth, out)
  elseif v == nil or v == null then out[#out + 1] = "null"
  else fail(t, "type not supported") end
end

-- decoding: a position in s (1-based) through each step
local function parse_error(expected, found, pos)
  raise("Expected " .. expected .. " but found " .. found .. " at character " .. pos)
end

-- the name lua_cjson gives the token at pos where it wanted another
local TOKENS = {["{"] = "T_OBJ_BEGIN", ["}"] = "T_OBJ_END", ["["] = "T_ARR_BEGIN",
  ["]"] = "T_ARR_END", [","] = "T_COMMA", [":"] = "T_COLON", ['"'] = "T_STRING",
  t = "T_BOOLEAN", f = "T_BOOLEAN", n = "T_NULL", [""] = "T_END"}

local function token(s, pos)
  local c = sub(s, pos, pos)
  if c ~= "" and find("-0123456789", c, 1, true) then return "T_NUMBER" end
  return TOKENS[c] or "invalid token"
end

local function skip(s, pos)
  return (find(s, "[^ \t\n\r]", pos)) or #s + 1
end

local function utf8(code)
  if code < 0x80 then return char(code) end
  if code < 0x800 then return char(0xc0 + floor(code / 64), 0x80 + code % 64) end
  if code < 0x10000 then
    return char(0xe0 + floor(code / 4096), 0x80 + floor(code / 64) % 64, 0x80 + code % 64)
  end
  return char(0xf0 + floor(code / 262144), 0x80 + floor(code / 4096) % 64,
    0x80 + floor(code / 64) % 64, 0x80 + code % 64)
end

local SIMPLE = {['"'] = '"', ["\\"] = "\\", ["/"] = "/", b = "\b", f = "\f", n = "\n",
  r = "\r", t = "\t"}

local function hex4(s, pos)
  local h = sub(s, pos, pos + 3)
  return #h == 4 and not find(h, "[^%x]") and tonumber(h, 16) or nil
end

local function str(s, pos)  -- pos at the opening quote; the string and the pos past it
  local parts, i = {}, pos + 1
  while true do
    local j = find(s, '["\\]', i)
    if j == nil then parse_error("value", "unexpected end of string", #s + 1) end
    parts[#parts + 1] = sub(s, i, j - 1)
    if byte(s, j) == 34 then return concat(parts), j + 1 end
    local e = sub(s, j + 1, j + 1)
    if e == "u" then
      local code = hex4(s, j + 2)
      i = j + 6
      if code and code >= 0xd800 and code <= 0xdbff then  -- a surrogate pair's first half
        local low = sub(s, i, i + 1) == "\\u" and hex4(s, i + 2)
        if not low or low < 0xdc00 or low > 0xdfff then code = nil
        else code, i = 0x10000 + (code - 0xd800) * 1024 + (low - 0xdc00), i + 6 end
      elseif code and code >= 0xdc00 and code <= 0xdfff then
        code = nil
      end
      if code == nil then parse_error("value", "invalid unicode escape code", j) end
      parts[#parts + 1] = utf8(code)
    elseif SIMPLE[e] then
      parts[#parts + 1] = SIMPLE[e]
      i = j + 2
    else
      parse_error("value", "invalid escape code", j)
    end
  end
end

local value

local WORDS = {t = {"true", true}, f = {"false", false}, n = {"null", null}}

local function container(s, pos, depth, close, expected_end, item)
  depth = depth + 1
  if depth > MAX_DEPTH then
    raise("Found too many nested data structures (" .. depth .. ") at character " .. pos)
  end
  local t, n = {}, 0
  pos = skip(s, pos + 1)
  if sub(s, pos, pos) == close then return t, pos + 1 end
  while true do
    n = n + 1
    pos = item(t, n, pos, depth)
    pos = skip(s, pos)
    local c = sub(s, pos, pos)
    if c == close then return t, pos + 1 end
    if c ~= "," then parse_error(expected_end, token(s, pos), pos) end
    pos = skip(s, pos + 1)
  end
end

value = function(s, pos, depth)
  pos = skip(s, pos)
  local c = sub(s, pos, pos)
  if c == '"' then return str(s, pos) end
  if c == "{" then
    return container(s, pos, depth, "}", "comma or object end", function(t, _, p, d)
      if sub(s, p, p) ~= '"' then parse_error("object key string", token(s, p), p) end
      local k
      k, p = str(s, p)
      p = skip(s, p)
      if sub(s, p, p) ~= ":" then parse_error("colon", token(s, p), p) end
      t[k], p = value(s, p + 1, d)
      return p
    end)
  end
  if c == "[" then
    return container(s, pos, depth, "]", "comma or array end", function(t, n, p, d)
      t[n], p = value(s, p, d)
      return p
    end)
  end
  local word = WORDS[c]
  if word and sub(s, pos, pos + #word[1] - 1) == word[1] then
    return word[2], pos + #word[1]
  end
  local num = c ~= "" and find("-0123456789", c, 1, true) and
    sub(s, pos, (find(s, "[^%w%.%+%-]", pos) or #s + 1) - 1)
  if num and tonumber(num) then return tonumber(num), pos + #num end
  local found = token(s, pos)
  parse_error("value", found == "T_NUMBER" and "invalid token" or found, pos)
end

local function decode(s)
  if type(s) ~= "string" then
    raise("bad argument #1 to 'decode' (string expected, got " .. type(s) .. ")")
  end
  local v, pos = value(s, 1, 0)
  pos = skip(s, pos)
  if pos <= #s then parse_error("the end", token(s, pos), pos) end
  return v
end

local function setting(default)
  return function() return default end
end

return {
  encode = function(v)
    local out = {}
    encode(v, 0, out)
    return concat(out)
  end,
  decode = decode,
  null = null,
  encode_max_depth = setting(MAX_DEPTH),
  decode_max_depth = setting(MAX_DEPTH),
  encode_number_precision = setting(14),
  encode_keep_buffer = setting(true),
  encode_invalid_numbers = setting(false),
  decode_invalid_numbers = setting(true),
  encode_sparse_array = function() return false, 2, 10 end,
  _NAME = "cjson",
  _VERSION = "2.1.0",
}
"""
