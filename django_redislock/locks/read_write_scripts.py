"""The Lua scripts of read-write locks, one constant each, with what KEYS, ARGV and the reply
are. Every key a script touches arrives in its KEYS, built by ``read_write_keys`` (which
describes the layout); the pieces they share are in ``read_write_lua``.

Who may hold the lock: any number of readers, or one writer. Writers go first: once a live
writer waits, a reader arriving waits behind it (and behind every writer that waits when
the lock is free again); writers among themselves go in arrival order. With ``fair``, the
line is one for all, in arrival order: the readers at its head go in together, up to the
first writer, who goes in once they are gone.

Every script that changes who holds the lock lets in the waiters that may hold it now and
wakes them itself (``admit``): one wake-up per waiter, pushed to the lock's wake-up list,
on which every waiter blocks; a waiter popping another's passes it on. A hold expires with
its TTL on the server clock: a dead reader's or writer's hold lapses without a release.

A key of another type where the writer or the readers should be is set aside by ``ACQUIRE``
(renamed to its ``:corrupt`` key, kept a day, and counted in the reply so that the caller
logs it); one where a waiters' structure should be is deleted by it (those hold only what
live waiters write again at their next re-check).
"""

from __future__ import annotations

from ..redis.scripts import lua_script
from .lua import CLOCK
from .read_write_lua import FAST_ACQUIRE, FAST_RELEASE, HOLDERS

# KEYS[1..9] as ``ReadWriteKeys`` lists them; KEYS[10] where a writer key of another type is
# set aside, KEYS[11] where a readers key of another type is
# ARGV[1] token ("r<hex>|" reader, "w<hex>|" writer)  ARGV[2] owner "<pid>|<host>"
# ARGV[3] ttl ms  ARGV[4] index member  ARGV[5] fair "0"/"1"  ARGV[6] fencing "0"/"1"
# ARGV[7] waiter registration ms (0: try once, do not queue)  ARGV[8] "1" when this caller
# queued before  ARGV[9] a wake-up for another waiter that this caller popped, to pass on
# ("" or absent: none)
# Reply: {fence, wait ms, set aside}: fence >= 0 when the caller now holds the lock (0 for
#        a reader or without fencing), else -1 (queued when ARGV[7] > 0) and the ms before
#        the lock may change by itself (0: unknown); set aside: how many keys of another
#        type were moved out of the way.
ACQUIRE = lua_script(
    "read_write_acquire",
    CLOCK
    + FAST_ACQUIRE
    + HOLDERS
    + """
local fair, fencing = ARGV[5] == '1', ARGV[6]
local now = clock_ms()

local function set_aside(key, aside)
  redis.call('RENAME', key, aside)
  redis.call('PEXPIRE', aside, 86400000)
  out[3] = out[3] + 1
end

local current = writer_value(k)
if current == '?' then
  set_aside(k[1], k[10])
  current = false
end
local readers = live_readers(k, now)
if readers < 0 then
  set_aside(k[2], k[11])
  readers = 0
end

-- A newcomer while nobody waits is let in or queued at once.
local newcomer = ARGV[8] ~= '1' and (ARGV[9] or '') == ''
if newcomer and redis.call('EXISTS', k[3], k[4], k[5], k[6]) == 0 then
  if not current and (reader or readers == 0) then
    out[1] = tonumber((grant(k, tok, ttl, fencing, owner, now, member)))
    return out
  end
else
  local kinds = {'zset', 'zset', 'hash', 'list'}
  for i = 3, 6 do
    local kind = redis.call('TYPE', k[i])['ok']
    if kind ~= 'none' and kind ~= kinds[i - 2] then
      redis.call('DEL', k[i])
      out[3] = out[3] + 1
    end
  end
  pass_on(k, ARGV[9], now)
  if ARGV[8] == '1' then
    -- Let in before it popped its wake-up (or a retry whose reply was lost): the wake-up,
    -- if still there, is its own.
    local f = held_fence(k, tok, owner, now, current)
    if f then
      forget_waiter(k, tok)
      drop_wake_ups(k, tok)
      out[1] = f
      return out
    end
  end
  if not current then
    readers = admit(k, now, fair, member, tok, out, readers)
    if out[1] >= 0 then return out end
    current = redis.call('EXISTS', k[1]) == 1
  end
  local may = not current
  if reader then
    may = may and not writer_waits(k, now)
  else
    may = may and readers == 0
  end
  if may and fair then  -- nobody else in the line
    local line = redis.call('ZRANGE', k[3], 0, 1)
    may = #line == 0 or (#line == 1 and line[1] == tok)
  end
  if may then
    forget_waiter(k, tok)
    out[1] = tonumber((grant(k, tok, ttl, fencing, owner, now, member)))
    drop_wake_ups(k, tok)
    return out
  end
end

local reg_ms = tonumber(ARGV[7])
if reg_ms > 0 then
  queue_waiter(k[3], k[5], tok, reg_ms, ttl, fencing, owner, false)
  if not reader then
    redis.call('ZADD', k[4], 'NX', redis.call('ZSCORE', k[3], tok), tok)
    redis.call('PEXPIRE', k[4], reg_ms * 2)
  end
end
out[2] = wait_ms(k, now)
return out
""",
)

# KEYS[1..9] as ``ReadWriteKeys`` lists them
# ARGV[1] the holder (a reader's member, a writer's token), or "" to free every holder
# (force release)  ARGV[2] index member  ARGV[3] fair "0"/"1"
# Reply: 1 when the holder held the lock (forced: when anybody did), else 0. The waiters
#        that may hold it now are let in and woken.
RELEASE = lua_script(
    "read_write_release",
    CLOCK
    + FAST_RELEASE
    + HOLDERS
    + """
now = now or clock_ms()
local freed = 1
if holder == '' then
  local current = writer_value(k)
  local ok, live = pcall(redis.call, 'ZCOUNT', k[2], '(' .. now, '+inf')
  if not current and not (ok and live > 0) then freed = 0 end
  redis.call('DEL', k[1], k[2])
end
local readers = live_readers(k, now)
if redis.call('EXISTS', k[3]) == 1 and redis.call('EXISTS', k[1]) == 0 then
  readers = admit(k, now, ARGV[3] == '1', member, '', {-1}, math.max(readers, 0))
end
forget_if_free(k, member, readers)
return freed
""",
)

# KEYS[1] writer  KEYS[2] readers  KEYS[3] index  KEYS[4] names
# ARGV[1] the holder (a reader's member, a writer's token)  ARGV[2] new ttl ms
# ARGV[3] index member
# Reply: 1 when extended, 0 when the holder does not hold the lock (any more).
EXTEND = lua_script(
    "read_write_extend",
    """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local holder, ms = ARGV[1], tonumber(ARGV[2])
if string.sub(holder, 1, 1) == 'w' then
  local ok, current = pcall(redis.call, 'GET', KEYS[1])
  if not ok or not current or string.sub(current, 1, #holder) ~= holder then return 0 end
  redis.call('PEXPIRE', KEYS[1], ms)
else
  local ok, expiry = pcall(redis.call, 'ZSCORE', KEYS[2], holder)
  if not ok or not expiry or tonumber(expiry) <= now then return 0 end
  redis.call('ZADD', KEYS[2], 'XX', now + ms, holder)
  if redis.call('PTTL', KEYS[2]) < ms then redis.call('PEXPIRE', KEYS[2], ms) end
end
redis.call('ZADD', KEYS[3], 'GT', now + ms, ARGV[3])
-- Also puts back an entry that the listing swept too early (its clock ran ahead).
redis.call('ZADD', KEYS[4], 0, ARGV[3])
return 1
""",
)

# A waiter stops waiting (timed out, cancelled). Leaves the line atomically, so nobody lets
# it in any more; if somebody already did, the caller holds the lock (and releases it, which
# lets others in). Its leaving may let in those it kept waiting (a writer at the head of the
# line, say). A wake-up for another waiter that it popped is passed on.
# KEYS[1..9] as ``ReadWriteKeys`` lists them
# ARGV[1] token  ARGV[2] owner "<pid>|<host>"  ARGV[3] a wake-up to pass on ("": none)
# ARGV[4] index member  ARGV[5] fair "0"/"1"
# Reply: the fence (>= 0) when the caller was let in meanwhile, else -1.
GIVE_UP = lua_script(
    "read_write_give_up",
    CLOCK
    + HOLDERS
    + """
local k, tok, owner = KEYS, ARGV[1], ARGV[2]
local now = clock_ms()
forget_waiter(k, tok)
pass_on(k, ARGV[3], now)
local current = writer_value(k)
local f = held_fence(k, tok, owner, now, current)
if f then
  drop_wake_ups(k, tok)
  return f
end
if not current and redis.call('EXISTS', k[3]) == 1 then
  admit(k, now, ARGV[5] == '1', ARGV[4], '', {-1}, math.max(live_readers(k, now), 0))
end
return -1
""",
)

# Read only: a read-write lock as the server clock sees it now.
# KEYS[1] writer  KEYS[2] readers  KEYS[3] waiters
# ARGV[1] a holder to look up (a reader's member, a writer's token), or ""
# Reply: {live readers, ms left on the writer (-1: none), waiters queued, ms left on the
#         holder (-1: it holds nothing), the writer's value (false: none; "?": a key of
#         another type)}
STATE = lua_script(
    "read_write_state",
    """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local holder = ARGV[1]
local ok, readers = pcall(redis.call, 'ZCOUNT', KEYS[2], '(' .. now, '+inf')
if not ok then readers = 0 end
local writer_ok, writer = pcall(redis.call, 'GET', KEYS[1])
if not writer_ok then writer = '?' end
local writer_ms = -1
if writer then writer_ms = redis.call('PTTL', KEYS[1]) end
local mine = -1
if string.sub(holder, 1, 1) == 'w' then
  if writer and string.sub(writer, 1, #holder) == holder then mine = writer_ms end
elseif holder ~= '' then
  local found, expiry = pcall(redis.call, 'ZSCORE', KEYS[2], holder)
  if found and expiry and tonumber(expiry) > now then mine = tonumber(expiry) - now end
end
local queued_ok, waiters = pcall(redis.call, 'ZCARD', KEYS[3])
if not queued_ok then waiters = 0 end
return {readers, writer_ms, waiters, mine, writer}
""",
)
