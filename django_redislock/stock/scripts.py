"""The Lua scripts of stocks, one constant each, with what KEYS, ARGV and the reply are. Every
key a script touches arrives in its KEYS, built by ``keys`` (which describes the layout).

Every script but DELETE takes KEYS = state, records, due (``keys.StockKeys.counters``; ADJUST
then adds and names) and ARGV[1] = how long a finished reservation is remembered (ms),
ARGV[2] = how many due entries it handles at most. Before its own work it checks the
counters and reads each key it uses (a key of another type, or a value not as the layout
says, is reported having written nothing), then handles the entries of ``due`` whose time
(server clock) has come, at most ARGV[2] of them, reading and checking them all before the
first write: a pending reservation that expired gives its units back and is remembered as
expired; a finished one that was remembered long enough is forgotten. So expired units come
back with no worker.

Every reply is {status, available, reserved, confirmed, total, more, ...}: ``more`` is 1 when
entries were left due (the caller runs the script again when the answer depends on them; a
script answers "more" then instead of acting). Status "corrupt" replies {"corrupt", 0, 0, 0,
0, 0, key, reservation id or ""}: a key or record that is not as the layout says.
"""

from __future__ import annotations

from ..redis.scripts import lua_script

_PRELUDE = """
local state, records, due = KEYS[1], KEYS[2], KEYS[3]
local clock = redis.call('TIME')
local now_us = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local now = math.floor(now_us / 1000)
local keep = tonumber(ARGV[1])
local dirty = false

-- Integers as Redis stores them: tostring is exact below 1e14 and quicker than format,
-- which the larger ones (fences: microseconds) need (tostring would write 1.8e+15).
local function int(x)
  if x < 1e14 then return tostring(x) end
  return string.format('%.0f', x)
end

local function parse(value)
  local s, q, f, e = string.match(value, '^([pcrx])|(%d+)|(%d+)|(%d+)$')
  if not s then return nil end
  return {s, tonumber(q), tonumber(f), tonumber(e)}
end

local function put(id, r, s, at)
  redis.call('HSET', records, id, s .. '|' .. int(r[2]) .. '|' .. int(r[3]) .. '|' .. int(r[4]))
  redis.call('ZADD', due, at, id)
  dirty = true
end

local function expire(c, id, r)
  c[1] = c[1] + r[2]
  c[2] = c[2] - r[2]
  put(id, r, 'x', now + keep)
end

local function corrupt(key, id)
  return {'corrupt', 0, 0, 0, 0, 0, key, id or ''}
end

-- The counters {available, reserved, confirmed, total, fence} after the due entries were
-- handled, and whether more were left due; or nil and a "corrupt" reply.
-- A key of another type fails the first command on it: every script reads each key it
-- uses before its first write, through pcall, so that it answers "corrupt" having written
-- nothing.
local function open()
  local ok, v = pcall(redis.call, 'HMGET', state, 'available', 'reserved', 'confirmed',
    'total', 'fence')
  if not ok then return nil, corrupt(state) end
  local c = {}
  for i = 1, 5 do
    c[i] = tonumber(v[i] or '0')
    if c[i] == nil then return nil, corrupt(state) end
  end
  local limit = tonumber(ARGV[2])
  local ids
  ok, ids = pcall(redis.call, 'ZRANGEBYSCORE', due, '-inf', now, 'LIMIT', 0, limit + 1)
  if not ok then return nil, corrupt(due) end
  local n = math.min(#ids, limit)
  if n == 0 then return c, false end
  local values
  ok, values = pcall(redis.call, 'HMGET', records, unpack(ids, 1, n))
  if not ok then return nil, corrupt(records) end
  local found = {}
  for i = 1, n do
    if values[i] then
      found[i] = parse(values[i])
      if not found[i] then return nil, corrupt(records, ids[i]) end
    end
  end
  for i = 1, n do
    if found[i] and found[i][1] == 'p' then
      expire(c, ids[i], found[i])
    else
      redis.call('HDEL', records, ids[i])
      redis.call('ZREM', due, ids[i])
      dirty = true
    end
  end
  return c, #ids > limit
end

-- Saves the counters when anything changed, and replies.
local function reply(status, c, more, ...)
  if dirty then
    redis.call('HSET', state, 'available', int(c[1]), 'reserved', int(c[2]),
      'confirmed', int(c[3]), 'total', int(c[4]), 'fence', int(c[5]))
  end
  return {status, c[1], c[2], c[3], c[4], more and 1 or 0, ...}
end
"""
# A script's own checks of keys other than the counters' go between the two.
_OPEN = """
local c, more = open()
if not c then return more end
"""

# The counters, after handling due entries. Reply status: "ok", or "more" (the counters
# are not final yet: run it again).
COUNTS = lua_script(
    "stock_counts", _PRELUDE + _OPEN + "return reply(more and 'more' or 'ok', c, more)\n"
)

# KEYS[4] adds  KEYS[5] names (the stock's shard's listing)
# ARGV[3] "set" or "add"  ARGV[4] units (an integer; negative takes units off sale with "add")
# ARGV[5] the most units the stock may have in all (its total)
# ARGV[6] the call's request id ("" for a set, which is idempotent by itself)
# ARGV[7] how long a request id is remembered (ms)  ARGV[8] the stock's name
# set n: available + reserved becomes n (reservations keep their units; confirmed units are
# sold and stay counted); the total follows. The stock is listed in names in the same step.
# An add whose request id was already applied (the call resent after its reply was lost)
# changes nothing and answers "ok".
# Reply status: "ok"; "short" (nothing changed: too few available units for a negative add,
# or more reserved than a set's n); "toomuch" (the total would exceed ARGV[5]); "more".
ADJUST = lua_script(
    "stock_adjust",
    _PRELUDE
    + """
local adds, names, request, name = KEYS[4], KEYS[5], ARGV[6], ARGV[8]
local ok, applied = pcall(redis.call, 'ZSCORE', adds, request)
if not ok then return corrupt(adds) end
local listed
ok, listed = pcall(redis.call, 'ZSCORE', names, name)
if not ok then return corrupt(names) end
"""
    + _OPEN
    + """
if more then return reply('more', c, more) end
if applied then return reply('ok', c, more) end
local n = tonumber(ARGV[4])
local available = c[1] + n
if ARGV[3] == 'set' then available = n - c[2] end
if available < 0 then return reply('short', c, more) end
local total = c[4] + available - c[1]
if total > tonumber(ARGV[5]) then return reply('toomuch', c, more) end
c[1], c[4] = available, total
dirty = true
if request ~= '' then
  local window = tonumber(ARGV[7])
  redis.call('ZREMRANGEBYSCORE', adds, '-inf', now)
  redis.call('ZADD', adds, now + window, request)
  redis.call('PEXPIRE', adds, window)
end
if not listed then redis.call('ZADD', names, 0, name) end
return reply('ok', c, more)
""",
)

# ARGV[3] the new reservation's id  ARGV[4] units  ARGV[5] ttl ms
# Reply status: "ok" then the fence and the expiry (epoch ms), also when the id is already
# pending with that many units (a resent call); "short" (sold out: too few units
# available); "more" (too few, but due entries are left: run it again); "taken" (the id is
# in use otherwise: nothing changed).
RESERVE = lua_script(
    "stock_reserve",
    _PRELUDE
    + _OPEN
    + """
local id, q = ARGV[3], tonumber(ARGV[4])
local ok, value = pcall(redis.call, 'HGET', records, id)
if not ok then return corrupt(records) end  -- open() wrote nothing: it met no records
if value then
  -- The same call again (a client library resent it): the same answer, nothing changed.
  local r = parse(value)
  if r and r[1] == 'p' and r[2] == q then return reply('ok', c, more, r[3], r[4]) end
  return reply('taken', c, more)
end
if c[1] < q then return reply(more and 'more' or 'short', c, more) end
local expires = now + tonumber(ARGV[5])
c[5] = math.max(c[5] + 1, now_us)
c[1] = c[1] - q
c[2] = c[2] + q
put(id, {'p', q, c[5], expires}, 'p', expires)
return reply('ok', c, more, c[5], expires)
""",
)

# ARGV[3] reservation id  ARGV[4] "c" (confirm: its units are sold) or "r" (release: its
# units go back at once)
# Reply status: "ok" when this call did it; else the reservation's state, "c" (confirmed),
# "r" (released) or "x" (expired: its units went back by themselves), or "unknown" (no such
# reservation, or finished and forgotten); then its units, fence and expiry (epoch ms).
# A pending reservation whose expiry passed is expired first, whatever its due entry says.
FINISH = lua_script(
    "stock_finish",
    _PRELUDE
    + _OPEN
    + """
local id, action = ARGV[3], ARGV[4]
local ok, value = pcall(redis.call, 'HGET', records, id)
if not ok then return corrupt(records) end  -- open() wrote nothing: it met no records
if not value then return reply('unknown', c, more) end
local r = parse(value)
if not r then
  reply('ok', c, more)  -- keeps the handled due entries consistent with the counters
  return corrupt(records, id)
end
if r[1] == 'p' and r[4] <= now then
  expire(c, id, r)
  r[1] = 'x'
end
if r[1] ~= 'p' then return reply(r[1], c, more, r[2], r[3], r[4]) end
c[2] = c[2] - r[2]
if action == 'c' then c[3] = c[3] + r[2] else c[1] = c[1] + r[2] end
put(id, r, action, now + keep)
return reply('ok', c, more, r[2], r[3], r[4])
""",
)

# KEYS = state, records, due, adds, names (``keys.StockKeys``)  ARGV[1] the stock's name
# Removes the stock's keys and its entry in the listing, in one step.
# Reply: {"ok" (it existed) or "none", 0, 0, 0, 0, 0}; "corrupt" (nothing removed) when names
# is not a sorted set.
DELETE = lua_script(
    "stock_delete",
    """
local ok = pcall(redis.call, 'ZSCORE', KEYS[5], ARGV[1])
if not ok then return {'corrupt', 0, 0, 0, 0, 0, KEYS[5], ''} end
local existed = redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
redis.call('ZREM', KEYS[5], ARGV[1])
return {existed > 0 and 'ok' or 'none', 0, 0, 0, 0, 0}
""",
)
