"""The Lua scripts that end or keep a lease the caller holds: RELEASE (give back jobs that
did not start), SETTLE (a failed or retried attempt), NOTE_MAX_ATTEMPTS, PUBLISH (a running
job's progress) and RENEW. Each gets
the queue's fixed keys first (see ``lua``), then the key of each job it names."""

from __future__ import annotations

from .lua import script

# KEYS: the fixed keys, then each job's key.  ARGV: pairs of id, lease token (at most 1000)
# Gives back leased jobs that never started (a worker's jobs leased ahead, when it stops or
# one of its jobs runs long): ready again at the front of their priority, in their order,
# an attempt charged under this lease given back; a job with a follow-up asked for becomes
# that follow-up. Returns how many it gave back.
RELEASE = script(
    "release",
    """
local n = #ARGV / 2
if n > 1000 then return redis.error_reply('RELEASE takes at most 1000 jobs') end
local back = {}
for j = 1, n do
  local key = KEYS[JOB - 1 + j]
  local ok, f = pcall(redis.call, 'HMGET', key, F.lease, F.priority, F.attempts, F.workers,
                      F.started_lease, F.permit, F.stamp)
  if ok and f[1] == ARGV[2 * j] then back[#back + 1] = {j, key, f} end
end
local now = false
for _, b in ipairs(back) do
  local j, key, f = b[1], b[2], b[3]
  local id, follow = ARGV[2 * j - 1], next_run(key)
  local asked = redis.call('HGET', key, F.cancel)
  redis.call('ZREM', RUN, id)
  free_permit(key, id, f[6])
  unstamp(key, f[7])  -- (leased ahead, never started: not a start)
  if asked then  -- cancelled before it started
    now = now or now_ms()
    bury_cancelled(key, id, now, asked)
  elseif follow then  -- never started; a follow-up was asked for meanwhile: it runs instead
    now = now or now_ms()
    run_next(key, id, follow, now)
  else
    redis.call('HDEL', key, F.lease, F.worker, F.started_lease)
    if f[5] == f[1] then  -- charged under this lease: give the attempt back
      local ws = f[4] and string.match(f[4], '^(.*),[^,]*$')
      if ws then redis.call('HSET', key, F.workers, ws) else redis.call('HDEL', key, F.workers) end
      redis.call('HSET', key, F.attempts, math.max(0, (num(f[3], 1) or 1) - 1))
      redis.call('HDEL', key, F.started)
    end
    redis.call('HSET', key, F.state, S.ready)
    local pr = num(f[2], 0) or 0
    redis.call('ZADD', READY, (100 - pr) * BAND - n + j - 1, id)
  end
end
if #back > 0 then wake(#back) end
return #back
""",
)

# KEYS: the fixed keys, then the job's key, then those of its dependants given (in this
# queue, told here if it ends dead).  ARGV[1] id  ARGV[2] lease token  ARGV[3]
# delay ms (-1: to the dead set)  ARGV[4] error  ARGV[5] traceback  ARGV[6] exception class
# path  ARGV[7] the error as a JSON object for the history ("" for none)  ARGV[8] worker id
# ARGV[9] "1": the attempt failed (counted in the failures field), "0": it asked to run
# again later (RetryLater: no failure, no error stored)  ARGV[10] why it runs next ("" none)
# then the ids of the dependants given
# Gives a leased job back: scheduled again after the delay, or dead; its attempt is charged
# if it was not yet. A follow-up asked for while it ran replaces it instead (fresh, as
# enqueued). 1, or 0 if the lease was lost (another worker may have it by now); 2 when it
# left something in the outbox for the worker to deliver (``outbox``).
SETTLE = script(
    "settle",
    """
local id, key, delay, worker = ARGV[1], KEYS[JOB], tonumber(ARGV[3]), ARGV[8]
for g = 11, #ARGV do GIVEN[ARGV[g]] = JOB + g - 10 end
local ok, f = pcall(redis.call, 'HMGET', key, F.lease, F.started_lease, F.attempts, F.workers,
                    F.failures, F.permit)
if not ok or f[1] ~= ARGV[2] then return 0 end
local failed = ARGV[9] == '1'
local failures = (num(f[5], 0) or 0) + (failed and 1 or 0)
local now, follow = now_ms(), next_run(key)
local asked = redis.call('HGET', key, F.cancel)
redis.call('ZREM', RUN, id)
free_permit(key, id, f[6])
if asked then  -- it was asked to stop: whatever its worker says, never run again
  bury_cancelled(key, id, now, asked)
  return OUTBOXED and 2 or 1
end
if follow then  -- a follow-up was asked for while it ran: it runs instead of a retry
  run_next(key, id, follow, now)
  return 1
end
redis.call('HDEL', key, F.lease, F.worker, F.started_lease)
if f[2] ~= f[1] then  -- never started through POP: this attempt is charged now
  redis.call('HSET', key, F.attempts, (num(f[3], 0) or 0) + 1, F.started, now,
    F.workers, with_worker(f[4], worker))
end
if failed then
  redis.call('HSET', key, F.error, ARGV[4], F.traceback, ARGV[5], F.error_class, ARGV[6],
             F.failures, failures)
  if ARGV[7] ~= '' then add_error(key, ARGV[7]) end
end
if ARGV[10] ~= '' then redis.call('HSET', key, F.reason, ARGV[10]) end
if delay < 0 then
  redis.call('HSET', key, F.state, S.dead, F.finished, now)
  redis.call('ZADD', DEAD, now, id)
  ended(key, id, S.dead, now, ARGV[4])
  return OUTBOXED and 2 or 1
elseif delay == 0 then
  redis.call('HSET', key, F.due, now)
  make_ready(key, id)
  wake(1)
else
  redis.call('HSET', key, F.state, S.scheduled, F.due, now + delay)
  redis.call('ZADD', SCHED, now + delay, id)
  wake(1)
end
return 1
""",
)

# KEYS: the fixed keys, then the job's key.  ARGV[1] lease token  ARGV[2] max_attempts
# Notes the job's max_attempts as its task has it, while the caller holds its lease: a
# lapse of that lease is then judged by it (POP). 1, or 0 if the lease was lost.
NOTE_MAX_ATTEMPTS = script(
    "note_max_attempts",
    """
local ok, lease = pcall(redis.call, 'HGET', KEYS[JOB], F.lease)
if not ok or lease ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[JOB], F.max_attempts, ARGV[2])
return 1
""",
)

# KEYS: the fixed keys, then the job's key.  ARGV[1] lease token  ARGV[2] its metadata
# (JSON object; "" to leave it)  ARGV[3] its progress ("<done>/<total>"; "" to leave it)
# Publishes what a running job says of its progress while the caller holds its lease (a job
# that ended, or whose lease was lost, is left alone). 1, or 0 if the lease was lost.
PUBLISH = script(
    "publish",
    """
local ok, lease = pcall(redis.call, 'HGET', KEYS[JOB], F.lease)
if not ok or lease ~= ARGV[1] then return 0 end
if ARGV[2] ~= '' then redis.call('HSET', KEYS[JOB], F.metadata, ARGV[2]) end
if ARGV[3] ~= '' then redis.call('HSET', KEYS[JOB], F.progress, ARGV[3]) end
return 1
""",
)

# KEYS: the fixed keys, then each job's key.  ARGV[1] lease ms, then pairs of id, lease token
# Renews the leases still held; returns {the ids whose lease was lost, the ids of those
# asked to stop (cancelled while running)}.
RENEW = script(
    "renew",
    """
local lease = tonumber(ARGV[1])
local now, lost, asked = now_ms(), {}, {}
for j = 1, (#ARGV - 1) / 2 do
  local id = ARGV[2 * j]
  local ok, f = pcall(redis.call, 'HMGET', KEYS[JOB - 1 + j], F.lease, F.cancel)
  if ok and f[1] == ARGV[2 * j + 1] then
    redis.call('ZADD', RUN, 'XX', now + lease, id)
    if f[2] then asked[#asked + 1] = id end
  else
    lost[#lost + 1] = id
  end
end
return {lost, asked}
""",
)
