"""The Lua pieces of keyed concurrency limits, part of the queue scripts' prelude (``lua``
puts them after ``wake`` and before the pieces that end a job's run).

A job with a concurrency key ("export:42") and a limit in its metadata holds a permit of
its key from its lease to the end of its run: a member "<key>\\x00<id>" of the ``held`` set
(its key noted in the job's field ``F.permit``). POP leases a job only while its key has
fewer permits out than its limit; otherwise the job is parked: off the ready set, into the
``parked`` set as "<key>\\x00<ready score, 16 digits><id>" (so a key's jobs keep their order,
read with ZRANGEBYLEX), state parked, uncharged. Every end of a run (finished, retried,
given back, lapsed, requeued by the operator) gives the permit back and sends the oldest
job parked for that key back to the ready set, with a wake-up: the next fetch decides. So
the parked job is never touched by the script that lets it go (its hash is not that
script's key): it may sit in the ready set still marked parked, until a POP takes it.
"""

from __future__ import annotations

LIMITS = """
-- A job's concurrency key and limit, from its metadata ({"concurrency": {"key": ...,
-- "limit": ...}}): {key, limit}, false when it has none, nil when it is malformed.
local function limit_of(meta)
  if not meta or not string.find(meta, '"concurrency"', 1, true) then return false end
  local ok, m = pcall(cjson.decode, meta)
  if not ok or type(m) ~= 'table' then return nil end
  local c = m.concurrency
  if c == nil or c == cjson.null then return false end  -- in another value, or unset
  if type(c) ~= 'table' then return nil end
  local k, l = c.key, c.limit
  if type(k) ~= 'string' or k == '' or #k > 1024 or string.find(k, '%z') or type(l) ~= 'number'
     or l < 1 or l ~= math.floor(l) or l > 1000000 then
    return nil
  end
  return {k, l}
end

-- The permits of concurrency key ``k`` out, and, when they reach ``limit``, those of them
-- held by jobs no longer leased (a lost or corrupt state: the caller takes them back, logged).
local function permits_out(k, limit)
  local lo, hi = '[' .. k .. '\\0', '(' .. k .. '\\1'
  local ok, n = pcall(redis.call, 'ZLEXCOUNT', HELD, lo, hi)
  if not ok then return 0, {} end  -- not a sorted set: POP sets it aside
  if n < limit then return n, {} end
  local stale = {}
  for _, m in ipairs(redis.call('ZRANGEBYLEX', HELD, lo, hi)) do
    if not redis.call('ZSCORE', RUN, string.sub(m, #k + 2)) then stale[#stale + 1] = m end
  end
  return n - #stale, stale
end

-- Let the oldest job parked for key ``k`` go: back to the ready set, with a wake-up.
local function unpark_one(k)
  local ok, first = pcall(redis.call, 'ZRANGEBYLEX', PARKED, '[' .. k .. '\\0', '(' .. k .. '\\1',
                          'LIMIT', 0, 1)
  if not ok or not first[1] then return end
  redis.call('ZREM', PARKED, first[1])
  local rest = string.sub(first[1], #k + 2)
  redis.call('ZADD', READY, tonumber(string.sub(rest, 1, 16)) - 1e15, string.sub(rest, 17))
  wake(1)
end

-- Park job ``id`` (hash at ``key``, ready score ``score``) until a permit of ``k`` frees.
local function park(key, id, k, score)
  local m = k .. '\\0' .. string.format('%016d', score + 1e15) .. id
  redis.call('ZADD', PARKED, 0, m)
  redis.call('HSET', key, F.state, S.parked, F.parked, m)
end

-- Give back the permit of key ``k`` (false: none) job ``id`` (hash at ``key``) held, and
-- let the oldest job parked for that key go.
local function free_permit(key, id, k)
  if not k then return end
  redis.call('HDEL', key, F.permit)
  pcall(redis.call, 'ZREM', HELD, k .. '\\0' .. id)  -- (not a sorted set: POP deletes it)
  unpark_one(k)
end

-- Delete the held or the parked set when it is not a sorted set (a corrupt state), noting
-- "{limits}<key>" in ``notes`` for the worker's log.
local function limit_sets_checked(notes)
  for _, k in ipairs({HELD, PARKED}) do
    local t = redis.call('TYPE', k).ok
    if t ~= 'zset' and t ~= 'none' then
      redis.call('DEL', k)
      notes[#notes + 1] = '{limits}' .. k
    end
  end
end

-- Take job ``id`` (hash at ``key``, in ``state``) off its state's set: a parked one off the
-- parked set, and off the ready set that a freed permit may have sent it back to.
local function unlist(key, id, state)
  if state == S.parked then
    local m = redis.call('HGET', key, F.parked)
    if m then redis.call('ZREM', PARKED, m) end
    redis.call('ZREM', READY, id)
  elseif SETS[state] then
    redis.call('ZREM', SETS[state], id)
  end
end
"""
