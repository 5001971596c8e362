"""Every Lua script the app runs, one constant each, with what KEYS, ARGV and the reply are.

Key layout of one lock (``base`` = ``<prefix>:{L<shard>}:``, so every key of a lock, its
shard's index included, shares one hash tag and every script runs on Redis Cluster):

    base l:<name>    string  the lock: "<token>|<acquired ms>|<fence>|<pid>|<host>", PX TTL
    base q:<name>    zset    waiters: token -> arrival number (FIFO)
    base f:<name>    string  fencing counter (INCR; never expires, so tokens never repeat)
    base a:<token>   string  a waiter's registration: "<ttl ms>|<fencing 0/1>|<pid>|<host>"
                             with a short PX; a waiter that dies simply lets it lapse
    base w:<token>   list    a waiter's wake-up: the releaser pushes the fence it handed over
    base index       zset    lock name -> expiry (epoch ms), for listing without KEYS/SCAN

A token argument always ends with "|", so comparing it with the start of the lock value is
an exact token match. The fence is 0 for a lock taken without fencing.
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple


class LuaScript(NamedTuple):
    name: str
    source: str
    sha: str


def _script(name: str, source: str) -> LuaScript:
    return LuaScript(name, source, hashlib.sha1(source.encode()).hexdigest())


# Shared by the scripts that free a lock. Gives the free lock straight to the oldest waiter
# that is still alive, pushes its fence to that waiter's wake-up list (which unblocks its
# BLPOP) and returns its token, or false when no live waiter is left. Dead waiters met on
# the way are dropped; the loop is bounded so a script never runs long.
_HANDOFF = """
local function handoff(lock, waiters, index, fence, name, base, now)
  for _ = 1, 64 do
    local head = redis.call('ZPOPMIN', waiters)[1]
    if not head then return false end
    local reg = redis.call('GETDEL', base .. 'a:' .. head)
    if reg then
      local ttl, fencing, ident = string.match(reg, '^(%d+)|(%d)|(.*)$')
      local f = 0
      if fencing == '1' then f = redis.call('INCR', fence) end
      redis.call('SET', lock, head .. now .. '|' .. f .. '|' .. ident, 'PX', ttl)
      redis.call('ZADD', index, now + tonumber(ttl), name)
      redis.call('RPUSH', base .. 'w:' .. head, f)
      redis.call('PEXPIRE', base .. 'w:' .. head, ttl)
      return head
    end
  end
  return false
end

-- The fence stored in a lock value.
local function fence_of(value)
  return tonumber(string.match(value, '^[^|]*|[^|]*|(%d+)|'))
end
"""

# KEYS[1] lock  KEYS[2] waiters  KEYS[3] index  KEYS[4] fence counter
# ARGV[1] token ("<hex>|")  ARGV[2] owner "<pid>|<host>"  ARGV[3] ttl ms  ARGV[4] name
# ARGV[5] now ms  ARGV[6] fair "0"/"1"  ARGV[7] fencing "0"/"1"
# ARGV[8] waiter registration ms (0: try once, do not queue)  ARGV[9] key base
# ARGV[10] "1" when this caller queued before (so its registration must be cleaned up)
# Reply: an integer >= 0 when the caller now holds the lock (its fence; 0 without fencing),
#        or {pttl} when the lock is busy (the caller is queued when ARGV[8] > 0).
ACQUIRE = _script(
    "acquire",
    _HANDOFF
    + """
local lock, waiters, index, fence = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local tok, owner, ttl, name, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local fencing, base = ARGV[7], ARGV[9]

local function take()
  local f = 0
  if fencing == '1' then
    if redis.call('EXISTS', lock) == 1 then return nil end
    f = redis.call('INCR', fence)
    redis.call('SET', lock, tok .. now .. '|' .. f .. '|' .. owner, 'PX', ttl)
  elseif not redis.call('SET', lock, tok .. now .. '|0|' .. owner, 'NX', 'PX', ttl) then
    return nil
  end
  redis.call('ZADD', index, now + tonumber(ttl), name)
  if ARGV[10] == '1' then
    redis.call('ZREM', waiters, tok)
    redis.call('DEL', base .. 'a:' .. tok, base .. 'w:' .. tok)
  end
  return f
end

if ARGV[6] == '0' or redis.call('EXISTS', waiters) == 0 then
  local got = take()
  if got then return got end
end

local current = redis.call('GET', lock)
if current then
  if string.sub(current, 1, #tok) == tok then
    -- Handed to this caller while it was not blocked on its wake-up list (or this is a
    -- retry of an acquire whose reply was lost).
    redis.call('DEL', base .. 'w:' .. tok)
    return fence_of(current)
  end
else
  -- Free, but (fair mode) waiters are queued: the oldest live one gets it.
  local winner = handoff(lock, waiters, index, fence, name, base, now)
  if winner == tok then
    redis.call('DEL', base .. 'w:' .. tok)
    return fence_of(redis.call('GET', lock))
  end
  if not winner then
    local got = take()
    if got then return got end
  end
end

local reg_ms = tonumber(ARGV[8])
if reg_ms > 0 then
  local last = redis.call('ZRANGE', waiters, -1, -1, 'WITHSCORES')[2]
  redis.call('ZADD', waiters, 'NX', (tonumber(last) or 0) + 1, tok)
  redis.call('PEXPIRE', waiters, reg_ms * 2)
  redis.call('SET', base .. 'a:' .. tok, ttl .. '|' .. fencing .. '|' .. owner, 'PX', reg_ms)
end
return {redis.call('PTTL', lock)}
""",
)

# KEYS[1] lock  KEYS[2] waiters  KEYS[3] index  KEYS[4] fence counter
# ARGV[1] token ("<hex>|"), or "" to free the lock whoever holds it (force release)
# ARGV[2] name  ARGV[3] now ms  ARGV[4] key base
# Reply: 0 when the token does not hold the lock (forced: nothing was held, nobody woken),
#        1 when freed, 2 when handed straight to a waiter, 3 (forced only) when nothing was
#        held but a waiter was woken with the lock.
RELEASE = _script(
    "release",
    _HANDOFF
    + """
local lock, waiters, index = KEYS[1], KEYS[2], KEYS[3]
local current = redis.call('GET', lock)
if ARGV[1] ~= '' then
  if not current or string.sub(current, 1, #ARGV[1]) ~= ARGV[1] then return 0 end
end
if handoff(lock, waiters, index, KEYS[4], ARGV[2], ARGV[4], tonumber(ARGV[3])) then
  if current then return 2 end
  return 3
end
redis.call('DEL', lock)
redis.call('ZREM', index, ARGV[2])
if current then return 1 end
return 0
""",
)

# KEYS[1] lock  KEYS[2] index
# ARGV[1] token  ARGV[2] new ttl ms  ARGV[3] name  ARGV[4] now ms
# Reply: 1 when extended, 0 when the token does not hold the lock (any more).
EXTEND = _script(
    "extend",
    """
local current = redis.call('GET', KEYS[1])
if not current or string.sub(current, 1, #ARGV[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], tonumber(ARGV[4]) + tonumber(ARGV[2]), ARGV[3])
return 1
""",
)

# A waiter stops waiting (timed out). Leaves the queue atomically, so a hand-off cannot go
# to it any more; if one already did, the caller keeps the lock.
# KEYS[1] lock  KEYS[2] waiters
# ARGV[1] token  ARGV[2] key base
# Reply: the fence (>= 0) when the lock was handed to the caller meanwhile, else -1.
GIVE_UP = _script(
    "give_up",
    """
local tok, base = ARGV[1], ARGV[2]
redis.call('ZREM', KEYS[2], tok)
redis.call('DEL', base .. 'a:' .. tok, base .. 'w:' .. tok)
local current = redis.call('GET', KEYS[1])
if current and string.sub(current, 1, #tok) == tok then
  return tonumber(string.match(current, '^[^|]*|[^|]*|(%d+)|'))
end
return -1
""",
)
