"""The Lua scripts of semaphores, one constant each, with what KEYS, ARGV and the reply are.
Every key a script touches arrives in its KEYS, built by ``semaphore_keys`` (which describes
the layout). Permits expire on the server clock; the scripts reclaim expired permits from
the fixed keys they are given, so a crashed holder's permit comes back after its TTL at most.

Waiters queue and are handed over as a lock's (``scripts.WAITERS``): a script that gives a
permit to a waiter appends ``<token>, <fence>, <ttl ms>`` of it to its reply, and the caller
then pushes the fence to that waiter's ``w:<token>`` with ``scripts.WAKE``.
"""

from __future__ import annotations

from ..redis.scripts import _script
from .scripts import CLOCK, WAITERS

_PERMITS = (
    CLOCK
    + WAITERS
    + """
-- k = {holders, info, waiters, registrations, fence, index}

-- Reclaims the permits whose TTL ran out (a holder that died or overran) and returns how
-- many are live.
local function live(k, now)
  local expired = redis.call('ZRANGEBYSCORE', k[1], '-inf', now)
  if #expired > 0 then
    redis.call('ZREMRANGEBYSCORE', k[1], '-inf', now)
    for i = 1, #expired, 1000 do  -- Lua's unpack takes a few thousand values at most
      redis.call('HDEL', k[2], unpack(expired, i, math.min(i + 999, #expired)))
    end
  end
  return redis.call('ZCARD', k[1])
end

-- Keeps the permit keys alive as long as their latest permit, and indexes the semaphore.
local function outlive(holders, info, index, ms, expiry, name)
  if redis.call('PTTL', holders) < ms then
    redis.call('PEXPIRE', holders, ms)
    redis.call('PEXPIRE', info, ms)
  end
  redis.call('ZADD', index, 'GT', expiry, name)
end

-- Gives tok a permit for ttl ms; returns its fence (a string, '0' without fencing).
local function grant(k, tok, ttl, fencing, owner, name, now, limit)
  local f = '0'
  if fencing == '1' then f = next_fence(k[5]) end
  local ms = tonumber(ttl)
  redis.call('ZADD', k[1], now + ms, tok)
  redis.call('HSET', k[2], tok, now .. '|' .. f .. '|' .. owner, 'limit', limit)
  outlive(k[1], k[2], k[6], ms, now + ms, name)
  return f
end

-- Gives up to n permits to the oldest live waiters; the caller tok, when met, gets its fence
-- in out[1], every other one is appended to out as <token, fence, ttl>. Returns how many.
local function hand_off(k, name, now, n, limit, out, tok)
  local given = 0
  while given < n do
    local head, ttl, fencing, owner = next_waiter(k[3], k[4])
    if not head then break end
    local f = grant(k, head, ttl, fencing, owner, name, now, limit)
    if head == tok then
      out[1] = tonumber(f)
    else
      out[#out + 1] = head
      out[#out + 1] = f
      out[#out + 1] = ttl
    end
    given = given + 1
  end
  return given
end

-- The fence stored in a permit's value.
local function fence_of(value)
  return tonumber(string.match(value, '^[^|]*|(%d+)|'))
end
"""
)

# KEYS[1] holders  KEYS[2] info  KEYS[3] waiters  KEYS[4] registrations  KEYS[5] fence
# KEYS[6] index  KEYS[7] the caller's wake-up list
# ARGV[1] token ("<hex>|")  ARGV[2] owner "<pid>|<host>"  ARGV[3] ttl ms  ARGV[4] name
# ARGV[5] limit  ARGV[6] fair "0"/"1"  ARGV[7] fencing "0"/"1"
# ARGV[8] waiter registration ms (0: try once, do not queue)
# ARGV[9] "1" when this caller queued before
# Reply: {fence, wait ms, hand-offs...}: fence >= 0 when the caller now holds a permit (0
#        without fencing), else -1 (queued when ARGV[8] > 0) and the ms until the soonest
#        permit expires; then the hand-offs to other waiters this call made (see above).
ACQUIRE = _script(
    "semaphore_acquire",
    _PERMITS
    + """
local tok, ttl, name, limit = ARGV[1], ARGV[3], ARGV[4], tonumber(ARGV[5])
local now = math.floor(clock_us() / 1000)
local free = limit - live(KEYS, now)
if ARGV[9] == '1' then
  -- Handed a permit while not blocked on the wake-up list (or a retry whose reply was lost).
  local mine = redis.call('HGET', KEYS[2], tok)
  if mine and redis.call('ZSCORE', KEYS[1], tok) then
    redis.call('DEL', KEYS[7])
    return {fence_of(mine), 0}
  end
end
local out = {-1, 0}
if free > 0 and ARGV[6] == '1' then  -- fair: the oldest waiters first, this one if queued
  free = free - hand_off(KEYS, name, now, free, limit, out, tok)
end
if out[1] < 0 and free > 0 then
  out[1] = tonumber(grant(KEYS, tok, ttl, ARGV[7], ARGV[2], name, now, limit))
  free = free - 1
  -- Permits that expired meanwhile go on to the waiters, who need not wait for a re-check.
  if free > 0 then hand_off(KEYS, name, now, free, limit, out, tok) end
end
if out[1] >= 0 then
  if ARGV[9] == '1' then
    redis.call('ZREM', KEYS[3], tok)
    redis.call('HDEL', KEYS[4], tok)
    redis.call('DEL', KEYS[7])
  end
  return out
end
local reg_ms = tonumber(ARGV[8])
if reg_ms > 0 then queue_waiter(KEYS[3], KEYS[4], tok, reg_ms, ttl, ARGV[7], ARGV[2]) end
local soonest = tonumber(redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2]) or now
out[2] = math.max(1, soonest - now)
return out
""",
)

# KEYS[1..6] as ACQUIRE's
# ARGV[1] token, or "" to free every permit whoever holds it (force release)  ARGV[2] name
# ARGV[3] limit, or "" for the one the latest acquire stored
# Reply: {freed, hand-offs...}: freed is 1 when the token held a live permit (forced: when
#        any was held), else 0; then the hand-offs this call made (see above).
RELEASE = _script(
    "semaphore_release",
    _PERMITS
    + """
local tok, name = ARGV[1], ARGV[2]
local now = math.floor(clock_us() / 1000)
local count = live(KEYS, now)
local limit = tonumber(ARGV[3]) or tonumber(redis.call('HGET', KEYS[2], 'limit')) or 0
local out = {1}
if tok ~= '' then
  if redis.call('ZREM', KEYS[1], tok) == 0 then return {0} end
  redis.call('HDEL', KEYS[2], tok)
  count = count - 1
else
  if count == 0 then out[1] = 0 end
  redis.call('DEL', KEYS[1], KEYS[2])
  count = 0
end
if limit > count then hand_off(KEYS, name, now, limit - count, limit, out, tok) end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2])
  redis.call('ZREM', KEYS[6], name)
end
return out
""",
)

# KEYS[1] holders  KEYS[2] info  KEYS[3] index
# ARGV[1] token  ARGV[2] new ttl ms  ARGV[3] name
# Reply: 1 when extended, 0 when the token holds no live permit (any more).
EXTEND = _script(
    "semaphore_extend",
    CLOCK
    + """
local now = math.floor(clock_us() / 1000)
local expiry = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not expiry or tonumber(expiry) <= now then return 0 end
local ms = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now + ms, ARGV[1])
if redis.call('PTTL', KEYS[1]) < ms then
  redis.call('PEXPIRE', KEYS[1], ms)
  redis.call('PEXPIRE', KEYS[2], ms)
end
redis.call('ZADD', KEYS[3], 'GT', now + ms, ARGV[3])
return 1
""",
)

# A waiter stops waiting (timed out). Leaves the queue atomically, so a hand-off cannot go
# to it any more; if one already did, the caller holds that permit.
# KEYS[1] holders  KEYS[2] info  KEYS[3] waiters  KEYS[4] registrations
# KEYS[5] the caller's wake-up list
# ARGV[1] token
# Reply: the fence (>= 0) when a permit was handed to the caller meanwhile, else -1.
GIVE_UP = _script(
    "semaphore_give_up",
    """
local tok = ARGV[1]
redis.call('ZREM', KEYS[3], tok)
redis.call('HDEL', KEYS[4], tok)
redis.call('DEL', KEYS[5])
local mine = redis.call('HGET', KEYS[2], tok)
if mine and redis.call('ZSCORE', KEYS[1], tok) then
  return tonumber(string.match(mine, '^[^|]*|(%d+)|'))
end
return -1
""",
)

# Read only: a semaphore's state on the server clock.
# KEYS[1] holders  KEYS[2] info  KEYS[3] waiters
# ARGV[1] a token whose permit to look up, or ""  ARGV[2] "1" to list the live permits
# Reply: {live permits, waiters queued, ms left on the token's permit (-1: none), stored
#         limit (-1: none), then <expiry ms, value> of each live permit, soonest first}
STATE = _script(
    "semaphore_state",
    CLOCK
    + """
local now = math.floor(clock_us() / 1000)
local mine = -1
if ARGV[1] ~= '' then
  local expiry = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
  if expiry and expiry > now then mine = expiry - now end
end
local limit = tonumber(redis.call('HGET', KEYS[2], 'limit')) or -1
local out = {redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf'), redis.call('ZCARD', KEYS[3]),
             mine, limit}
if ARGV[2] == '1' then
  local permits = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES')
  for i = 1, #permits, 2 do
    out[#out + 1] = permits[i + 1]
    out[#out + 1] = redis.call('HGET', KEYS[2], permits[i]) or ''
  end
end
return out
""",
)
