"""Lua pieces the semaphore scripts share (``scripts``): the permits of a holder, the
hand-off of free permits to waiters and their wake-ups. Each script that uses one has it in
its text."""

from __future__ import annotations

from ..locks.lua import CLOCK, WAITERS
from ..locks.scripts import MAX_HOPS

__all__ = ["MEMBERS", "PERMITS", "WAKE_UPS"]

# A holder's members of the holders zset (see ``scripts``).
MEMBERS = """
-- How many permits token tok takes: "<hex>*<n>|" n, "<hex>|" one.
local function wanted(tok)
  return tonumber(string.match(tok, '%*(%d+)|$')) or 1
end

-- The holders members of the permits whose first one is ``permit``.
local function members_of(permit)
  local all = {permit}
  if not string.find(permit, '*', 1, true) then return all end  -- one permit: the usual
  local tok, rest = string.match(permit, '^([^|]*|)(.*)$')
  if not tok then return all end
  local stem = string.sub(tok, 1, -2)
  for i = 2, wanted(tok) do all[i] = stem .. '.' .. i .. '|' .. rest end
  return all
end
"""

# Permits: granting, reclaiming, handing off; the index's upkeep.
PERMITS = (
    CLOCK
    + WAITERS
    + MEMBERS
    + """
-- k = {holders, waiters, registrations, fence, index, wake-up list}

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

-- Drops up to ``batch`` index entries whose latest permit expired: the semaphore is idle.
-- Both clocks are the server's, so no margin is needed; an entry due at ``now`` is idle, as
-- a permit due then is no longer live (``live``). Returns how many it dropped.
local function sweep(index, now, batch)
  local idle = redis.call('ZRANGEBYSCORE', index, '-inf', now, 'LIMIT', 0, batch)
  for i = 1, #idle, 1000 do  -- Lua's unpack takes a few thousand values at most
    redis.call('ZREM', index, unpack(idle, i, math.min(i + 999, #idle)))
  end
  return #idle
end

-- Keeps the holders key alive as long as its latest permit (``alone``: the only one), and
-- indexes the semaphore.
local function outlive(holders, index, expiry, name, alone)
  -- The index keeps the latest expiry; the key expires at that very ms (PEXPIREAT, the
  -- server's wall clock, as the scores are), not ``ms`` after the script's own start time:
  -- so the key, its permits and its index entry lapse together.
  if alone then
    redis.call('ZADD', index, expiry, name)
  else
    redis.call('ZADD', index, 'GT', expiry, name)
    expiry = tonumber(redis.call('ZSCORE', index, name))
  end
  redis.call('PEXPIREAT', holders, string.format('%.0f', expiry))
end

-- Gives tok its permits for ttl ms (``alone``: no other permit is held); returns its fence
-- (a string, '0' without fencing). The fence counter outlives the last fenced grant by a
-- minute: by then the clock floor of ``next_fence`` is above every fence it handed out.
local function grant(k, tok, ttl, fencing, owner, name, now, alone)
  local f = '0'
  if fencing == '1' then
    f = next_fence(k[4])
    redis.call('PEXPIRE', k[4], 60000)
  end
  local ms = tonumber(ttl)
  for _, member in ipairs(members_of(tok .. f .. '|' .. owner)) do
    redis.call('ZADD', k[1], now + ms, member)
  end
  outlive(k[1], k[5], now + ms, name, alone)
  return f
end

-- Takes out of the queue the oldest live waiter whose permits fit in ``free`` (fair: only
-- the oldest, whatever it asks) and returns its token, TTL ms, fencing flag and owner; nil
-- when none fits. Lapsed waiters met on the way are dropped; the look is bounded.
local function next_fitting(k, free, now, fair)
  local queue = redis.call('ZRANGE', k[2], 0, 63)
  for i = 1, #queue do
    local tok = queue[i]
    local ok, reg = pcall(redis.call, 'HGET', k[3], tok)
    local deadline, ttl, fencing, owner
    if ok and reg then
      deadline, ttl, fencing, owner = string.match(reg, '^(%d+)|(%d+)|(%d)|(.*)$')
    end
    local lapsed = not deadline or tonumber(deadline) <= now
    if lapsed or wanted(tok) <= free then
      redis.call('ZREM', k[2], tok)
      if ok then redis.call('HDEL', k[3], tok) end
      if not lapsed then return tok, ttl, fencing, owner end
    elseif fair then
      return nil
    end
  end
  return nil
end

-- Gives the permits of up to ``free`` to waiters (see ``next_fitting``); ``held``: how many
-- permits are held (at most; 0 only when none is live). The caller tok, when met, gets its
-- fence in out[1], every other one is woken: its wake-up "<permit>|0" goes to the end of the
-- wake-up list, which then lives at least as long as its permits. Returns how many permits
-- it gave.
local function hand_off(k, name, now, free, out, tok, fair, held)
  local given = 0
  while given < free do
    local head, ttl, fencing, owner = next_fitting(k, free - given, now, fair)
    if not head then break end
    local f = grant(k, head, ttl, fencing, owner, name, now, held + given == 0)
    if head == tok then
      out[1] = tonumber(f)
    elseif redis.call('RPUSH', k[6], head .. f .. '|' .. owner .. '|0') == 1
        or redis.call('PTTL', k[6]) < tonumber(ttl) then
      redis.call('PEXPIRE', k[6], ttl)  -- a new list has no TTL yet
    end
    given = given + wanted(head)
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

-- Takes a semaphore whose last live permit is gone out of the index (no permit at all,
-- the usual case, needs no look at their expiries).
local function forget_if_idle(k, name, now)
  if redis.call('ZCARD', k[1]) == 0 or live(k[1], now) == 0 then
    redis.call('ZREM', k[5], name)
  end
end
"""
)

# The waiters' wake-ups (see ``scripts``): passing one on, and dropping one's own.
WAKE_UPS = f"""
-- Pushes wake-up ``msg`` ("<permit>|<hops>") back to the front of list ``wake`` while its
-- permit is still live in ``holders`` and it went round fewer than {MAX_HOPS} times.
local function pass_on(holders, wake, msg, now)
  if not msg or msg == '' then return end
  local permit, hops = string.match(msg, '^(.*)|(%d+)$')
  if not permit or tonumber(hops) >= {MAX_HOPS} then return end
  local expiry = tonumber(redis.call('ZSCORE', holders, permit))
  if not expiry or expiry <= now then return end
  redis.call('LPUSH', wake, permit .. '|' .. (tonumber(hops) + 1))
  if redis.call('PTTL', wake) < expiry - now then redis.call('PEXPIRE', wake, expiry - now) end
end

-- Takes waiter tok's own wake-ups out of list ``wake`` (it found its permits without them);
-- the list is short: it holds only the hand-offs not popped yet.
local function drop_wake_ups(wake, tok)
  local ok, all = pcall(redis.call, 'LRANGE', wake, 0, 63)
  if not ok then return end
  for i = 1, #all do
    if string.sub(all[i], 1, #tok) == tok then redis.call('LREM', wake, 1, all[i]) end
  end
end
"""
