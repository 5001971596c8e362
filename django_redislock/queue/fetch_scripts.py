"""The worker's hot-path Lua scripts: PEEK, POP and START (what a worker sends; the
producers' are in ``enqueue_scripts``). Each gets the queue's fixed keys first (see ``lua``);
what follows is said in its header."""

from __future__ import annotations

from .lua import MAX_BATCH, script

__all__ = ["MAX_BATCH", "PEEK", "POP", "START"]

# KEYS: the fixed keys; with ARGV[1] > 0 how many ready ids to return.
# What POP would reach by itself, read first so that POP is given every key it touches:
# {the first ready ids, the due scheduled ids (at most 1000), the expired leases (at most
# 100)}, by the server's clock.
PEEK = script(
    "peek",
    """
local now, n = now_ms(), tonumber(ARGV[1])
local ok, all_paused = pcall(redis.call, 'HEXISTS', PAUSED, '*')
if ok and all_paused == 1 then n = 0 end  -- a paused queue starts nothing
return {n > 0 and redis.call('ZRANGE', READY, 0, n - 1) or {},
        redis.call('ZRANGEBYSCORE', SCHED, '-inf', now, 'LIMIT', 0, 1000),
        redis.call('ZRANGEBYSCORE', RUN, '-inf', now, 'LIMIT', 0, 100)}
""",
)

# KEYS: the fixed keys; per job to finish its key and its result key; per job to start its
# key; then per candidate (an id PEEK found) its key and its corrupt key; last the expired
# counter and the done set.
# ARGV[1] how many candidates  ARGV[2] how many to lease (at most 1000)  ARGV[3] lease ms
# ARGV[4] worker  ARGV[5] the queue's max attempts  ARGV[6] result TTL ms  ARGV[7] "1":
# the leased jobs start now (charge their attempt), "0": leased ahead, charged when a later
# call starts them  ARGV[8] how many jobs to finish, ARGV[9] how many jobs to start,
# ARGV[10] how many of their dependants are given, then per job to finish 3 values: id,
# lease token, return value (JSON; "" to keep no result), then per job to start 2 values:
# id, lease token; then the dependants' ids (their keys after the started jobs' keys); then
# the candidates' ids.
# Finishes the given leased jobs (deleted, or kept as their result with the value for the
# TTL), charges the attempt of the jobs that start, moves due scheduled jobs to ready, takes
# back expired leases (to ready; to dead once a started attempt's lease ran out on the last
# attempt), then leases up to ARGV[2] ready jobs, highest priority first. It touches only
# the candidates among the jobs it finds: one that is not a candidate (it came since PEEK)
# is left for the next call, which is due at once. A ready job whose hash is missing or
# unreadable goes to the dead set with the reason, alone; one not started within its expiry
# (metadata "expires", s) of becoming due goes there as "expired", never leased, counted.
# Returns {ms until the next due job or lease expiry (0: more are ready, -1: none), the ids
# among the finished and started whose lease had been lost ("{outbox}" too when something
# was left in the outbox for the worker to deliver), then per leased job 12 values: id,
# task, args, kwargs, metadata, attempt (the number this run is), priority, due, enqueued,
# workers (this run's included), failures (attempts failed before this run), dependants
# (refs, newline-separated)}.
# A started attempt whose lease ran out is a failure: dead once the failures reach the
# job's own max_attempts (in its metadata), else its task's (noted by its worker at its
# start), else ARGV[5]; a job whose failures field or max_attempts option is corrupt is set
# aside (dead, with the reason). A paused queue leases nothing; a ready job of a paused
# task, or over its concurrency key's limit or its rate key's rate, is parked instead of
# leased (``limit_lua``: uncharged, its place kept); those whose rate allows them by now go
# back to ready first, and the time the next may start counts in the wait.
POP = script(
    "pop",
    """
local count, lease = tonumber(ARGV[2]), tonumber(ARGV[3])
local worker, max_attempts, charge = ARGV[4], tonumber(ARGV[5]), ARGV[7] == '1'
local n_finish, n_start, n_given = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
if count > 1000 or n_finish > 1000 or n_start > 1000 or n_given > 1000 then
  return redis.error_reply('POP takes at most 1000 jobs of each kind')
end
-- given: each candidate's id, and the index of its key in KEYS (its corrupt key follows)
local given = {}
local first_key = JOB + 2 * n_finish + n_start + n_given
local first_id = 11 + 3 * n_finish + 2 * n_start + n_given
for j = 0, tonumber(ARGV[1]) - 1 do given[ARGV[first_id + j]] = first_key + 2 * j end
local more = false  -- a job found that is not a candidate: the next call is due at once
local function mine(ids)
  local kept = {}
  for _, id in ipairs(ids) do
    if given[id] then kept[#kept + 1] = id else more = true end
  end
  return kept
end
local now = now_ms()
local lost = finish_and_start(worker, ARGV[6], 11, n_finish, n_start, n_given, now)
local sched_at = head(SCHED)
if sched_at and sched_at <= now then
  local due = mine(redis.call('ZRANGEBYSCORE', SCHED, '-inf', now, 'LIMIT', 0, 1000))
  zrem_all(SCHED, due)
  for _, id in ipairs(due) do make_ready(KEYS[given[id]], id) end
  sched_at = head(SCHED)
end
local run_at = head(RUN)
if run_at and run_at <= now then
  for _, id in ipairs(mine(redis.call('ZRANGEBYSCORE', RUN, '-inf', now, 'LIMIT', 0, 100))) do
    redis.call('ZREM', RUN, id)
    local key = KEYS[given[id]]
    local ok, f = pcall(redis.call, 'HMGET', key, F.attempts, F.lease, F.started_lease, F.task,
                        F.cancel, F.failures, F.meta, F.max_attempts, F.permit)
    if ok then free_permit(key, id, f[9]) end
    -- the job's own max_attempts beats its task's (noted at its start), which beats the queue's
    local max, corrupt = ok and f[8] and tonumber(f[8]), nil
    if max == nil and ok and f[8] or max and (max < 1 or max ~= math.floor(max) or max == math.huge)
    then
      corrupt = 'The job\\'s field ' .. F.max_attempts .. ' (its task\\'s max_attempts) is not a '
        .. 'whole number >= 1.'
    end
    max = max or max_attempts
    if ok and f[7] and string.find(f[7], '"max_attempts"', 1, true) then
      local decoded, meta = pcall(cjson.decode, f[7])
      local own = decoded and type(meta) == 'table' and meta.max_attempts
      if type(own) == 'number' and own >= 1 and own == math.floor(own) then
        max = own
      elseif own ~= nil and own ~= false and own ~= cjson.null then
        corrupt = 'The job\\'s max_attempts option (in its metadata) is not a whole number >= 1.'
      end
    end
    if ok and num(f[6], 0) == nil then
      corrupt = 'The job\\'s failures (field ' .. F.failures .. ') is not a number: '
        .. string.sub(f[6], 1, 40)
    end
    if not ok then
      local aside = KEYS[given[id] + 1]
      bury(key, id, now, 'The job in Redis is not a hash; it was set aside as ' .. aside .. '.',
        aside)
    elseif not f[4] then
      bury(key, id, now, 'The job\\'s data was missing from Redis when its lease ran out.', false)
    elseif corrupt then  -- set aside alone, with the reason
      bury(key, id, now, corrupt, false)
    elseif f[5] then  -- asked to stop, and its worker is gone (or hung): never run again
      bury_cancelled(key, id, now, f[5], '; its lease ran out before its worker stopped it')
    elseif next_run(key) then  -- a follow-up was asked for while it ran: it runs instead
      run_next(key, id, next_run(key), now)
    else
      local started = f[2] and f[2] == f[3]
      redis.call('HDEL', key, F.lease, F.worker, F.started_lease)
      local a, failed = num(f[1], 0) or max, (num(f[6], 0) or 0) + 1
      if started then  -- a failed attempt: its worker never told how it ended
        local err = 'Attempt ' .. a .. ' (failure ' .. failed .. ' of ' .. max .. ') ended '
          .. 'without an outcome: its lease ran out (its worker died, was killed or hung '
          .. 'while running it).'
        local by = string.gsub(string.match(f[2], '^(.*)#') or f[2], '[^%w%-%.:_]', '?')
        redis.call('HSET', key, F.error_class, '', F.traceback, '', F.error, err,
                   F.failures, failed, F.reason, 'retry ' .. failed .. ' (lease ran out)')
        add_error(key, '{"e":"' .. err .. '","w":"' .. by .. '"}')
      end
      if started and failed >= max then
        redis.call('HSET', key, F.state, S.dead, F.finished, now)
        redis.call('ZADD', DEAD, now, id)
        ended(key, id, S.dead, now, 'its lease ran out')
      else
        make_ready(key, id)
      end
    end
  end
  run_at = head(RUN)
end
local rate_at = rate_parked_due(now)  -- (those whose rate allows them now: ready again)
local reply = {-1, lost}
local paused = paused_now(lost)
if paused['*'] then count = -1 end  -- the whole queue is paused: its ready jobs wait
if count > 0 then
  -- Read and check the candidates first; then lease the good ones and bury the bad ones.
  local head_ids, ids, leased, bad, expired = redis.call('ZRANGE', READY, 0, count - 1), {}, {},
                                              {}, {}
  -- what admit counts: concurrency keys' permits, rate keys' windows, what it parks
  local c = {out = {}, win = {}, taken_back = {}, parking = {}, paused = paused, now = now}
  local holding, stamps = {}, {}
  for _, id in ipairs(head_ids) do
    if not given[id] then  -- came since PEEK: it waits for the next call (in order)
      more = true
      break
    end
    ids[#ids + 1] = id
    local key = KEYS[given[id]]
    local ok, f = pcall(redis.call, 'HMGET', key, F.task, F.args, F.kwargs, F.meta, F.priority,
                        F.due, F.enqueued, F.workers, F.attempts, F.failures, F.dependants)
    local err = nil
    if not ok then
      err = 'The job in Redis is not a hash; it was set aside as ' .. KEYS[given[id] + 1] .. '.'
    elseif not f[1] and not f[2] then
      err = 'The job\\'s data is missing from Redis (its id was ready without its hash).'
    elseif not f[1] or f[1] == '' then
      err = 'The job has no task (field ' .. F.task .. ' is missing).'
    elseif not f[2] then
      err = 'The job has no arguments (field ' .. F.args .. ' is missing).'
    else
      for _, p in ipairs({{5, F.priority, 'priority'}, {6, F.due, 'due time'},
                          {7, F.enqueued, 'enqueue time'}, {9, F.attempts, 'attempts'},
                          {10, F.failures, 'failures'}}) do
        if num(f[p[1]], 0) == nil then
          err = 'The job\\'s ' .. p[3] .. ' (field ' .. p[2] .. ') is not a number: '
            .. string.sub(f[p[1]], 1, 40)
          break
        end
      end
    end
    local x = not err and expires_ms(f[4])
    if x == nil then
      err = 'The job\\'s expiry (metadata "expires") is not a number of seconds > 0.'
    end
    local lim, rl = not err and limit_of(f[4]), not err and rate_of(f[4])
    if lim == nil or rl == nil then
      err = 'The job\\'s concurrency or rate limit (metadata "concurrency", "rate_limit") is '
        .. 'malformed.'
    end
    local late = not err and x and now > num(f[6], 0) + x  -- not started in time: never
    local admitted = not err and not late and (lim or rl or c.paused[f[1]])
      and admit(key, id, f[1], lim, rl, c)
    if err then
      bad[#bad + 1] = {key, id, err, not ok and KEYS[given[id] + 1]}
    elseif late then
      expired[#expired + 1] = {key, id}
    elseif admitted ~= false then  -- (false: parked by admit)
      leased[#leased + 1] = {key, id, f, admitted and admitted[1], admitted and admitted[2]}
    end
  end
  zrem_all(READY, ids)
  if next(c.out) or next(c.win) or #c.parking > 0 then limit_sets_checked(reply[2]) end
  if #c.taken_back > 0 then take_back(c.taken_back, reply[2]) end
  park_all(c.parking)
  for _, p in ipairs(c.parking) do  -- parked until their rate allows: the wait counts them
    if p[5] and (not rate_at or p[5] < rate_at) then rate_at = p[5] end
  end
  for _, b in ipairs(bad) do bury(b[1], b[2], now, b[3], b[4]) end
  for _, e in ipairs(expired) do bury_expired(e[1], e[2], now) end
  local expiries = {}
  for _, job in ipairs(leased) do
    local key, id, f = job[1], job[2], job[3]
    local attempt = num(f[9], 0) + 1
    local token = worker .. '#' .. attempt
    local workers = with_worker(f[8], worker)
    if charge then
      redis.call('HSET', key, F.state, S.running, F.attempts, attempt, F.lease, token,
        F.started_lease, token, F.worker, worker, F.started, now, F.workers, workers)
    else
      redis.call('HSET', key, F.state, S.running, F.lease, token, F.worker, worker)
    end
    if job[4] then
      redis.call('HSET', key, F.permit, job[4])
      holding[#holding + 1] = 0
      holding[#holding + 1] = job[4] .. '\\0' .. id
    end
    if job[5] then  -- (leased ahead: its START moves the start to when it really starts)
      stamps[#stamps + 1] = job[5]
      stamps[#stamps + 1] = id
      if not charge then
        redis.call('HSET', key, F.stamp, job[5] .. '\\0' .. string.format('%015d', now) .. id)
      end
    end
    expiries[#expiries + 1] = now + lease
    expiries[#expiries + 1] = id
    for _, v in ipairs({id, f[1], f[2], f[3] or '', f[4] or '', attempt, f[5] or '0',
                        f[6] or '0', f[7] or '0', workers, f[10] or '0', f[11] or ''}) do
      reply[#reply + 1] = v
    end
  end
  if #holding > 0 then zadd_all(HELD, holding) end
  if next(c.win) then stamp_starts(stamps, c.win, now) end
  if #expiries > 0 then
    zadd_all(RUN, expiries)
    if not run_at or now + lease < run_at then run_at = now + lease end
  end
  if #head_ids < count then count = -1 end  -- the ready set is empty now
end
if more or (count >= 0 and redis.call('ZCARD', READY) > 0) then
  reply[1] = 0
else
  local soonest = nil
  for _, t in ipairs({sched_at or false, run_at or false, rate_at or false}) do
    if t and (not soonest or t < soonest) then soonest = t end
  end
  if soonest then reply[1] = math.max(0, soonest - now) end
end
if OUTBOXED then table.insert(reply[2], '{outbox}') end
return reply
""",
)

# KEYS: as POP's, without candidates. ARGV[1] worker  ARGV[2] result TTL ms  ARGV[3] how
# many jobs to finish  ARGV[4] how many jobs to start  ARGV[5] how many of their dependants
# are given (at most 1000 of each), then per job to finish 3 values: id, lease token, return
# value (JSON; "" to keep no result), then per job to start 2 values: id, lease token, then
# the dependants' ids.
# What a worker sends, not waiting for the reply, as it starts a job leased ahead: the jobs
# finished before it are acknowledged, and its attempt is charged, unless it expired since
# it was leased: then it is buried "expired". Returns the ids whose lease had been lost,
# "{outbox}" when something was left in the outbox for the worker to deliver, and
# "{expired}<id>" for each job buried so (the worker that waits for it does not run it).
START = script(
    "start",
    """
local n_finish, n_start, n_given = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
if n_finish > 1000 or n_start > 1000 or n_given > 1000 then
  return redis.error_reply('START takes at most 1000 jobs of each kind')
end
local lost = finish_and_start(ARGV[1], ARGV[2], 6, n_finish, n_start, n_given, now_ms())
if OUTBOXED then lost[#lost + 1] = '{outbox}' end
return lost
""",
)
