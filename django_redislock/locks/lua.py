"""Lua pieces that lock and semaphore scripts share: the server clock and fences, and the
waiters' queue. Each script that uses one has it in its text (``scripts``,
``semaphores.scripts``)."""

from __future__ import annotations

__all__ = ["CLOCK", "WAITERS"]

# The server clock and fences, shared with the semaphore scripts.
CLOCK = """
-- The server's clock, in microseconds.
local function clock_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- Hands out the next fence of a lock: above every earlier one, and never below the server's
-- clock in microseconds, so that a restart or failover that lost the counter cannot hand out
-- small fences again. Returns it as an integer string (a Lua number would be written as
-- "1.8e+15") and as a number (exact: about 1.8e15 < 2^53) for the reply.
local function next_fence(counter)
  local ok, last = pcall(redis.call, 'GET', counter)  -- not a string: as if lost
  local f = math.max((ok and tonumber(last or '0') or 0) + 1, clock_us())
  local text = string.format('%.0f', f)
  -- Kept a minute after the last grant: by then the clock floor is above every fence handed
  -- out, so names no longer used leave no counter behind.
  redis.call('SET', counter, text, 'PX', 60000)
  return text, f
end
"""

# The waiters' queue (a zset of tokens by arrival, and their registrations), shared with the
# semaphore scripts so that both queue and hand over alike.
WAITERS = """
-- Pops the oldest waiter still registered and returns its token, TTL ms, fencing flag and
-- owner (the rest of its registration), or nil when no live waiter is left. Waiters whose
-- registration lapsed (its deadline reached on the server clock: ms, or read when first
-- needed) are dropped on the way; the loop is bounded so a script never runs long.
local function next_waiter(waiters, regs, clock)
  for _ = 1, 64 do
    local head = redis.call('ZPOPMIN', waiters)[1]
    if not head then return nil end
    local ok, reg = pcall(redis.call, 'HGET', regs, head)
    if ok and reg then
      redis.call('HDEL', regs, head)
      clock = clock or math.floor(clock_us() / 1000)
      local deadline, ttl, fencing, ident = string.match(reg, '^(%d+)|(%d+)|(%d)|(.*)$')
      if deadline and tonumber(deadline) > clock then return head, ttl, fencing, ident end
    end
  end
  return nil
end

-- Queues waiter tok last (kept in place when queued already, unless ``to_tail``: a waiter
-- whose place does not matter goes last again, in the order it blocks on the wake-up list)
-- and registers it for reg_ms.
local function queue_waiter(waiters, regs, tok, reg_ms, ttl, fencing, owner, to_tail)
  local last = redis.call('ZRANGE', waiters, -1, -1, 'WITHSCORES')
  if to_tail then
    if last[1] ~= tok then redis.call('ZADD', waiters, (tonumber(last[2]) or 0) + 1, tok) end
  else
    redis.call('ZADD', waiters, 'NX', (tonumber(last[2]) or 0) + 1, tok)
  end
  redis.call('PEXPIRE', waiters, reg_ms * 2)
  local deadline = math.floor(clock_us() / 1000) + reg_ms
  redis.call('HSET', regs, tok, deadline .. '|' .. ttl .. '|' .. fencing .. '|' .. owner)
  if redis.call('PTTL', regs) < reg_ms then redis.call('PEXPIRE', regs, reg_ms) end
end
"""
