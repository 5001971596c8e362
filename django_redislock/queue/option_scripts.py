"""ENQUEUE_OPTED: ENQUEUE for jobs that carry enqueue-decided options (``job_options``:
``unique_for``, ``debounce``, or an id ``unique_by_args`` derived). Plain jobs keep ADD and
ENQUEUE, whose cost these options do not touch. It gets the queue's fixed keys first (see
``lua``); what follows is said in its header."""

from __future__ import annotations

from .lua import script

__all__ = ["ENQUEUE_OPTED", "OPTED_VALUES"]

OPTED_VALUES = 10  # ARGV values per job

# KEYS: the fixed keys; then per job 4 keys: its key, its corrupt key, its unique marker
# (``u:<id>``), its result key.
# ARGV: per job 10 values: ENQUEUE's 7 (id, task, args, kwargs, metadata, priority, due),
# then replace "0"/"1", the unique_for window in ms (0: none), the debounce in ms (0: none).
# Jobs are taken in order, each read and then written (so a batch naming one id twice sees
# its first job): every read is guarded, so nothing fails after the first write.
# A job whose marker is there (its unique_for window) is returned unchanged: as pending or
# running in its hash, else as done (its result key, else the marker's copy). Otherwise as
# ENQUEUE (replace per job; a debounce replaces, its due time is now + debounce); a job
# created with unique_for leaves its marker for the window (PX).
# Returns per job 9 values: ENQUEUE's 4 (outcome, due, state letter, enqueued), then, when
# the outcome is 0 (kept), the job's stored task, args, kwargs, metadata and priority,
# else 5 empty strings (the job holds the values given).
ENQUEUE_OPTED = script(
    "enqueue_opted",
    """
local count = #ARGV / 10
if count > 1000 then return redis.error_reply('ENQUEUE_OPTED takes at most 1000 jobs') end
local now, results, woken = now_ms(), {}, 0
local function values(key)  -- a job's stored values, or nil (absent or not a hash)
  local ok, v = pcall(redis.call, 'HMGET', key, F.state, F.due, F.enqueued, F.task, F.args,
                      F.kwargs, F.meta, F.priority)
  if ok and v[4] then return v end
  return nil
end
local function reply(outcome, due, state, enqueued, v)
  for _, x in ipairs({outcome, due, state, enqueued}) do results[#results + 1] = x end
  for j = 4, 8 do results[#results + 1] = v and (v[j] or (j == 8 and '0' or '')) or '' end
end
for n = 1, count do
  local i, k = 1 + (n - 1) * 10, JOB + (n - 1) * 4
  local id, key, marker = ARGV[i], KEYS[k], KEYS[k + 2]
  local replace, unique, debounce = ARGV[i + 7] == '1', tonumber(ARGV[i + 8]), tonumber(ARGV[i + 9])
  local due = tonumber(ARGV[i + 6])
  if debounce > 0 then due = now + debounce elseif due <= 0 then due = now - due end
  local ok, f = pcall(redis.call, 'HMGET', key, F.state, F.due, F.enqueued, F.task, F.args,
                      F.kwargs, F.meta, F.priority)
  if not ok then  -- not a hash: set aside, and replaced
    redis.call('RENAME', key, KEYS[k + 1])
    f = {false}
  end
  local state = f[1]
  if state and not SETS[state] and state ~= S.running and state ~= S.done and state ~= S.parked
  then
    state = S.dead
  end
  local held = unique > 0 and values(marker)
  if held and state then
    reply(0, tonumber(f[2]) or now, state, tonumber(f[3]) or now, f)
  elseif held then  -- finished within its window: done (kept as its result, or trimmed)
    local r = values(KEYS[k + 3]) or held
    reply(0, tonumber(r[2]) or now, S.done, tonumber(r[3]) or now, r)
  elseif state == S.running and replace then  -- one follow-up run, once this one ends
    redis.call('HSET', key, F.next_task, ARGV[i + 1], F.next_args, ARGV[i + 2],
               F.next_kwargs, ARGV[i + 3], F.next_meta, ARGV[i + 4], F.next_priority,
               ARGV[i + 5], F.next_due, due, F.next_enqueued, now)
    if debounce > 0 then redis.call('HSET', key, F.next_debounced, debounce)
    else redis.call('HDEL', key, F.next_debounced) end
    reply(3, due, state, tonumber(f[3]) or now, nil)
  elseif state == S.running or (state and state ~= S.dead and not replace) then
    reply(0, tonumber(f[2]) or now, state, tonumber(f[3]) or now, f)
  else
    local outcome = (state and state ~= S.dead) and 2 or 1
    local links = outcome == 2 and links_of(key)
    if state then
      unlist(key, id, state)
      redis.call('DEL', key)
    end
    if due <= now then
      state = S.ready
      redis.call('ZADD', READY, (100 - tonumber(ARGV[i + 5])) * BAND + redis.call('INCR', SEQ), id)
      woken = woken + 1
    else
      state = S.scheduled
      redis.call('ZADD', SCHED, due, id)
      if due <= head(SCHED) then woken = math.max(woken, 1) end
    end
    write_job(key, i, state, due, now)
    state = relink(key, id, links, now) or state
    if debounce > 0 then redis.call('HSET', key, F.debounced, debounce) end
    if unique > 0 then
      redis.call('DEL', marker)
      redis.call('HSET', marker, F.state, S.done, F.due, due, F.enqueued, now, F.task,
                 ARGV[i + 1], F.args, ARGV[i + 2], F.kwargs, ARGV[i + 3], F.meta, ARGV[i + 4],
                 F.priority, ARGV[i + 5])
      redis.call('PEXPIRE', marker, unique)
    end
    reply(outcome, due, state, now, nil)
  end
end
if woken > 0 then wake(woken) end
return results
""",
)
