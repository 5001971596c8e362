"""The Lua scripts of dependencies: DEPEND (jobs that wait for others), and what the outbox's
delivery runs (TELL, REGISTER, WAKE_JOINERS) and ``join`` (JOIN). Each gets the queue's
fixed keys first (see ``lua``); what follows is said in its header. The piece they share,
what a job's end does to its dependants, is ``depend_lua``'s."""

from __future__ import annotations

from .depend_lua import DEPENDENCY_FAILED
from .lua import script

__all__ = ["CANCEL_STEPS", "DEPEND", "JOIN", "OPEN", "REGISTER", "TELL", "WAKE_JOINERS"]

# KEYS: the fixed keys; per job its key; then per dependency outside the batch (in this
# queue) its key and its result key; then, with a workflow's record, its key and the
# queue's index of workflows.
# ARGV[1] how many jobs  ARGV[2] how many dependencies outside the batch  ARGV[3] the id of
# a workflow whose record to write ("" for none)  ARGV[4] its record (JSON)  ARGV[5] ms
# after which the index has the workflow looked at (for its clean-up); per job 9 values:
# id, task, args, kwargs, metadata, priority, due (as ENQUEUE's), "f" to run once its
# dependencies finished however they ended (else "s": once they succeeded), its
# dependencies' refs (newline-separated: an id of this queue, "<queue>\t<id>" elsewhere,
# GATE_REF for a workflow's gate); then the outside dependencies' ids; then, to open a
# workflow's gate once the jobs are written (``open_gate``), its id, ms to keep its result
# and the ids of its dependants in this queue given (their keys last in KEYS, after the
# gate's key and its result key).
# Adds the jobs (every same-queue dependency comes earlier in the batch, or is outside it):
# each waits for its dependencies that have not ended (state waiting, registered as their
# dependant), is ready (or scheduled) at once when none is left, or dead with
# DependencyFailed at once when one ended dead (unless "f"). A dependency in another queue
# is registered through the outbox ("r"), which the caller delivers next. An id already
# pending is kept as it is (its dependencies unchanged). Reads everything before its first
# write: an error reply ("unknown <id>": a dependency that is neither pending, dead nor
# kept as done; "corrupt <id>": a job's key that is not a hash) writes nothing.
# Returns per job ENQUEUE's four values (1 added or 0 kept, due, state letter, enqueued),
# then 1 if something was left in the outbox. The record is written with the jobs.
DEPEND = script(
    "depend",
    f"""
local GATE = '\\1gate'  -- GATE_REF
local n_jobs, n_out = tonumber(ARGV[1]), tonumber(ARGV[2])
if n_jobs > 1000 or n_out > 1000 then
  return redis.error_reply('DEPEND takes at most 1000 jobs and 1000 dependencies')
end
local now = now_ms()
-- How each dependency stands: {{'p', its key's index}} pending, {{S.done}}, {{S.dead, why}}.
local stands, out_at = {{}}, 6 + 9 * n_jobs
for d = 0, n_out - 1 do
  local id, k = ARGV[out_at + d], JOB + n_jobs + 2 * d
  local ok, f = pcall(redis.call, 'HMGET', KEYS[k], F.state)
  if not ok then
    stands[id] = {{S.dead, 'its record in Redis is not a job'}}
  elseif f[1] == S.dead then
    stands[id] = {{S.dead, ''}}
  elseif f[1] then
    stands[id] = {{'p', k}}
  elseif redis.call('EXISTS', KEYS[k + 1]) == 1 then
    stands[id] = {{S.done}}
  else
    return redis.error_reply('unknown ' .. id)
  end
end
local found = {{}}
for n = 0, n_jobs - 1 do
  local ok, f = pcall(redis.call, 'HMGET', KEYS[JOB + n], F.state, F.due, F.enqueued)
  if not ok then return redis.error_reply('corrupt ' .. ARGV[6 + 9 * n]) end
  found[n] = f
end
local results, woken = {{}}, 0
local added, added_order = {{}}, {{}}  -- per dependency's KEYS index: its new dependants
for n = 0, n_jobs - 1 do
  local i, k = 6 + 9 * n, JOB + n
  local key, id, f = KEYS[k], ARGV[6 + 9 * n], found[n]
  if f[1] and f[1] ~= S.dead then  -- pending already: kept; later jobs wait for it as it is
    stands[id] = {{'p', k}}
    for _, v in ipairs({{0, f[2] or now, f[1], f[3] or now}}) do results[#results + 1] = v end
  else
    if f[1] then
      redis.call('ZREM', DEAD, id)
      redis.call('DEL', key)
    end
    local due = tonumber(ARGV[i + 6])
    if due <= 0 then due = now - due end
    local fields, pending, failed = {{}}, {{}}, nil
    for ref in string.gmatch(ARGV[i + 8], '[^\\n]+') do
      local st = ref == GATE and {{'g'}} or string.find(ref, '\\t', 1, true) and {{'x'}}
        or stands[ref]
      if st[1] == 'p' or st[1] == 'x' or st[1] == 'g' then
        pending[#pending + 1] = {{ref, st}}
        fields[#fields + 1] = '@' .. ref
        fields[#fields + 1] = S.waiting
      else
        fields[#fields + 1] = '@' .. ref
        fields[#fields + 1] = st[1]
        if st[1] == S.dead and ARGV[i + 7] ~= 'f' and not failed then
          failed = 'Its dependency ' .. string.gsub(ref, '\\t', ':') .. ' ended dead'
            .. ((st[2] and st[2] ~= '') and (' (' .. string.sub(st[2], 1, 200) .. ')') or '')
            .. '.'
        end
      end
    end
    local state = failed and S.dead or (#pending > 0 and S.waiting)
      or (due <= now and S.ready or S.scheduled)
    write_job(key, i, state, due, now)
    redis.call('HSET', key, F.depends, ARGV[i + 8], unpack(fields))
    if ARGV[i + 7] == 'f' then redis.call('HSET', key, F.run_when, 'f') end
    if failed then
      redis.call('HSET', key, F.finished, now, F.error, failed, F.error_class,
                 '{DEPENDENCY_FAILED}', F.traceback, '')
      redis.call('ZADD', DEAD, now, id)
      stands[id] = {{S.dead, failed}}
    else
      stands[id] = {{'p', k}}
      if #pending > 0 then
        redis.call('HSET', key, F.waiting_on, #pending)
        redis.call('ZADD', WAITING, now, id)
        for _, p in ipairs(pending) do
          if p[2][1] == 'p' then  -- registered as its dependant (written below, once each)
            local k = p[2][2]
            if not added[k] then added[k] = {{}}; added_order[#added_order + 1] = k end
            added[k][#added[k] + 1] = id
          elseif p[2][1] == 'x' then  -- in another queue: registered there through the outbox
            redis.call('RPUSH', OUTBOX, 'r\\n' .. p[1] .. '\\n' .. id .. '\\n' .. now)
            OUTBOXED = true
          end  -- (a gate waits for its opening only)
        end
      elseif due <= now then
        redis.call('ZADD', READY, (100 - tonumber(ARGV[i + 5])) * BAND + redis.call('INCR', SEQ),
                   id)
        woken = woken + 1
      else
        redis.call('ZADD', SCHED, due, id)
        woken = math.max(woken, 1)
      end
    end
    for _, v in ipairs({{1, due, state, now}}) do results[#results + 1] = v end
  end
end
for _, k in ipairs(added_order) do  -- each dependency's new dependants, appended at once
  local dn, ids = redis.call('HGET', KEYS[k], F.dependants), table.concat(added[k], '\\n')
  redis.call('HSET', KEYS[k], F.dependants, dn and (dn .. '\\n' .. ids) or ids)
end
if woken > 0 then wake(woken) end
local at = JOB + n_jobs + 2 * n_out
if ARGV[3] ~= '' then
  redis.call('SET', KEYS[at], ARGV[4])
  redis.call('ZADD', KEYS[at + 1], now + tonumber(ARGV[5]), ARGV[3])
  at = at + 2
end
local gate = out_at + n_out
if (ARGV[gate] or '') ~= '' then
  for r = gate + 2, #ARGV do GIVEN[ARGV[r]] = at + r - gate end
  open_gate(KEYS[at], KEYS[at + 1], ARGV[gate], now, tonumber(ARGV[gate + 1]))
end
results[#results + 1] = OUTBOXED and 1 or 0
return results
""",
)

# KEYS: the fixed keys; per job told its key and its corrupt key.  ARGV: per job told 4
# values: its id, the ref
# of its dependency that ended (as it names it), the state it ended in (done or dead), and
# why (a dead one's error, or "")
# Tells each (waiting) job that its dependency ended (``depend_met``: idempotent). Returns 1
# if something was left in this queue's outbox (a dependant ended dead in turn), else 0.
TELL = script(
    "tell",
    """
if #ARGV > 4000 then return redis.error_reply('TELL takes at most 1000 jobs') end
local now = now_ms()
for n = 0, #ARGV / 4 - 1 do
  depend_met(KEYS[JOB + 2 * n], ARGV[1 + 4 * n], ARGV[2 + 4 * n], ARGV[3 + 4 * n], now,
             ARGV[4 + 4 * n], KEYS[JOB + 2 * n + 1])
end
return OUTBOXED and 1 or 0
""",
)

# KEYS: the fixed keys, the job's key, its result key.  ARGV[1] the ref of a job in another
# queue that waits for this one ("<queue>\t<id>")
# Registers that job as a dependant of this one (once, however often it is delivered).
# Returns "w" when this job has not ended (registered), the state it ended in (done or
# dead: the caller tells the dependant itself), or "" when there is no such job.
REGISTER = script(
    "register",
    """
local key, ref = KEYS[JOB], ARGV[1]
local ok, f = pcall(redis.call, 'HMGET', key, F.state, F.dependants)
if not ok then return S.dead end  -- not a hash: it can never end well
if f[1] == S.dead then return S.dead end
if f[1] then
  local dn = f[2]
  if not dn then
    redis.call('HSET', key, F.dependants, ref)
  elseif not string.find('\\n' .. dn .. '\\n', '\\n' .. ref .. '\\n', 1, true) then
    redis.call('HSET', key, F.dependants, dn .. '\\n' .. ref)
  end
  return S.waiting
end
if redis.call('EXISTS', KEYS[JOB + 1]) == 1 then return S.done end
return ''
""",
)

# KEYS: the fixed keys, the join list of a job.  ARGV[1] how many wait on it
# Wakes those who ``join`` a job that ended: a token each (by the thousand, at least one
# each), kept a minute for a late one.
WAKE_JOINERS = script(
    "wake_joiners",
    """
local n = math.max(1, math.min(tonumber(ARGV[1]) or 1, 100000))
local tokens = {}
for i = 1, math.min(n, 1000) do tokens[i] = 1 end
for _ = 1, n, 1000 do redis.call('RPUSH', KEYS[JOB], unpack(tokens)) end
redis.call('PEXPIRE', KEYS[JOB], 60000)
return 1
""",
)

# KEYS: the fixed keys, the job's key, its result key.  ARGV[1] "1" to wait for it (counted
# in its joined field, so that its end wakes the waiter), "0" to look only, "-1" a waiter
# that leaves
# How the job stands: "k" done (kept), "d" dead, "" no such job, else its state letter.
JOIN = script(
    "join",
    """
local key = KEYS[JOB]
local ok, f = pcall(redis.call, 'HMGET', key, F.state, F.joined)
if not ok then return S.dead end
if f[1] then
  if f[1] ~= S.dead then
    local n = (num(f[2], 0) or 0) + tonumber(ARGV[1])
    if n > 0 then redis.call('HSET', key, F.joined, n) else redis.call('HDEL', key, F.joined) end
  end
  return f[1]
end
if redis.call('EXISTS', KEYS[JOB + 1]) == 1 then return S.done end
return ''
""",
)

# KEYS: the fixed keys, then each job's key.  ARGV[1] who cancels, then the jobs' ids (at
# most 1000)
# Cancels a workflow's steps in this queue: one that has not started (waiting, ready,
# scheduled, parked) ends dead as cancelled, never run (its dependants told, as of any dead
# job); one running is asked to stop (as ``cancel`` asks it). Returns {how many ended, how
# many asked to stop, 1 if something was left in the outbox}.
CANCEL_STEPS = script(
    "cancel_steps",
    """
if #ARGV > 1001 then return redis.error_reply('CANCEL_STEPS takes at most 1000 jobs') end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local asked, ended_n, stopping = ARGV[1] .. '|' .. now, 0, 0
for n = 2, #ARGV do
  local key, id = KEYS[JOB + n - 2], ARGV[n]
  local ok, state = pcall(redis.call, 'HGET', key, F.state)
  if ok and state == S.running then
    redis.call('HSET', key, F.cancel, asked)
    redis.call('HDEL', key, F.next_task, F.next_args)
    stopping = stopping + 1
  elseif ok and (SETS[state] and state ~= S.dead or state == S.parked) then
    unlist(key, id, state)
    if state == S.waiting then redis.call('HDEL', key, F.waiting_on) end
    bury_cancelled(key, id, now, asked, ' (its workflow was cancelled)')
    ended_n = ended_n + 1
  end
end
return {ended_n, stopping, OUTBOXED and 1 or 0}
""",
)

# KEYS: the fixed keys, a workflow's gate's key, its result key, then the keys of its
# dependants given.  ARGV[1] the gate's id  ARGV[2] ms to keep its result, then the ids of
# the dependants given (those of this queue, at most 1000; the others are told through the
# outbox)
# Opens the gate of a workflow written in several scripts, once all of them were: its first
# steps start (``open_gate``). Returns {1 if it opened it (0: opened already, or
# cancelled), 1 if something was left in the outbox}.
OPEN = script(
    "open",
    """
local now = now_ms()
for r = 3, #ARGV do GIVEN[ARGV[r]] = JOB + r - 1 end
local opened = open_gate(KEYS[JOB], KEYS[JOB + 1], ARGV[1], now, tonumber(ARGV[2]))
return {opened, OUTBOXED and 1 or 0}
""",
)
