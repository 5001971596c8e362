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
  if type(k) ~= 'string' or k == '' or #k > 1024 or string.find(k, '%c') or type(l) ~= 'number'
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

-- A job's rate key, count and period (ms), from its metadata ({"rate_limit": {"key": ...,
-- "count": ..., "period": ...}}): {key, count, period}, false when it has none, nil when it
-- is malformed.
local function rate_of(meta)
  if not meta or not string.find(meta, '"rate_limit"', 1, true) then return false end
  local ok, m = pcall(cjson.decode, meta)
  if not ok or type(m) ~= 'table' then return nil end
  local r = m.rate_limit
  if r == nil or r == cjson.null then return false end
  if type(r) ~= 'table' then return nil end
  local k, n, p = r.key, r.count, r.period
  if type(k) ~= 'string' or k == '' or #k > 1024 or string.find(k, '%c') or type(n) ~= 'number'
     or n < 1 or n ~= math.floor(n) or n > 10000 or type(p) ~= 'number' or p < 1
     or p ~= math.floor(p) or p > 31622400000 then
    return nil
  end
  return {k, n, p}
end

-- The bounds of rate key ``k``'s window of ``period`` ms ending ``now`` in the starts set
-- (a start at t leaves it at t + period exactly).
local function window(k, period, now)
  return '[' .. k .. '\\0' .. string.format('%015d', now - period + 1), '(' .. k .. '\\1'
end

-- When a start of rate key ``k`` is allowed again, ``extra`` starts of its window being over
-- its count: once the ``extra``-th oldest (from 0) of the window's ``n`` starts has left it
-- (those made by the caller, at ``now``, come after the ``n``).
local function allowed_at(k, period, now, extra, n)
  if extra >= n then return now + period end
  local lo, hi = window(k, period, now)
  local m = redis.call('ZRANGEBYLEX', STARTS, lo, hi, 'LIMIT', extra, 1)[1]
  if not m then return now + period end
  return tonumber(string.sub(m, #k + 2, #k + 16)) + period
end

-- Whether job ``id`` (hash at ``key``, of ``task``; ``lim`` and ``rl`` from limit_of and
-- rate_of) may start now: {its permit's key or false, its rate key or false}; else false,
-- and it is added to ``c.parking``: its task paused, its concurrency key at its limit, or
-- its rate key's window full (parked until a start is allowed), with its ready score
-- (``score``, else its score in the ready set). ``c`` counts for the caller: out[key]
-- (permits out), win[rate key] ({starts in the window, starts made now, period}),
-- taken_back (stale permits), parking, paused (as paused_now), now.
local function admit(key, id, task, lim, rl, c, score)
  score = score or redis.call('ZSCORE', READY, id)
  if c.paused[task] then
    c.parking[#c.parking + 1] = {key, id, '\\t' .. task, score}
    return false
  end
  if lim then
    local k = lim[1]
    if not c.out[k] then
      local n, stale = permits_out(k, lim[2])
      c.out[k] = n
      for _, m in ipairs(stale) do c.taken_back[#c.taken_back + 1] = m end
    end
    if c.out[k] >= lim[2] then
      c.parking[#c.parking + 1] = {key, id, k, score}
      return false
    end
  end
  if rl then
    local rk, count, period = rl[1], rl[2], rl[3]
    local w = c.win[rk]
    if not w then
      local lo, hi = window(rk, period, c.now)
      local ok, n = pcall(redis.call, 'ZLEXCOUNT', STARTS, lo, hi)
      w = {ok and n or 0, 0, period}
      c.win[rk] = w
    end
    if w[1] + w[2] >= count then
      local at = allowed_at(rk, period, c.now, w[1] + w[2] - count, w[1])
      c.parking[#c.parking + 1] = {key, id, false, score, at}
      return false
    end
    w[2] = w[2] + 1
  end
  if lim then c.out[lim[1]] = c.out[lim[1]] + 1 end
  return {lim and lim[1] or false, rl and rl[1] or false}
end

-- Park what ``admit`` held back: under its key, or by when its rate allows it to start
-- (under the key "\\2", in that order).
local function park_all(parking)
  for _, p in ipairs(parking) do
    local key, id, k, score = p[1], p[2], p[3], tonumber(p[4])
    local m
    if k then
      m = k .. '\\0' .. string.format('%016d', score + 1e15) .. id
    else
      m = '\\2\\0' .. string.format('%016d', p[5]) .. string.format('%016d', score + 1e15) .. id
    end
    redis.call('ZADD', PARKED, 0, m)
    redis.call('HSET', key, F.state, S.parked, F.parked, m)
  end
end

-- Job ``id`` (hash at ``key``), leased ahead, starts now: its rate start, noted as it was
-- leased (``member``), is moved to now (the window holds real starts).
local function restamp(key, id, member, now)
  local rk = string.match(member, '^(.-)%z')
  redis.call('HDEL', key, F.stamp)
  if not rk then return end
  pcall(redis.call, 'ZREM', STARTS, member)
  pcall(redis.call, 'ZADD', STARTS, 0, rk .. '\\0' .. string.format('%015d', now) .. id)
end

-- Job ``key``, leased ahead, never started (given back, or expired): its rate start, noted
-- as it was leased (``member``, or false), goes.
local function unstamp(key, member)
  if not member then return end
  redis.call('HDEL', key, F.stamp)
  pcall(redis.call, 'ZREM', STARTS, member)
end

-- Take back the permits ``admit`` found held by jobs no longer running, noting each in
-- ``notes`` ("{permit}<key> <id>", for the worker's log).
local function take_back(members, notes)
  zrem_all(HELD, members)
  for _, m in ipairs(members) do
    notes[#notes + 1] = '{permit}' .. string.gsub(m, '%z', ' ', 1)
  end
end

-- Let the jobs whose rate allows them to start by ``now`` go (at most a thousand a call,
-- back to the ready set); the time (epoch ms) the next may start, or nil.
local function rate_parked_due(now)
  local ok, due = pcall(redis.call, 'ZRANGEBYLEX', PARKED, '[\\2\\0',
                        '(\\2\\0' .. string.format('%016d', now + 1), 'LIMIT', 0, 1000)
  if not ok then return nil end
  if #due > 0 then
    local back = {}
    for _, m in ipairs(due) do
      back[#back + 1] = tonumber(string.sub(m, 19, 34)) - 1e15
      back[#back + 1] = string.sub(m, 35)
    end
    zrem_all(PARKED, due)
    zadd_all(READY, back)
  end
  local next_one = redis.call('ZRANGEBYLEX', PARKED, '[\\2\\0', '(\\2\\1', 'LIMIT', 0, 1)[1]
  return next_one and tonumber(string.sub(next_one, 3, 18))
end

-- Note the starts of rate keys made now (``stamps``: rate key, id, ...), and drop the
-- starts that left the windows of the keys counted (``win``, as ``admit`` keeps it).
local function stamp_starts(stamps, win, now)
  local at = string.format('%015d', now)
  local flat = {}
  for i = 1, #stamps, 2 do
    flat[#flat + 1] = 0
    flat[#flat + 1] = stamps[i] .. '\\0' .. at .. stamps[i + 1]
  end
  if #flat > 0 then zadd_all(STARTS, flat) end
  for rk, w in pairs(win) do
    redis.call('ZREMRANGEBYLEX', STARTS, '[' .. rk .. '\\0',
               '(' .. rk .. '\\0' .. string.format('%015d', now - w[3] + 1))
  end
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

-- Give back the permit of key ``k`` (false: none) job ``id`` (hash at ``key``) held, and
-- let the oldest job parked for that key go.
local function free_permit(key, id, k)
  if not k then return end
  redis.call('HDEL', key, F.permit)
  pcall(redis.call, 'ZREM', HELD, k .. '\\0' .. id)  -- (not a sorted set: POP deletes it)
  unpark_one(k)
end

-- Delete the held, parked or starts set when it is not a sorted set (a corrupt state), noting
-- "{limits}<key>" in ``notes`` for the worker's log.
local function limit_sets_checked(notes)
  for _, k in ipairs({HELD, PARKED, STARTS}) do
    local t = redis.call('TYPE', k).ok
    if t ~= 'zset' and t ~= 'none' then
      redis.call('DEL', k)
      notes[#notes + 1] = '{limits}' .. k
    end
  end
end

-- What is paused ("*": the whole queue, else task paths) as a set; a paused hash that is not
-- a hash (a corrupt state) is deleted, noted "{limits}<key>" in ``notes``: nothing is paused.
local function paused_now(notes)
  local ok, fields = pcall(redis.call, 'HKEYS', PAUSED)
  local set = {}
  if not ok then
    redis.call('DEL', PAUSED)
    notes[#notes + 1] = '{limits}' .. PAUSED
    return set
  end
  for _, name in ipairs(fields) do set[name] = true end
  return set
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
