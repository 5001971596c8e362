"""The Lua scripts of ``MultiLock``: several locks of one shard taken, or freed, in one call.
Each name stays an ordinary lock (``keys`` describes its keys and value, written here as
``scripts.ACQUIRE`` writes them), so a ``Lock`` of that name, the renewer and the admin's
listing see it as any other.

Each takes a fixed number of KEYS per name, in lock order, as ``LockKeys`` lists them for
the single-lock script of the same job: ``MULTI_ACQUIRE`` ``acquiring``'s eight (lock,
waiters, index, fence counter, names, registrations, wake-up list, where a lock key of the
wrong type is set aside), ``MULTI_RELEASE`` ``releasing``'s seven (the same, less the last).
The index and names are the shard's: every name of one call is on one shard, so they repeat.
"""

from __future__ import annotations

from ..redis.scripts import lua_script
from .lua import CLOCK
from .scripts import HANDOFF

# How many keys each name brings to each script.
ACQUIRE_KEYS, RELEASE_KEYS = 8, 7

# How many queued waiters of a fair name are read to find a live one. A queue with that
# many lapsed ones at its head counts as busy: the ordered path's ACQUIRE clears it.
WAITERS_READ = 64

# Takes every name or none: all of them are checked before the first write. A name is busy
# when a lock holds it (whoever it is), or, with fair, when a live waiter is queued for it
# (the line is not jumped). A key of another type in a lock's place is set aside, as
# ACQUIRE does, and the name is then free. Commands on several names go as one where Redis
# allows it: a multi-lock costs little more than a lock.
# KEYS 8 per name (see above)
# ARGV[1] token ("<hex>|")  ARGV[2] owner "<pid>|<host>"  ARGV[3] ttl ms  ARGV[4] now ms
# ARGV[5] fair "0"/"1"  ARGV[6] fencing "0"/"1"  ARGV[7] ms before which an index entry is
# stale  ARGV[8] how many stale entries to drop  ARGV[9...] the names, one per 8 KEYS
# Reply: {fence, ...}, one per name in order (0 without fencing), when all were taken; else
#        the position (from 1) of a busy name, and nothing was written.
MULTI_ACQUIRE = lua_script(
    "multi_acquire",
    CLOCK
    + f"""
local tok, owner, ttl, now = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local fair, fencing = ARGV[5] == '1', ARGV[6] == '1'
local n = #KEYS / {ACQUIRE_KEYS}
local locks, waiters = {{}}, {{}}
for i = 1, n do
  locks[i], waiters[i] = KEYS[{ACQUIRE_KEYS} * (i - 1) + 1], KEYS[{ACQUIRE_KEYS} * (i - 1) + 2]
end

-- Whether a waiter queued on ``queue`` is still registered (its deadline not reached).
local clock
local function live_waiter(queue, regs)
  clock = clock or math.floor(clock_us() / 1000)
  local heads = redis.call('ZRANGE', queue, 0, {WAITERS_READ - 1})
  for _, head in ipairs(heads) do
    local ok, reg = pcall(redis.call, 'HGET', regs, head)
    local deadline = ok and reg and tonumber(string.match(reg, '^(%d+)|'))
    if deadline and deadline > clock then return true end
  end
  return #heads >= {WAITERS_READ}
end

local corrupt = {{}}
if redis.call('EXISTS', unpack(locks)) > 0 then  -- usually all are free: one call says so
  for i = 1, n do
    local kind = redis.call('TYPE', locks[i])['ok']
    if kind == 'string' then return i end
    corrupt[i] = kind ~= 'none'
  end
end
if fair and redis.call('EXISTS', unpack(waiters)) > 0 then
  for i = 1, n do
    if live_waiter(waiters[i], KEYS[{ACQUIRE_KEYS} * (i - 1) + 6]) then return i end
  end
end

local fences, expiries, names = {{}}, {{}}, {{}}
local expiry = now + tonumber(ttl)
for i = 1, n do
  local b = {ACQUIRE_KEYS} * (i - 1)
  local text, f = '0', 0
  if corrupt[i] then
    redis.call('RENAME', locks[i], KEYS[b + 8])
    redis.call('PEXPIRE', KEYS[b + 8], 86400000)
  end
  if fencing then text, f = next_fence(KEYS[b + 4]) end
  redis.call('SET', locks[i], tok .. now .. '|' .. text .. '|' .. owner, 'PX', ttl)
  fences[i] = f
  expiries[2 * i - 1], expiries[2 * i] = expiry, ARGV[8 + i]
  names[2 * i - 1], names[2 * i] = 0, ARGV[8 + i]
end
-- The shard's indexes (KEYS[3], KEYS[5]: the same for every name here).
redis.call('ZADD', KEYS[3], unpack(expiries))
redis.call('ZADD', KEYS[5], unpack(names))
-- Entries of locks that ended unreleased long ago leave them, a few at a time, as ACQUIRE
-- does.
local stale = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[7], 'LIMIT', 0, ARGV[8])
if #stale > 0 then
  redis.call('ZREM', KEYS[3], unpack(stale))
  redis.call('ZREM', KEYS[5], unpack(stale))
end
return fences
""",
)

# Frees every name still held by its token, each as RELEASE does: handed straight to its
# oldest live waiter (whose wake-up is pushed), or deleted. A name its token no longer holds
# is left alone; every name is read before the first write.
# KEYS 7 per name (see above)
# ARGV[1] now ms, then per name: ARGV[2i] its token ("<hex>|")  ARGV[2i+1] its name
# Reply: {code, ...}, one per name in order, as RELEASE's: 0 not held by its token, 1 freed,
#        2 handed to a waiter.
MULTI_RELEASE = lua_script(
    "multi_release",
    HANDOFF
    + f"""
local now = tonumber(ARGV[1])
local n = #KEYS / {RELEASE_KEYS}
local locks, waiters = {{}}, {{}}
for i = 1, n do
  locks[i], waiters[i] = KEYS[{RELEASE_KEYS} * (i - 1) + 1], KEYS[{RELEASE_KEYS} * (i - 1) + 2]
end
local values = redis.call('MGET', unpack(locks))  -- a key of another type reads as nil
local queued = redis.call('EXISTS', unpack(waiters)) > 0

local codes, freed, gone = {{}}, {{}}, {{}}
for i = 1, n do
  local current, tok, name = values[i], ARGV[2 * i], ARGV[2 * i + 1]
  codes[i] = 0
  if current and string.sub(current, 1, #tok) == tok then
    local b = {RELEASE_KEYS} * (i - 1)
    if queued and handoff({{unpack(KEYS, b + 1, b + {RELEASE_KEYS})}}, name, now) then
      codes[i] = 2
    else
      freed[#freed + 1], gone[#gone + 1] = locks[i], name
      codes[i] = 1
    end
  end
end
if #freed > 0 then
  redis.call('DEL', unpack(freed))
  redis.call('ZREM', KEYS[3], unpack(gone))
  redis.call('ZREM', KEYS[5], unpack(gone))
end
return codes
""",
)
