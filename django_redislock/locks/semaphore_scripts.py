"""The Lua scripts of semaphores, one constant each, with what KEYS, ARGV and the reply are.
Every key a script touches arrives in its KEYS, built by ``semaphore_keys`` (which describes
the layout). Permits expire on the server clock; the scripts reclaim expired permits from
the fixed keys they are given, so a crashed holder's permit comes back after its TTL at most.

A permit is the member ``<token><fence>|<owner>`` of the holders zset, ``<owner>`` being
``<limit>|<pid>|<host>``: its holder can name it (it knows its token, fence and owner), so
release and extend are O(log n) and nothing else needs writing or cleaning up.

Waiters queue and are handed over as a lock's (``scripts.WAITERS``; their registration's owner
part is the semaphore owner above): a script that gives a permit to a waiter appends
``<token>, <fence>, <ttl ms>`` of it to its reply, and the caller then pushes the fence to
that waiter's ``w:<token>`` with ``scripts.WAKE``.
"""

from __future__ import annotations

from ..redis.scripts import _script
from .lua import CLOCK, WAITERS

_PERMITS = (
    CLOCK
    + WAITERS
    + """
-- k = {holders, waiters, registrations, fence, index}

-- The server clock in ms.
local function clock_ms()
  return math.floor(clock_us() / 1000)
end

-- Reclaims the permits whose TTL ran out (a holder that died or overran) and returns how
-- many are live.
local function live(holders, now)
  redis.call('ZREMRANGEBYSCORE', holders, '-inf', now)
  return redis.call('ZCARD', holders)
end

-- Keeps the holders key alive as long as its latest permit (``alone``: the only one), and
-- indexes the semaphore.
local function outlive(holders, index, ms, expiry, name, alone)
  if alone or redis.call('PTTL', holders) < ms then redis.call('PEXPIRE', holders, ms) end
  redis.call('ZADD', index, 'GT', expiry, name)
end

-- Gives tok a permit for ttl ms (``alone``: no other permit is held); returns its fence (a
-- string, '0' without fencing).
local function grant(k, tok, ttl, fencing, owner, name, now, alone)
  local f = '0'
  if fencing == '1' then f = next_fence(k[4]) end
  local ms = tonumber(ttl)
  redis.call('ZADD', k[1], now + ms, tok .. f .. '|' .. owner)
  outlive(k[1], k[5], ms, now + ms, name, alone)
  return f
end

-- How many permits are held, counting the expired ones unless that reaches ``limit``:
-- only then do they matter, and are reclaimed.
local function held(holders, limit, now)
  local count = redis.call('ZCARD', holders)
  if count >= limit then return live(holders, now) end
  return count
end

-- Gives up to n permits to the oldest live waiters; the caller tok, when met, gets its fence
-- in out[1], every other one is appended to out as <token, fence, ttl>. Returns how many.
local function hand_off(k, name, now, n, out, tok)
  local given = 0
  while given < n do
    local head, ttl, fencing, owner = next_waiter(k[2], k[3], now)
    if not head then break end
    local f = grant(k, head, ttl, fencing, owner, name, now, false)
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

-- The fence of tok's live permit, or nil: a look through every holder (O(limit)), only for
-- a waiter that may have been handed a permit without knowing it yet.
local function fence_of(holders, tok, now)
  local all = redis.call('ZRANGEBYSCORE', holders, '(' .. now, '+inf')
  for i = 1, #all do
    if string.sub(all[i], 1, #tok) == tok then
      return tonumber(string.match(all[i], '^[^|]*|(%d+)|'))
    end
  end
  return nil
end
"""
)

# KEYS[1] holders  KEYS[2] waiters  KEYS[3] registrations  KEYS[4] fence  KEYS[5] index
# KEYS[6] the caller's wake-up list
# ARGV[1] token ("<hex>|")  ARGV[2] owner "<limit>|<pid>|<host>"  ARGV[3] ttl ms
# ARGV[4] name  ARGV[5] limit  ARGV[6] fair "0"/"1"  ARGV[7] fencing "0"/"1"
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
local now = clock_ms()
local count = redis.call('ZCARD', KEYS[1])
local full = count >= limit
if full then count = live(KEYS[1], now) end  -- only then do expired permits matter
local free = limit - count
local out = {-1, 0}
if ARGV[9] == '1' then
  -- Handed a permit while not blocked on the wake-up list (or a retry whose reply was lost).
  local f = fence_of(KEYS[1], tok, now)
  if f then
    redis.call('DEL', KEYS[6])
    out[1] = f
    return out
  end
end
if free > 0 and ARGV[6] == '1' then  -- fair: the oldest waiters first, this one if queued
  local handed = hand_off(KEYS, name, now, free, out, tok)
  free = free - handed
  count = count + handed
end
if out[1] < 0 and free > 0 then
  out[1] = tonumber(grant(KEYS, tok, ttl, ARGV[7], ARGV[2], name, now, count == 0))
  free = free - 1
  -- Permits that expired (found so when the semaphore looked full) go on to the waiters,
  -- who need not wait for their re-check.
  if full and free > 0 then hand_off(KEYS, name, now, free, out, tok) end
end
if out[1] >= 0 then
  if ARGV[9] == '1' then
    redis.call('ZREM', KEYS[2], tok)
    redis.call('HDEL', KEYS[3], tok)
    redis.call('DEL', KEYS[6])
  end
  return out
end
local reg_ms = tonumber(ARGV[8])
if reg_ms > 0 then queue_waiter(KEYS[2], KEYS[3], tok, reg_ms, ttl, ARGV[7], ARGV[2]) end
local soonest = tonumber(redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2]) or now
out[2] = math.max(1, soonest - now)
return out
""",
)

# KEYS[1..5] as ACQUIRE's
# ARGV[1] the permit, or "" to free every permit whoever holds them (force release)
# ARGV[2] name  ARGV[3] limit ("" when forced: the freed permits go on to waiters)
# Reply: {freed, hand-offs...}: freed is 1 when the permit was live (forced: when any was),
#        else 0; then the hand-offs this call made (see above).
RELEASE = _script(
    "semaphore_release",
    _PERMITS
    + """
local permit, name = ARGV[1], ARGV[2]
local now = clock_ms()
local out = {1}
local free
if permit ~= '' then
  local expiry = tonumber(redis.call('ZSCORE', KEYS[1], permit))
  if not expiry or expiry <= now then return {0} end  -- lapsed: never freed by its holder
  redis.call('ZREM', KEYS[1], permit)
  if redis.call('EXISTS', KEYS[2]) == 0 then return out end  -- nobody waits
  free = tonumber(ARGV[3]) - held(KEYS[1], tonumber(ARGV[3]), now)
else
  free = live(KEYS[1], now)
  if free == 0 then out[1] = 0 end
  redis.call('DEL', KEYS[1])
end
if free > 0 then hand_off(KEYS, name, now, free, out, '') end
return out
""",
)

# KEYS[1] holders  KEYS[2] index
# ARGV[1] the permit  ARGV[2] new ttl ms  ARGV[3] name
# Reply: 1 when extended, 0 when the permit is not live (any more).
EXTEND = _script(
    "semaphore_extend",
    CLOCK
    + """
local now = math.floor(clock_us() / 1000)
local expiry = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if not expiry or expiry <= now then return 0 end
local ms = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now + ms, ARGV[1])
if redis.call('PTTL', KEYS[1]) < ms then redis.call('PEXPIRE', KEYS[1], ms) end
redis.call('ZADD', KEYS[2], 'GT', now + ms, ARGV[3])
return 1
""",
)

# A waiter stops waiting (timed out). Leaves the queue atomically, so a hand-off cannot go
# to it any more; if one already did, the caller holds that permit.
# KEYS[1] holders  KEYS[2] waiters  KEYS[3] registrations  KEYS[4] the caller's wake-up list
# ARGV[1] token
# Reply: the fence (>= 0) when a permit was handed to the caller meanwhile, else -1.
GIVE_UP = _script(
    "semaphore_give_up",
    _PERMITS
    + """
local tok = ARGV[1]
redis.call('ZREM', KEYS[2], tok)
redis.call('HDEL', KEYS[3], tok)
redis.call('DEL', KEYS[4])
return fence_of(KEYS[1], tok, clock_ms()) or -1
""",
)

# Read only: a semaphore's state on the server clock.
# KEYS[1] holders  KEYS[2] waiters
# ARGV[1] a permit to look up, or ""  ARGV[2] "1" to list the live permits
# Reply: {live permits, waiters queued, ms left on the permit (-1: not live), then
#         <expiry ms, permit> of each live permit, soonest first}
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
local out = {redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf'), redis.call('ZCARD', KEYS[2]),
             mine}
if ARGV[2] == '1' then
  local permits = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES')
  for i = 1, #permits, 2 do
    out[#out + 1] = permits[i + 1]
    out[#out + 1] = permits[i]
  end
end
return out
""",
)
