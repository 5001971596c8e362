"""The producers' Lua scripts: ADD (one new job) and ENQUEUE (any jobs, a batch, a schedule
tick). Each gets the queue's fixed keys first (see ``lua``); what follows is said in its
header."""

from __future__ import annotations

from .lua import script

__all__ = ["ADD", "ENQUEUE"]

# ENQUEUE's common case in fewer steps: one job whose id was just generated (so no job of
# that id is pending, and none is looked up). KEYS: the first six fixed keys (ready, sched,
# run, dead, seq, wake: ``QueueKeys.producing``), then the job's key, last.
# ARGV: the job's 7 values, as ENQUEUE takes them. Returns one number: when it was enqueued
# (epoch ms), negated when the job was scheduled rather than made ready; its due time
# follows from that and its due argument (``Queue.add`` turns this into ENQUEUE's values).
ADD = script(
    "add",
    """
local t = redis.call('TIME')
local now, due = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), tonumber(ARGV[7])
if due <= 0 then due = now - due end
if due <= now then
  redis.call('ZADD', READY, (100 - tonumber(ARGV[6])) * BAND + redis.call('INCR', SEQ), ARGV[1])
  if redis.call('RPUSH', WAKE, 1) > 128 then redis.call('LTRIM', WAKE, -64, -1) end
  write_job(KEYS[#KEYS], 1, S.ready, due, now)
  return now
end
redis.call('ZADD', SCHED, due, ARGV[1])
if due <= head(SCHED) then wake(1) end  -- a sleeping worker must shorten its wait
write_job(KEYS[#KEYS], 1, S.scheduled, due, now)
return -now
""",
)

# KEYS: the fixed keys; with a schedule entry, its tick key; then per job its key, and also
# its corrupt key unless ARGV[4] says every id is new.
# ARGV[1] replace "0"/"1"  ARGV[2] a schedule entry's name, or ""  ARGV[3] its tick (epoch
# ms)  ARGV[4] "1" when every id is new (generated), so none is looked up; then per job 7
# values: id, task, args (JSON), kwargs (JSON, "" for none), metadata (JSON, "" for none),
# priority, due (epoch ms, or a negative number of ms from now; 0 = now)
# With an entry name, the jobs are enqueued only if the tick is later than the last tick
# claimed for that entry, which then becomes this one: the claim and the enqueue are one
# step, so a tick is enqueued once however many schedulers race.
# Returns per job four values: 1 added, 2 replaced, 3 to run again once its running attempt
# ends (replace on a running job: the new values are kept for that follow-up run, the last
# ones asked for win) or 0 kept (already pending, or running without replace); the due
# time (epoch ms) as stored (a follow-up's: its own); the state letter as stored; when it
# was enqueued (epoch ms).
ENQUEUE = script(
    "enqueue",
    """
local replace, fresh = ARGV[1] == '1', ARGV[4] == '1'
local count = (#ARGV - 4) / 7
if count > 1000 then return redis.error_reply('ENQUEUE takes at most 1000 jobs') end
local first_key, stride = ARGV[2] ~= '' and JOB + 1 or JOB, fresh and 1 or 2
local now = now_ms()
-- Read and decide first: what each job finds (kept, replaced, added) and its due time.
local found = {}
if not fresh then
  for n = 1, count do
    local f = redis.pcall('HMGET', KEYS[first_key + (n - 1) * 2], F.state, F.due, F.enqueued)
    if f.err then found[n] = {'corrupt'} else found[n] = f end  -- corrupt: set aside, replaced
  end
end
if ARGV[2] ~= '' then
  if (tonumber(redis.call('GET', KEYS[JOB]) or '0') or 0) >= tonumber(ARGV[3]) then return {} end
  redis.call('SET', KEYS[JOB], ARGV[3])
end
local seq = redis.call('INCRBY', SEQ, count) - count
local results, woken, first = {}, 0, false  -- first: the head of sched, read when needed
local ready = {}  -- score, id, ...: added in ZADDs of 500 when every id is new
for n = 1, count do
  local i, k = 5 + (n - 1) * 7, first_key + (n - 1) * stride
  local id, pr, due = ARGV[i], tonumber(ARGV[i + 5]), tonumber(ARGV[i + 6])
  if due <= 0 then due = now - due end
  local key, f = KEYS[k], found[n] or {false}
  local state, result, enqueued = f[1], 1, now
  if state == 'corrupt' then
    redis.call('RENAME', key, KEYS[k + 1])
    state = false
  end
  if state and not SETS[state] and state ~= S.running and state ~= S.done and state ~= S.parked
  then
    state = S.dead
  end
  if state == S.running and replace then  -- one follow-up run, once this one ends
    redis.call('HSET', key, F.next_task, ARGV[i + 1], F.next_args, ARGV[i + 2],
               F.next_kwargs, ARGV[i + 3], F.next_meta, ARGV[i + 4], F.next_priority,
               ARGV[i + 5], F.next_due, due, F.next_enqueued, now)
    redis.call('HDEL', key, F.next_debounced)  -- (a debounced enqueue's, replaced)
    result = 3
    enqueued = tonumber(f[3]) or now
  elseif state == S.running or (state and state ~= S.dead and not replace) then
    result = 0
    due = tonumber(f[2]) or now
    enqueued = tonumber(f[3]) or now
  else
    local links = state and state ~= S.dead and links_of(key)
    if state then
      result = state == S.dead and 1 or 2
      unlist(key, id, state)
      redis.call('DEL', key)
    end
    if due <= now then
      state = S.ready
      seq = seq + 1
      if fresh then
        ready[#ready + 1] = (100 - pr) * BAND + seq
        ready[#ready + 1] = id
        if #ready == 1000 then
          redis.call('ZADD', READY, unpack(ready))
          ready = {}
        end
      else
        redis.call('ZADD', READY, (100 - pr) * BAND + seq, id)
      end
      woken = woken + 1
    else
      state = S.scheduled
      redis.call('ZADD', SCHED, due, id)
      if first == false then first = head(SCHED) end
      if first == nil or due <= first then
        first = due
        woken = math.max(woken, 1)  -- a sleeping worker must shorten its wait
      end
    end
    write_job(key, i, state, due, now)
    state = relink(key, id, links, now) or state
  end
  results[#results + 1] = result
  results[#results + 1] = due
  results[#results + 1] = state
  results[#results + 1] = enqueued
end
if #ready > 0 then redis.call('ZADD', READY, unpack(ready)) end
if woken > 0 then wake(woken) end
return results
""",
)
