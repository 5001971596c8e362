"""The Lua scripts of the queue's operator side: CANCEL (and delete), REQUEUE, PURGE,
READY_HEADS, REQUEUE_RUNNING (a job left by a dead worker) and RETRY_DEAD. Each gets the
queue's fixed keys first (see ``lua``)."""

from __future__ import annotations

from .lua import script

# KEYS: the fixed keys, then the job's key, its corrupt key and its
# unique_for marker.  ARGV[1] id  ARGV[2] due (epoch ms) it must still have, or ""
# ARGV[3] the state letters it may be in (cancel: ready, scheduled, parked, running; delete:
# ready, scheduled, parked, dead)  ARGV[4] who cancels
# Deletes the job, and with it its unique_for window: 1; or, running (and ARGV[4] given),
# marks it asked to stop: 2 (its worker stops it; it is then dead as cancelled, never run
# again); 0 when missing, in another state or since rescheduled. A dead id whose key is not
# a hash is deleted too (delete cleans up what POP set aside). A job deleted before it
# ended ends its dependants as a dead one would (``depend_lua``): 3 when that left
# something in the outbox.
CANCEL = script(
    "cancel",
    """
local id, key, corrupt, marker = ARGV[1], KEYS[JOB], KEYS[JOB + 1], KEYS[JOB + 2]
local ok, f = pcall(redis.call, 'HMGET', key, F.state, F.due)
if not ok or not f[1] then
  -- No hash (a key of another type, or none): only an entry of the dead set can be deleted.
  if not string.find(ARGV[3], S.dead, 1, true) or not redis.call('ZSCORE', DEAD, id) then
    return 0
  end
  redis.call('ZREM', DEAD, id)
  redis.call('DEL', key, corrupt, marker)
  return 1
end
if f[1] == S.running and ARGV[4] ~= '' and string.find(ARGV[3], S.running, 1, true) then
  -- Asked to stop: its worker sees it at its next lease renewal; never run again.
  local t = redis.call('TIME')
  redis.call('HSET', key, F.cancel, ARGV[4] .. '|' .. (t[1] * 1000 + math.floor(t[2] / 1000)))
  redis.call('HDEL', key, F.next_task, F.next_args)  -- nor its follow-up, if one was asked
  return 2
end
if not (SETS[f[1]] or f[1] == S.parked) or not string.find(ARGV[3], f[1], 1, true) then
  return 0
end
if ARGV[2] ~= '' and f[2] ~= ARGV[2] then return 0 end
unlist(key, id, f[1])
if f[1] ~= S.dead then
  local who = ARGV[4] ~= '' and ARGV[4] or 'an operator'
  ended(key, id, S.dead, now_ms(), 'deleted before it ran, by ' .. who)
end
redis.call('DEL', key, corrupt, marker)
return OUTBOXED and 3 or 1
""",
)

# KEYS: the fixed keys, then the job's key.  ARGV[1] id
# Makes a scheduled or dead job ready now (a dead one with its attempts and failures reset).
# 1, or 0 when it is missing, already ready or running.
REQUEUE = script(
    "requeue",
    """
local id, key = ARGV[1], KEYS[JOB]
local ok, state = pcall(redis.call, 'HGET', key, F.state)
if not ok then return 0 end
if state == S.scheduled then
  redis.call('ZREM', SCHED, id)
elseif state == S.dead then
  redis.call('ZREM', DEAD, id)
  redis.call('HSET', key, F.attempts, 0)
  redis.call('HDEL', key, F.workers, F.finished, F.failures, F.reason)
else
  return 0
end
redis.call('HSET', key, F.due, now_ms())
make_ready(key, id)
wake(1)
return 1
""",
)

# KEYS: the fixed keys, then a state's sorted set, then per id its job key, its corrupt
# key and its unique_for marker.  ARGV: ids read from that set (at most 1000)
# Deletes the jobs still in the set (their unique_for windows with them); returns how many.
# Their dependants (of jobs that had not ended) end as if they ended dead (``depend_lua``).
PURGE = script(
    "purge",
    """
if #ARGV > 1000 then return redis.error_reply('PURGE takes at most 1000 jobs') end
local removed, now = 0, false
for n, id in ipairs(ARGV) do
  if redis.call('ZREM', KEYS[JOB], id) == 1 then
    if KEYS[JOB] ~= DEAD then
      now = now or now_ms()
      ended(KEYS[JOB - 2 + 3 * n], id, S.dead, now, 'purged before it ran')
    end
    redis.call('DEL', KEYS[JOB - 2 + 3 * n], KEYS[JOB - 1 + 3 * n], KEYS[JOB + 3 * n])
    removed = removed + 1
  end
end
return removed
""",
)

# KEYS: the fixed keys.
# {the server's time (epoch ms), then the id at the head of each priority band in use of
# the ready set}: the ready set is ordered by priority first, so its head is not always the
# oldest job (at most 201 bands, O(log n) each).
READY_HEADS = script(
    "ready_heads",
    """
local reply, min = {now_ms()}, '-inf'
for _ = 1, 201 do
  local first = redis.call('ZRANGEBYSCORE', READY, min, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #first == 0 then break end
  reply[#reply + 1] = first[1]
  min = string.format('%.0f', (math.floor(tonumber(first[2]) / BAND) + 1) * BAND)
end
return reply
""",
)

# KEYS: the fixed keys, then the job's key.  ARGV[1] id  ARGV[2] the lease token the
# caller saw  ARGV[3] "1": only if the lease ran out; "0": only if its worker is gone: the
# caller found no registry entry for it (a key this script cannot be given on Cluster), and
# here its lease has not been renewed for ARGV[7] ms (a live worker renews it more often),
# the lease being ARGV[6] ms  ARGV[4] the error of the attempt it ends  ARGV[5] that error as
# a JSON object for the history
# Gives a running job back to ready at once, as POP does when a lease runs out: a started
# attempt is recorded as failed with ARGV[4] (a failure: ``fl`` + 1); a job asked to stop
# ends dead as cancelled, one with a follow-up becomes it. Its worker, if it ever comes
# back, finds its lease lost.
# 1; 0 when it is not running under that lease any more, or its lease is still valid
# (ARGV[3] "1") or was renewed lately (ARGV[3] "0").
REQUEUE_RUNNING = script(
    "requeue_running",
    """
local id, key = ARGV[1], KEYS[JOB]
local expiry = redis.call('ZSCORE', RUN, id)
if not expiry then return 0 end
local ok, f = pcall(redis.call, 'HMGET', key, F.lease, F.started_lease, F.cancel, F.failures,
                    F.permit)
if not ok or not f[1] or f[1] ~= ARGV[2] then return 0 end
local now = now_ms()
if ARGV[3] == '1' and tonumber(expiry) > now then return 0 end
if ARGV[3] ~= '1' and tonumber(expiry) - tonumber(ARGV[6]) > now - tonumber(ARGV[7]) then
  return 0  -- renewed lately: its worker is alive, whatever the registry said
end
redis.call('ZREM', RUN, id)
free_permit(key, id, f[5])
if f[3] then
  bury_cancelled(key, id, now, f[3], '; requeued from the admin before its worker stopped it')
  return 1
end
local follow = next_run(key)
if follow then
  run_next(key, id, follow, now)
  return 1
end
redis.call('HDEL', key, F.lease, F.worker, F.started_lease)
if f[2] == f[1] then  -- a started attempt: it failed without an outcome (a failure)
  local failed = (num(f[4], 0) or 0) + 1
  redis.call('HSET', key, F.error_class, '', F.traceback, '', F.error, ARGV[4],
             F.failures, failed, F.reason, 'retry ' .. failed .. ' (requeued from the admin)')
  add_error(key, ARGV[5])
end
redis.call('HSET', key, F.due, now)
make_ready(key, id)
wake(1)
return 1
""",
)

# KEYS: the fixed keys, then each job's key.  ARGV: the ids (at most 1000)
# Makes the jobs still dead ready now, their attempts and failures reset (REQUEUE of many
# dead jobs);
# returns how many.
RETRY_DEAD = script(
    "retry_dead",
    """
if #ARGV > 1000 then return redis.error_reply('RETRY_DEAD takes at most 1000 jobs') end
local back = {}
for n, id in ipairs(ARGV) do
  local ok, state = pcall(redis.call, 'HGET', KEYS[JOB - 1 + n], F.state)
  if ok and state == S.dead and redis.call('ZSCORE', DEAD, id) then back[#back + 1] = n end
end
if #back == 0 then return 0 end
local now = now_ms()
for _, n in ipairs(back) do
  local key, id = KEYS[JOB - 1 + n], ARGV[n]
  redis.call('ZREM', DEAD, id)
  redis.call('HSET', key, F.attempts, 0, F.due, now)
  redis.call('HDEL', key, F.workers, F.finished, F.failures, F.reason)
  make_ready(key, id)
end
wake(#back)
return #back
""",
)
