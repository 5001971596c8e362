"""The Lua scripts of semaphores, one constant each, with what KEYS, ARGV and the reply are.
Every key a script touches arrives in its KEYS, built by ``keys`` (which describes
the layout). Permits expire on the server clock; the scripts reclaim expired permits from
the fixed keys they are given, so a crashed holder's permit comes back after its TTL at most.

A holder taking n permits at once has the token "<hex>*<n>|" ("<hex>|" for one) and n
members in the holders zset, granted, extended and freed together in one script: its first
``<token><fence>|<owner>`` (the permit its holder names), then ``<hex>*<n>.<i>|<fence>|
<owner>`` for i = 2..n, ``<owner>`` being ``<limit>|<pid>|<host>``. The holders zset thus
counts permits (ZCARD), and release and extend are O(n log N).

Waiters queue as a lock's (``lua.WAITERS``'s registrations, whose owner part is the semaphore
owner above); a hand-off gives a waiter all its permits or none: fair, only the oldest waiter
may get them (the others wait behind it); otherwise the oldest waiters that fit, in arrival
order. A non-fair waiter goes last in the queue again at each re-check, as a lock's does, so
that the queue follows the order its waiters block in.

A script that hands permits to waiters wakes them itself, as a lock's does: it pushes one
wake-up per waiter, "<permit>|0" (its first holders member, which starts with
"<token><fence>|"), to the end of the semaphore's wake-up list ``sh:<name>`` (in its KEYS),
on which every waiter blocks; Redis serves blocked clients in arrival order. A release that
frees permits for two waiters thus pushes two wake-ups, which the two waiters blocked
longest pop. A waiter that pops another's wake-up passes it on (``ACQUIRE``'s or
``GIVE_UP``'s pass-on argument), which pushes it back to the front while its permit is live
and it has not gone round too often; its addressee finds its permits at its next re-check
anyway. A waiter that finds its permits without its wake-up takes the wake-up out.

The shard's ``sems`` index leaves no entry behind: a release that frees a semaphore's last
live permit removes its entry, and every acquire drops a few entries whose latest permit
lapsed (``sweep``; the listing drops them all, see ``SWEEP``).
"""

from __future__ import annotations

from ..locks.lua import CLOCK
from ..redis.scripts import lua_script
from .lua import MEMBERS, PERMITS, WAKE_UPS

# Index entries of idle semaphores an acquire drops at most (see ``sweep``).
ACQUIRE_SWEEP = 16

# KEYS[1] holders  KEYS[2] waiters  KEYS[3] registrations  KEYS[4] fence  KEYS[5] index
# KEYS[6] wake-up list
# ARGV[1] token ("<hex>|", or "<hex>*<n>|" for n permits)  ARGV[2] owner
# "<limit>|<pid>|<host>"  ARGV[3] ttl ms  ARGV[4] name  ARGV[5] limit  ARGV[6] fair "0"/"1"
# ARGV[7] fencing "0"/"1"  ARGV[8] waiter registration ms (0: try once, do not queue)
# ARGV[9] "1" when this caller queued before
# ARGV[10] a wake-up for another waiter that this caller popped, to pass on ("" or absent:
#          none)
# Reply: {fence, wait ms}: fence >= 0 when the caller now holds its permits (0 without
#        fencing), else -1 (queued when ARGV[8] > 0) and the ms until the soonest permit
#        expires.
ACQUIRE = lua_script(
    "semaphore_acquire",
    PERMITS
    + WAKE_UPS
    + f"""
local tok, ttl, name, limit = ARGV[1], ARGV[3], ARGV[4], tonumber(ARGV[5])
local fair, want = ARGV[6] == '1', wanted(ARGV[1])
local now = clock_ms()
local count = redis.call('ZCARD', KEYS[1])
local full = count + want > limit
if full then count = live(KEYS[1], now) end  -- only then do expired permits matter
sweep(KEYS[5], now, {ACQUIRE_SWEEP})
pass_on(KEYS[1], KEYS[6], ARGV[10], now)
local free = limit - count
local out = {{-1, 0}}
if ARGV[9] == '1' then
  -- Handed permits before it popped its wake-up (or a retry whose reply was lost): the
  -- wake-up, if still there, is its own.
  local f = fence_of(KEYS[1], tok, now)
  if f then
    drop_wake_ups(KEYS[6], tok)
    out[1] = f
    return out
  end
end
if free > 0 and fair then  -- the oldest waiters first, this one if queued
  local handed = hand_off(KEYS, name, now, free, out, tok, true, count)
  free = free - handed
  count = count + handed
end
-- Fair, a newcomer never goes before a waiter still queued.
local may = not fair or redis.call('EXISTS', KEYS[2]) == 0
if out[1] < 0 and free >= want and may then
  out[1] = tonumber(grant(KEYS, tok, ttl, ARGV[7], ARGV[2], name, now, count == 0))
  free = free - want
  -- Permits that expired (found so when the semaphore looked full) go on to the waiters,
  -- who need not wait for their re-check.
  if full and free > 0 then hand_off(KEYS, name, now, free, out, tok, fair, count + want) end
end
if out[1] >= 0 then
  if ARGV[9] == '1' then
    redis.call('ZREM', KEYS[2], tok)
    redis.call('HDEL', KEYS[3], tok)
  end
  return out
end
local reg_ms = tonumber(ARGV[8])
if reg_ms > 0 then
  queue_waiter(KEYS[2], KEYS[3], tok, reg_ms, ttl, ARGV[7], ARGV[2], not fair)
end
local soonest = tonumber(redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2]) or now
out[2] = math.max(1, soonest - now)
return out
""",
)

# KEYS[1..6] as ACQUIRE's
# ARGV[1] the permit, or "" to free every permit whoever holds them (force release)
# ARGV[2] name  ARGV[3] limit ("" when forced: the freed permits go on to waiters)
# ARGV[4] fair "0"/"1"
# Reply: 1 when the permit was live (forced: when any was), else 0. The waiters it handed
#        the freed permits to are woken (see above).
RELEASE = lua_script(
    "semaphore_release",
    PERMITS
    + """
local permit, name, fair = ARGV[1], ARGV[2], ARGV[4] == '1'
local now = clock_ms()
local freed = 1
local free, held
if permit ~= '' then
  local expiry = tonumber(redis.call('ZSCORE', KEYS[1], permit))
  if not expiry or expiry <= now then return 0 end  -- lapsed: never freed by its holder
  local members = members_of(permit)
  for i = 1, #members, 1000 do
    redis.call('ZREM', KEYS[1], unpack(members, i, math.min(i + 999, #members)))
  end
  if redis.call('EXISTS', KEYS[2]) == 0 then  -- nobody waits
    forget_if_idle(KEYS, name, now)
    return freed
  end
  held = live(KEYS[1], now)
  free = tonumber(ARGV[3]) - held  -- what waiters may get
else
  free, held = live(KEYS[1], now), 0
  if free == 0 then freed = 0 end
  redis.call('DEL', KEYS[1])
  redis.call('DEL', KEYS[6])  -- wake-ups not popped yet announce permits now gone
end
if free > 0 then held = held + hand_off(KEYS, name, now, free, {-1}, '', fair, held) end
if held == 0 then redis.call('ZREM', KEYS[5], name) end  -- no live permit left
return freed
""",
)

# KEYS[1] holders  KEYS[2] index
# ARGV[1] the permit  ARGV[2] new ttl ms  ARGV[3] name
# Reply: 1 when extended, 0 when the permit is not live (any more).
EXTEND = lua_script(
    "semaphore_extend",
    CLOCK
    + MEMBERS
    + """
local now = math.floor(clock_us() / 1000)
local expiry = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]))
if not expiry or expiry <= now then return 0 end
local ms = tonumber(ARGV[2])
for _, member in ipairs(members_of(ARGV[1])) do
  redis.call('ZADD', KEYS[1], 'XX', now + ms, member)
end
redis.call('ZADD', KEYS[2], 'GT', now + ms, ARGV[3])
local latest = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[3]))
redis.call('PEXPIREAT', KEYS[1], string.format('%.0f', latest))  -- see ``outlive``
return 1
""",
)

# A waiter stops waiting (timed out). Leaves the queue atomically, so a hand-off cannot go
# to it any more; if one already did, the caller holds those permits (and releases them,
# which hands them on), and its wake-up leaves the list. A wake-up for another waiter that
# it popped is passed on.
# KEYS[1] holders  KEYS[2] waiters  KEYS[3] registrations  KEYS[4] wake-up list
# ARGV[1] token  ARGV[2] a wake-up to pass on ("" or absent: none)
# Reply: the fence (>= 0) when permits were handed to the caller meanwhile, else -1.
GIVE_UP = lua_script(
    "semaphore_give_up",
    PERMITS
    + WAKE_UPS
    + """
local tok = ARGV[1]
local now = clock_ms()
redis.call('ZREM', KEYS[2], tok)
redis.call('HDEL', KEYS[3], tok)
pass_on(KEYS[1], KEYS[4], ARGV[2], now)
local f = fence_of(KEYS[1], tok, now)
if not f then return -1 end
drop_wake_ups(KEYS[4], tok)
return f
""",
)

# Read only: a semaphore's state on the server clock.
# KEYS[1] holders  KEYS[2] waiters
# ARGV[1] a permit to look up, or ""  ARGV[2] "1" to list the live permits
# Reply: {live permits, waiters queued, ms left on the permit (-1: not live), then
#         <expiry ms, member> of each live permit, soonest first}
STATE = lua_script(
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

# The listing's upkeep of one shard's index: drops a batch of idle semaphores' entries.
# KEYS[1] index
# ARGV[1] batch
# Reply: how many entries it dropped (a full batch: call again).
SWEEP = lua_script(
    "semaphore_sweep",
    PERMITS
    + """
return sweep(KEYS[1], clock_ms(), tonumber(ARGV[1]))
""",
)
