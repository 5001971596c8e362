"""Lua pieces that the read-write lock's scripts share (``read_write_scripts``): holders,
waiters, who is let in and their wake-ups. Each script that uses them has them in its text.

Every function takes ``k``, the script's KEYS in ``read_write_keys.ReadWriteKeys`` order:
{writer, readers, waiters, writers waiting, registrations, wake-up list, fence counter,
index, names}."""

from __future__ import annotations

from .lua import WAITERS
from .scripts import MAX_HOPS

__all__ = ["FAST_ACQUIRE", "FAST_RELEASE", "HOLDERS"]

# (After ``CLOCK``, which each script puts first, so that its fast path can run before these
# functions are even defined.)
HOLDERS = (
    WAITERS
    + f"""
local function clock_ms()
  return math.floor(clock_us() / 1000)
end

-- The writer's value, false when no writer holds the lock, '?' for a key of another type.
local function writer_value(k)
  local ok, value = pcall(redis.call, 'GET', k[1])
  if ok then return value end
  return '?'
end

-- Drops the readers whose expiry passed and returns how many are live; -1 when the key is
-- of another type.
local function live_readers(k, now)
  if not pcall(redis.call, 'ZREMRANGEBYSCORE', k[2], '-inf', now) then return -1 end
  return redis.call('ZCARD', k[2])
end

local function forget_waiter(k, tok)
  redis.call('ZREM', k[3], tok)
  redis.call('ZREM', k[4], tok)
  redis.call('HDEL', k[5], tok)
end

-- Waiter tok's TTL ms, fencing flag and owner; nil (and it leaves the queue) when its
-- registration lapsed or is missing.
local function registered(k, tok, now)
  local ok, reg = pcall(redis.call, 'HGET', k[5], tok)
  if ok and reg then
    local deadline, ttl, fencing, owner = string.match(reg, '^(%d+)|(%d+)|(%d)|(.*)$')
    if deadline and tonumber(deadline) > now then return ttl, fencing, owner end
  end
  forget_waiter(k, tok)
  return nil
end

-- Whether a live writer waits (lapsed ones met on the way leave). After 64 lapsed ones it
-- answers yes: the next call goes on clearing.
local function writer_waits(k, now)
  for _ = 1, 64 do
    local head = redis.call('ZRANGE', k[4], 0, 0)[1]
    if not head then return false end
    if registered(k, head, now) then return true end
  end
  return true
end

-- Gives tok the lock for ttl ms: a reader joins the readers, a writer becomes the writer
-- (with the next fence when it fences). The shard's indexes keep the latest expiry under
-- ``member``. Returns the fence (a string) and the holder as its wake-up names it
-- ("<token><fence>|<owner>").
local function grant(k, tok, ttl, fencing, owner, now, member)
  local ms = tonumber(ttl)
  local f = '0'
  if string.sub(tok, 1, 1) == 'r' then
    redis.call('ZADD', k[2], now + ms, tok .. '0|' .. owner)
    if redis.call('PTTL', k[2]) < ms then redis.call('PEXPIRE', k[2], ms) end
  else
    if fencing == '1' then f = next_fence(k[7]) end
    redis.call('SET', k[1], tok .. now .. '|' .. f .. '|' .. owner, 'PX', ms)
  end
  redis.call('ZADD', k[8], 'GT', now + ms, member)
  redis.call('ZADD', k[9], 0, member)
  return f, tok .. f .. '|' .. owner
end

-- Lets waiter tok in; the caller ``me`` gets its fence in out[1], any other is woken: its
-- wake-up goes to the end of the list, which lives at least as long as its hold.
local function let_in(k, tok, ttl, fencing, owner, now, member, me, out)
  forget_waiter(k, tok)
  local f, holder = grant(k, tok, ttl, fencing, owner, now, member)
  if tok == me then
    out[1] = tonumber(f)
  elseif redis.call('RPUSH', k[6], holder .. '|0') == 1 or redis.call('PTTL', k[6]) < tonumber(ttl)
  then
    redis.call('PEXPIRE', k[6], ttl)
  end
end

-- Lets in the waiters that may hold the lock now that no writer does (``readers``: live
-- readers). Fair: from the head of the line in arrival order, the readers there together, up
-- to the first waiter that must wait. Otherwise writers first: the oldest live writer once
-- no reader holds; when no writer waits, every reader queued. Returns the live readers.
local function admit(k, now, fair, member, me, out, readers)
  if fair then
    local line = redis.call('ZRANGE', k[3], 0, 63)
    for i = 1, #line do
      local tok = line[i]
      local ttl, fencing, owner = registered(k, tok, now)
      if ttl then
        local writer = string.sub(tok, 1, 1) == 'w'
        if writer and readers > 0 then return readers end
        let_in(k, tok, ttl, fencing, owner, now, member, me, out)
        if writer then return readers end
        readers = readers + 1
      end
    end
    return readers
  end
  if writer_waits(k, now) then
    if readers == 0 then
      local tok = redis.call('ZRANGE', k[4], 0, 0)[1]
      local ttl, fencing, owner = registered(k, tok, now)
      if ttl then let_in(k, tok, ttl, fencing, owner, now, member, me, out) end
    end
    return readers
  end
  local line = redis.call('ZRANGE', k[3], 0, 999)
  for i = 1, #line do
    local ttl, fencing, owner
    if string.sub(line[i], 1, 1) == 'r' then ttl, fencing, owner = registered(k, line[i], now) end
    if ttl then
      let_in(k, line[i], ttl, fencing, owner, now, member, me, out)
      readers = readers + 1
    end
  end
  return readers
end

-- The fence of tok's live hold, or nil. ``current``: the writer's value.
local function held_fence(k, tok, owner, now, current)
  if string.sub(tok, 1, 1) == 'r' then
    local ok, expiry = pcall(redis.call, 'ZSCORE', k[2], tok .. '0|' .. owner)
    if ok and expiry and tonumber(expiry) > now then return 0 end
    return nil
  end
  if current and current ~= '?' and string.sub(current, 1, #tok) == tok then
    return tonumber(string.match(current, '^[^|]*|[^|]*|(%d+)|'))
  end
  return nil
end

-- Pushes wake-up ``msg`` ("<holder>|<hops>") back to the front of the list while its holder
-- still holds the lock and it went round fewer than {MAX_HOPS} times.
local function pass_on(k, msg, now)
  if not msg or msg == '' then return end
  local holder, hops = string.match(msg, '^(.*)|(%d+)$')
  if not holder or tonumber(hops) >= {MAX_HOPS} then return end
  local tok = string.match(holder, '^([^|]*|)')
  local owner = string.match(holder, '^[^|]*|%d+|(.*)$')
  if not tok or not owner or not held_fence(k, tok, owner, now, writer_value(k)) then return end
  redis.call('LPUSH', k[6], holder .. '|' .. (tonumber(hops) + 1))
  if redis.call('PTTL', k[6]) < 1000 then redis.call('PEXPIRE', k[6], 1000) end
end

-- Takes waiter tok's own wake-ups out of the list (it found its hold without them); the
-- list is short: it holds only the wake-ups not popped yet.
local function drop_wake_ups(k, tok)
  local ok, all = pcall(redis.call, 'LRANGE', k[6], 0, 63)
  if not ok then return end
  for i = 1, #all do
    if string.sub(all[i], 1, #tok) == tok then redis.call('LREM', k[6], 1, all[i]) end
  end
end

-- When neither a writer nor a reader holds the lock any more, its index entries leave.
local function forget_if_free(k, member, readers)
  if readers <= 0 and redis.call('EXISTS', k[1]) == 0 then
    redis.call('ZREM', k[8], member)
    redis.call('ZREM', k[9], member)
  end
end

-- How long a waiter may block before the lock may change by itself: the writer's TTL, else
-- the soonest reader's; 0 when neither holds (the waiter's fallback then decides).
local function wait_ms(k, now)
  local pttl = redis.call('PTTL', k[1])
  if pttl > 0 then return pttl end
  local ok, soonest = pcall(redis.call, 'ZRANGE', k[2], 0, 0, 'WITHSCORES')
  if ok and soonest[2] then return math.max(1, tonumber(soonest[2]) - now) end
  return 0
end
"""
)

# The usual case of an acquire, before the shared functions are defined (a script defines
# them anew at each call): a newcomer while nobody waits, no writer holds and (for a writer)
# no reader's key is left, taken in a few calls. Anything else goes on to the full script.
FAST_ACQUIRE = """
local k = KEYS
local tok, owner, ttl, member = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local reader = string.sub(tok, 1, 1) == 'r'
local out = {-1, 0, 0}
if ARGV[8] ~= '1' and (ARGV[9] or '') == '' then
  local busy
  if reader then
    busy = redis.call('EXISTS', k[1], k[3], k[4], k[5], k[6])
  else
    busy = redis.call('EXISTS', k[1], k[2], k[3], k[4], k[5], k[6])
  end
  if busy == 0 then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local ms = tonumber(ttl)
    local taken, f = true, 0
    if reader then
      -- (a readers key of another type fails here: the full script sets it aside)
      taken = pcall(redis.call, 'ZADD', k[2], now + ms, tok .. '0|' .. owner)
      if taken and redis.call('PTTL', k[2]) < ms then redis.call('PEXPIRE', k[2], ms) end
    else
      local text = '0'
      if ARGV[6] == '1' then text, f = next_fence(k[7]) end
      redis.call('SET', k[1], tok .. now .. '|' .. text .. '|' .. owner, 'PX', ms)
    end
    if taken then
      redis.call('ZADD', k[8], 'GT', now + ms, member)
      redis.call('ZADD', k[9], 0, member)
      out[1] = f
      return out
    end
  end
end
"""

# The usual case of a release, before the shared functions are defined: the holder's own
# hold freed, and the index entry too when it was the last and nobody waits. Anything else
# (waiters to let in, a force release) goes on to the full script.
FAST_RELEASE = """
local k, holder, member = KEYS, ARGV[1], ARGV[2]
local kind = string.sub(holder, 1, 1)
local now
if kind == 'r' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  -- (lapsed readers go first: a lapsed hold is never freed by its holder)
  if not pcall(redis.call, 'ZREMRANGEBYSCORE', k[2], '-inf', now) then return 0 end
  if redis.call('ZREM', k[2], holder) == 0 then return 0 end
  if redis.call('ZCARD', k[2]) > 0 then return 1 end  -- readers left: nobody else may go in
  if redis.call('EXISTS', k[3]) == 0 then  -- (no writer holds while a reader did)
    redis.call('ZREM', k[8], member)
    redis.call('ZREM', k[9], member)
    return 1
  end
elseif kind == 'w' then
  local ok, current = pcall(redis.call, 'GET', k[1])
  if not ok or not current or string.sub(current, 1, #holder) ~= holder then return 0 end
  redis.call('DEL', k[1])
  if redis.call('EXISTS', k[2], k[3]) == 0 then
    redis.call('ZREM', k[8], member)
    redis.call('ZREM', k[9], member)
    return 1
  end
end
"""
