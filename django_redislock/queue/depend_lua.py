"""The Lua piece of dependencies (``queue.enqueue(..., depends_on=...)``, the workflows'
steps): what happens when a job ends, to the jobs waiting for it. A piece of the queue
scripts' prelude (``lua``), after ``make_ready``; ``bury`` and ``finish_and_start`` use it.

A waiting job (state "w", in the waiting set) keeps, per dependency, a field "@<ref>": "w"
until that dependency ends, then the state it ended in; and how many are left. A job keeps
the refs of the jobs waiting for it (its dependants). When it ends, each dependant in the
same queue whose key the script was given (``GIVEN``: a worker finishing a job gives those
it read at the lease) is told at once, in that script: the last dependency ended makes it
ready (or scheduled, if it was enqueued with a later due time), and a dependency ended dead
ends it dead with ``DependencyFailed`` (unless it runs when they finished, however), which
tells its own dependants in turn. Every other dependant, and those who ``join`` the job,
are told through the queue's outbox, which the workers deliver (``outbox``): telling is
idempotent (a dependant told already, or not waiting any more, is left alone), so a
delivery repeated after a crash changes nothing.
"""

from __future__ import annotations

DEPENDENCY_FAILED = "django_redislock.exceptions.DependencyFailed"
# What a workflow's gate waits for (``open_gate`` ends it): no job's ref (a job id is
# printable, a ref of another queue's job has a tab).
GATE_REF = "\x01gate"

DEPEND = f"""
-- The dependants in this queue whose keys the script was given: id -> index in KEYS.
local GIVEN = {{}}
local OUTBOXED = false  -- something was left in the outbox (the worker's replies say so)
local depend_met
-- How many of the dependencies of the job at ``key`` have not ended, from their marks: of
-- those its list ``dp`` names (a mark missing or damaged: not ended), else of its marks.
local function waiting_marks(key, dp)
  local left = 0
  if dp and dp ~= '' then
    for ref in string.gmatch(dp, '[^\\n]+') do
      local mark = redis.call('HGET', key, '@' .. ref)
      if mark ~= S.done and mark ~= S.dead then left = left + 1 end
    end
    return left
  end
  local all = redis.call('HGETALL', key)
  for i = 1, #all, 2 do
    if string.byte(all[i], 1) == 64 and all[i + 1] ~= S.done and all[i + 1] ~= S.dead then
      left = left + 1
    end
  end
  return left
end
-- Job ``id`` (its hash at ``key``) ended in ``outcome`` (S.done or S.dead; ``why``: a dead
-- job's error): tell its dependants, and wake those who join it. ``f``: its dependants and
-- joined fields, if the caller read them (else read here).
local function ended(key, id, outcome, now, why, f)
  if not f then
    local ok, read = pcall(redis.call, 'HMGET', key, F.dependants, F.joined)
    if not ok then return end
    f = read
  end
  if f[1] then
    for ref in string.gmatch(f[1], '[^\\n]+') do
      local k = GIVEN[ref]
      if k then
        depend_met(KEYS[k], ref, id, outcome, now, why)
      else
        OUTBOXED = true
        redis.call('RPUSH', OUTBOX, 't\\n' .. ref .. '\\n' .. id .. '\\n' .. outcome .. '\\n'
                   .. string.sub(why or '', 1, 200))
      end
    end
  end
  if f[2] and f[2] ~= '0' then
    OUTBOXED = true
    redis.call('RPUSH', OUTBOX, 'e\\n' .. id .. '\\n' .. f[2])
  end
end
-- Tell waiting job ``id`` (at ``key``) that its dependency ``ref`` ended in ``outcome``.
-- Nothing when it is not waiting, or was told of that one already. A waiting job whose key
-- is not a hash is set aside (at ``corrupt``), dead; without that key, left to the outbox.
depend_met = function(key, id, ref, outcome, now, why, corrupt)
  if outcome ~= S.done and outcome ~= S.dead then return end  -- (no outcome: nothing told)
  local ok, f = pcall(redis.call, 'HMGET', key, F.state, '@' .. ref, F.waiting_on, F.run_when,
                      F.due, F.depends)
  if not ok then
    if not corrupt then
      OUTBOXED = true
      redis.call('RPUSH', OUTBOX, 't\\n' .. id .. '\\n' .. ref .. '\\n' .. outcome .. '\\n')
    elseif redis.call('ZSCORE', WAITING, id) then
      redis.call('RENAME', key, corrupt)
      redis.call('ZREM', WAITING, id)
      redis.call('HSET', key, F.state, S.dead, F.finished, now, F.error, 'The job in Redis is '
                 .. 'not a hash; it was set aside as ' .. corrupt .. '.', F.error_class, '',
                 F.traceback, '')
      redis.call('ZADD', DEAD, now, id)
    end
    return
  end
  if f[1] ~= S.waiting or f[2] == S.done or f[2] == S.dead then return end  -- (told already)
  if f[2] ~= S.waiting and not string.find('\\n' .. (f[6] or '') .. '\\n', '\\n' .. ref .. '\\n', 1,
                                         true) then
    return  -- not one of its dependencies
  end
  redis.call('HSET', key, '@' .. ref, outcome)
  if outcome == S.dead and f[4] ~= 'f' then
    local err = 'Its dependency ' .. string.gsub(ref, '\\t', ':') .. ' ended dead'
      .. ((why and why ~= '') and (' (' .. string.sub(why, 1, 200) .. ')') or '') .. '.'
    redis.call('ZREM', WAITING, id)
    redis.call('HDEL', key, F.waiting_on)
    redis.call('HSET', key, F.state, S.dead, F.finished, now, F.error, err, F.error_class,
               '{DEPENDENCY_FAILED}', F.traceback, '')
    redis.call('ZADD', DEAD, now, id)
    ended(key, id, S.dead, now, err)
    return
  end
  local left = num(f[3], nil)
  if left and left >= 1 and left == math.floor(left) and f[2] == S.waiting then
    left = left - 1
  else  -- its count (or this dependency's mark) was damaged: counted again from the marks
    left = waiting_marks(key, f[6])
  end
  if left > 0 then
    redis.call('HSET', key, F.waiting_on, left)
    return
  end
  redis.call('ZREM', WAITING, id)
  redis.call('HDEL', key, F.waiting_on)
  local due = num(f[5], 0) or 0
  if due > now then
    redis.call('HSET', key, F.state, S.scheduled)
    redis.call('ZADD', SCHED, due, id)
  else
    make_ready(key, id)
  end
  wake(1)
end
-- The gate of a workflow written in several scripts (``workflows.gate``): a waiting job
-- that only this ends, done, once every step was written: its dependants, the workflow's
-- first steps, are told as of any job's end. Its result is kept ``ttl_ms`` (for the
-- registrations of steps in other queues delivered later). 1 if it opened it, 0 if it was
-- not waiting (opened already, cancelled).
local function open_gate(key, result_key, id, now, ttl_ms)
  local ok, f = pcall(redis.call, 'HMGET', key, F.state, F.dependants, F.joined)
  if not ok or f[1] ~= S.waiting then return 0 end
  redis.call('ZREM', WAITING, id)
  redis.call('RENAME', key, result_key)
  redis.call('HSET', result_key, F.state, S.done, F.finished, now)
  redis.call('HDEL', result_key, F.waiting_on, F.dependants)
  redis.call('PEXPIRE', result_key, ttl_ms)
  ended(key, id, S.done, now, nil, {{f[2], f[3]}})
  return 1
end
-- A pending job replaced by an enqueue passes its dependants and joiners on to the new one,
-- and a waiting one its dependencies, so that the new one waits for them as it did: read
-- them (nil: none) before its hash goes, and set them on the new hash (``relink``, which
-- returns S.waiting when the new job waits).
local function links_of(key)
  local kept, all, waits = {{}}, redis.call('HGETALL', key), false
  for i = 1, #all, 2 do
    local f = all[i]
    if f == F.dependants or f == F.joined or f == F.depends or f == F.waiting_on
      or f == F.run_when or string.byte(f, 1) == 64 then  -- ("@<ref>")
      kept[#kept + 1] = f
      kept[#kept + 1] = all[i + 1]
    elseif f == F.state then
      waits = all[i + 1] == S.waiting
    end
  end
  return #kept > 0 and {{kept, waits}} or nil
end
local function relink(key, id, l, now)
  if not l then return nil end
  for i = 1, #l[1], 1000 do redis.call('HSET', key, unpack(l[1], i, math.min(i + 999, #l[1]))) end
  if not l[2] then return nil end
  redis.call('ZREM', READY, id)
  redis.call('ZREM', SCHED, id)
  redis.call('HSET', key, F.state, S.waiting)
  redis.call('ZADD', WAITING, now, id)
  return S.waiting
end
"""
