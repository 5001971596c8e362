"""The Lua scripts of locks, one constant each, with what KEYS, ARGV and the reply are. Every
key a script touches arrives in its KEYS, built by ``keys`` (which describes the layout).

Every script that writes a lock's ``index`` entry writes its ``names`` entry too; a lock
that ends without a release (its holder died) leaves ``names`` when ``SWEEP`` meets it.

A script that hands the lock to a waiter wakes it itself: it pushes "<token><fence>|0" to
the lock's wake-up list ``h:<name>`` (in its KEYS), on which every waiter of the lock blocks.
Redis serves blocked clients in arrival order, so the wake-up may reach another waiter than
the one the lock went to (fair mode keeps its order in the waiters queue, which the hand-off
follows): that waiter passes it on (``ACQUIRE``'s or ``GIVE_UP``'s pass-on argument), which
pushes it back while the lock is still its addressee's and it has not gone round too often;
the addressee finds the lock at its next re-check anyway. The list holds only the wake-up of
the current hand-off and expires with the lock it handed over.

A token argument always ends with "|", so comparing it with the start of the lock value is
an exact token match. The fence is 0 for a lock taken without fencing.
"""

from __future__ import annotations

from ..redis.scripts import lua_script
from .lua import CLOCK, WAITERS

# How often a wake-up may be passed on before it is dropped (its addressee is not blocked:
# it finds the lock at its re-check).
MAX_HOPS = 16

# Passing on a wake-up another waiter popped; shared by ACQUIRE and GIVE_UP.
_PASS_ON = f"""
-- Pushes wake-up ``msg`` ("<token><fence>|<hops>") back to the front of list ``wake`` while
-- lock ``lock`` is still its token's and it went round fewer than {MAX_HOPS} times.
local function pass_on(lock, wake, msg)
  if not msg or msg == '' then return end
  local tok, fence, hops = string.match(msg, '^([^|]*|)(%d+)|(%d+)$')
  if not tok or tonumber(hops) >= {MAX_HOPS} then return end
  local ok, current = pcall(redis.call, 'GET', lock)
  if not ok or not current or string.sub(current, 1, #tok) ~= tok then return end
  redis.call('LPUSH', wake, tok .. fence .. '|' .. (tonumber(hops) + 1))
  local pttl = redis.call('PTTL', lock)
  if pttl > 0 then redis.call('PEXPIRE', wake, pttl) end
end
"""

# Shared by the scripts that free a lock or queue a waiter (``multi_scripts`` too).
HANDOFF = (
    CLOCK
    + WAITERS
    + """
-- Gives the free lock straight to the oldest waiter still registered and pushes its wake-up
-- (the list then holds that one only); returns its token, or false when no live waiter is
-- left. k = {lock, waiters, index, fence, names, registrations, wake-up list}.
local function handoff(k, name, now)
  local head, ttl, fencing, ident = next_waiter(k[2], k[6])
  if not head then return false end
  local f = '0'
  if fencing == '1' then f = next_fence(k[4]) end
  redis.call('SET', k[1], head .. now .. '|' .. f .. '|' .. ident, 'PX', ttl)
  redis.call('ZADD', k[3], now + tonumber(ttl), name)
  redis.call('ZADD', k[5], 0, name)
  redis.call('DEL', k[7])
  redis.call('RPUSH', k[7], head .. f .. '|0')
  redis.call('PEXPIRE', k[7], ttl)
  return head
end

-- A lock's value. A key of another type is not a lock of ours (corrupt): it reads as a value
-- that no token matches, and ACQUIRE moves it out of the way.
local function lock_value(lock)
  local ok, value = pcall(redis.call, 'GET', lock)
  if ok then return value end
  return '?'
end

-- The fence stored in a lock value.
local function fence_of(value)
  return tonumber(string.match(value, '^[^|]*|[^|]*|(%d+)|'))
end
"""
)

# KEYS[1] lock  KEYS[2] waiters  KEYS[3] index  KEYS[4] fence counter  KEYS[5] names
# KEYS[6] registrations  KEYS[7] wake-up list  KEYS[8] where a lock key of the wrong type is
# set aside
# ARGV[1] token ("<hex>|")  ARGV[2] owner "<pid>|<host>"  ARGV[3] ttl ms  ARGV[4] name
# ARGV[5] now ms  ARGV[6] fair "0"/"1"  ARGV[7] fencing "0"/"1"
# ARGV[8] waiter registration ms (0: try once, do not queue)
# ARGV[9] "1" when this caller queued before (so its registration must be cleaned up)
# ARGV[10] ms before which an index entry is stale  ARGV[11] how many stale entries to drop
# ARGV[12] a wake-up for another waiter that this caller popped, to pass on ("" or absent:
#          none)
# Reply: an integer >= 0 when the caller now holds the lock (its fence; 0 without fencing),
#        or {pttl} when the lock is busy (the caller is queued when ARGV[8] > 0).
ACQUIRE = lua_script(
    "acquire",
    HANDOFF
    + _PASS_ON
    + """
local lock, waiters, index, fence, names, regs, wake, aside = unpack(KEYS)
local tok, owner, ttl, name, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local fencing = ARGV[7]
pass_on(lock, wake, ARGV[12])

local function take()
  local f = 0
  if fencing == '1' then
    if redis.call('EXISTS', lock) == 1 then return nil end
    local text
    text, f = next_fence(fence)
    redis.call('SET', lock, tok .. now .. '|' .. text .. '|' .. owner, 'PX', ttl)
  elseif not redis.call('SET', lock, tok .. now .. '|0|' .. owner, 'NX', 'PX', ttl) then
    return nil
  end
  redis.call('ZADD', index, now + tonumber(ttl), name)
  redis.call('ZADD', names, 0, name)
  -- Entries of locks that ended unreleased long ago leave both indexes, a few at a time.
  local stale = redis.call('ZRANGEBYSCORE', index, '-inf', '(' .. ARGV[10], 'LIMIT', 0, ARGV[11])
  if #stale > 0 then
    redis.call('ZREM', index, unpack(stale))
    redis.call('ZREM', names, unpack(stale))
  end
  if ARGV[9] == '1' then
    redis.call('ZREM', waiters, tok)
    redis.call('HDEL', regs, tok)
    redis.call('DEL', wake)  -- the lock was free: a wake-up left there is stale
  end
  return f
end

if ARGV[6] == '0' or redis.call('EXISTS', waiters) == 0 then
  local got = take()
  if got then return got end
end

local current = lock_value(lock)
local winner
if current == '?' then  -- not a lock: set aside, then the lock is free
  redis.call('RENAME', lock, aside)
  redis.call('PEXPIRE', aside, 86400000)
  current = false
end
if current then
  if string.sub(current, 1, #tok) == tok then
    -- Handed to this caller before it popped its wake-up (or this is a retry of an acquire
    -- whose reply was lost): the wake-up, if still there, is its own.
    redis.call('DEL', wake)
    return fence_of(current)
  end
else
  -- Free, but (fair mode) waiters are queued: the oldest live one gets it.
  winner = handoff(KEYS, name, now)
  if winner == tok then
    redis.call('DEL', wake)
    return fence_of(redis.call('GET', lock))
  end
  if not winner then
    local got = take()
    if got then return got end
  end
end

local reg_ms = tonumber(ARGV[8])
if reg_ms > 0 then
  queue_waiter(waiters, regs, tok, reg_ms, ttl, fencing, owner, ARGV[6] == '0')
end
return {redis.call('PTTL', lock)}
""",
)

# KEYS[1] lock  KEYS[2] waiters  KEYS[3] index  KEYS[4] fence counter  KEYS[5] names
# KEYS[6] registrations  KEYS[7] wake-up list
# ARGV[1] token ("<hex>|"), or "" to free the lock whoever holds it (force release)
# ARGV[2] name  ARGV[3] now ms
# Reply: 0 when the token does not hold the lock (forced: nothing was held, nobody woken),
#        1 when freed; 2 when handed straight to a waiter (and its wake-up pushed), 3
#        (forced only) when nothing was held but a waiter was given the lock.
RELEASE = lua_script(
    "release",
    HANDOFF
    + """
local current = lock_value(KEYS[1])
if ARGV[1] ~= '' then
  if not current or string.sub(current, 1, #ARGV[1]) ~= ARGV[1] then return 0 end
end
if handoff(KEYS, ARGV[2], tonumber(ARGV[3])) then
  if current then return 2 end
  return 3
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('ZREM', KEYS[5], ARGV[2])
if current then return 1 end
return 0
""",
)

# KEYS[1] lock  KEYS[2] index  KEYS[3] names
# ARGV[1] token  ARGV[2] new ttl ms  ARGV[3] name  ARGV[4] now ms
# Reply: 1 when extended, 0 when the token does not hold the lock (any more).
EXTEND = lua_script(
    "extend",
    """
local ok, current = pcall(redis.call, 'GET', KEYS[1])
if not ok then return 0 end
if not current or string.sub(current, 1, #ARGV[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], tonumber(ARGV[4]) + tonumber(ARGV[2]), ARGV[3])
-- Also puts back a name that a sweep removed too early (the writer's clock ran behind).
redis.call('ZADD', KEYS[3], 0, ARGV[3])
return 1
""",
)

# A waiter stops waiting (timed out). Leaves the queue atomically, so a hand-off cannot go
# to it any more; if one already did, the caller keeps the lock (and releases it, which hands
# it on). A wake-up for another waiter that it popped is passed on.
# KEYS[1] lock  KEYS[2] waiters  KEYS[3] registrations  KEYS[4] wake-up list
# ARGV[1] token  ARGV[2] a wake-up to pass on ("" or absent: none)
# Reply: the fence (>= 0) when the lock was handed to the caller meanwhile, else -1.
GIVE_UP = lua_script(
    "give_up",
    _PASS_ON
    + """
local tok = ARGV[1]
redis.call('ZREM', KEYS[2], tok)
redis.call('HDEL', KEYS[3], tok)
pass_on(KEYS[1], KEYS[4], ARGV[2])
local ok, current = pcall(redis.call, 'GET', KEYS[1])
if ok and current and string.sub(current, 1, #tok) == tok then
  return tonumber(string.match(current, '^[^|]*|[^|]*|(%d+)|'))
end
return -1
""",
)

# Listing's upkeep of one shard's indexes. Entries that expired over the margin ago (their
# lock surely ended without a release) leave both; then the locks that expired since the
# last sweep leave ``names``, so that a prefix's ZLEXCOUNT counts live locks only. Both in
# bounded batches: a backlog takes several calls, never one long one.
# KEYS[1] index  KEYS[2] names  KEYS[3] names:swept (a ZRANGEBYSCORE min: "<ms>" or "(<ms>")
# ARGV[1] now ms  ARGV[2] stale before ms  ARGV[3] batch
# Reply: {live locks (index entries expiring from now on), state, entries before them};
#        state 1: ``names`` holds live locks only; 0: call again, a backlog is left.
SWEEP = lua_script(
    "sweep",
    """
local index, names, swept = KEYS[1], KEYS[2], KEYS[3]
local now, batch = tonumber(ARGV[1]), tonumber(ARGV[3])

local function zrem(key, members)
  for i = 1, #members, 1000 do  -- Lua's unpack takes a few thousand values at most
    redis.call('ZREM', key, unpack(members, i, math.min(i + 999, #members)))
  end
end

local stale = redis.call('ZRANGEBYSCORE', index, '-inf', '(' .. ARGV[2], 'LIMIT', 0, batch)
if #stale > 0 then
  zrem(index, stale)
  zrem(names, stale)
end
local live = redis.call('ZCOUNT', index, now, '+inf')
local before = redis.call('ZCARD', index) - live
local from = redis.call('GET', swept) or '-inf'
local ended = redis.call('ZRANGEBYSCORE', index, from, '(' .. now, 'LIMIT', 0, batch)
zrem(names, ended)
if #ended < batch then
  local mark = tonumber((string.gsub(from, '^%(', '')))
  if mark == nil or now > mark then redis.call('SET', swept, now) end
  return {live, 1, before}
end
-- A full batch: done up to its last expiry, ties included (one ms of locks).
local last = redis.call('ZSCORE', index, ended[#ended])
zrem(names, redis.call('ZRANGEBYSCORE', index, last, last))
redis.call('SET', swept, '(' .. last)
return {live, 0, before}
""",
)
