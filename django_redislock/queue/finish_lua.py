"""The Lua piece that ends and starts leased jobs, ``finish_and_start``: what a worker's
START sends as a job leased ahead starts (with the jobs finished before it), and what POP
does first. The last piece of the queue scripts' prelude (``lua``): it uses the others.

A job leased ahead (charge "0") took its concurrency key's permit and its rate key's start
when it was leased (as a job that starts at once does); its start is noted again here, at
the moment it really starts (``F.stamp``): the window then holds the real starts, which
come later than the leases, and never lets more than the rate start within one period.
A job of a queue or task paused since it was leased ahead runs all the same (its worker did
not wait for the reply); the reply says "{paused}", and its worker gives the others back."""

from __future__ import annotations

FINISH = """
-- Finish the ``n_finish`` leased jobs described from ARGV[at] (id, lease token, return value
-- as JSON or "" to keep none: deleted, or kept as its result key for ``ttl`` ms and indexed
-- in the done set, the last key; their job and result keys from KEYS[JOB]), then charge the
-- attempt of the ``n_start`` jobs described after them (id, lease token; their job keys
-- after those) that start now; one of them found expired since it was leased ahead is
-- buried "expired" instead, uncharged (the expired counter is the key before the done set).
-- The ``n_given`` ids after them (their keys after those) are dependants of the finished
-- jobs, in this queue, told here that their dependency ended (``depend_lua``).
-- Reads every lease before its first write. Returns the ids whose lease had been lost,
-- "{expired}<id>" for each job buried as expired, and "{paused}" for a job that starts
-- though its queue or task was paused since it was leased ahead (ids never hold braces).
local function finish_and_start(worker, ttl, at, n_finish, n_start, n_given, now)
  local lost, finished, finishing, starting, done, expired = {}, {}, {}, {}, {}, {}
  local given_id, given_key = at + 3 * n_finish + 2 * n_start, JOB + 2 * n_finish + n_start
  for g = 0, n_given - 1 do GIVEN[ARGV[given_id + g]] = given_key + g end
  for n = 0, n_finish - 1 do
    local i, k = at + 3 * n, JOB + 2 * n
    local ok, l = pcall(redis.call, 'HMGET', KEYS[k], F.lease, F.permit, F.dependants, F.joined)
    if ok and l[1] == ARGV[i + 1] then
      finishing[#finishing + 1] = {i, k, l[2], (l[3] or l[4]) and {l[3], l[4]}}
    else
      lost[#lost + 1] = ARGV[i]
    end
  end
  local reads = {}
  for n = 0, n_start - 1 do
    local i, key = at + 3 * n_finish + 2 * n, KEYS[JOB + 2 * n_finish + n]
    local ok, f = pcall(redis.call, 'HMGET', key, F.lease, F.started_lease, F.attempts, F.workers,
                        F.due, F.meta, F.permit, F.stamp, F.task)
    reads[#reads + 1] = {i, key, ok and f[1] == ARGV[i + 1] and f}
  end
  for _, job in ipairs(finishing) do
    local i, key, result = job[1], KEYS[job[2]], KEYS[job[2] + 1]
    local follow = next_run(key)
    finished[#finished + 1] = ARGV[i]
    free_permit(key, ARGV[i], job[3])
    if job[4] then ended(key, ARGV[i], S.done, now, nil, job[4]) end
    if ARGV[i + 2] == '' then
      redis.call('DEL', key)
    else
      redis.call('RENAME', key, result)
      redis.call('HSET', result, F.state, S.done, F.result, ARGV[i + 2], F.finished, now,
                 F.lease, '')
      if follow then
        redis.call('HDEL', result, F.next_task, F.next_args, F.next_kwargs, F.next_meta,
                   F.next_priority, F.next_due, F.next_enqueued)
      end
      redis.call('PEXPIRE', result, ttl)
      done[#done + 1] = now
      done[#done + 1] = ARGV[i]
    end
    if follow then run_next(key, ARGV[i], follow, now) end
  end
  -- Which may start: not expired since leased ahead; their rate starts moved to now.
  local paused = n_start > 0 and paused_now(lost)
  for _, r in ipairs(reads) do
    local i, key, f = r[1], r[2], r[3]
    if not f then
      lost[#lost + 1] = ARGV[i]
    elseif f[2] ~= f[1] then  -- (started under this lease already: nothing to do)
      local x = expires_ms(f[6])
      if x and now > (num(f[5], 0) or 0) + x then  -- expired since: never started
        expired[#expired + 1] = {key, ARGV[i], f[7], f[8]}
        lost[#lost + 1] = '{expired}' .. ARGV[i]
      else
        starting[#starting + 1] = {key, f[3], f[4], ARGV[i], f[8]}
        if paused and (paused['*'] or paused[f[9]]) then lost[#lost + 1] = '{paused}' end
      end
    end
  end
  for _, e in ipairs(expired) do
    free_permit(e[1], e[2], e[3])
    unstamp(e[1], e[4])
    bury_expired(e[1], e[2], now)
    finished[#finished + 1] = e[2]
  end
  if #finished > 0 then zrem_all(RUN, finished) end
  if #done > 0 then
    local index = KEYS[#KEYS]
    zadd_all(index, done)
    -- The results older than the TTL have expired: their entries go, oldest first, at most
    -- a thousand more than were added, so the index never outgrows what Redis keeps.
    local old = redis.call('ZCOUNT', index, '-inf', string.format('(%.0f', now - ttl))
    if old > 0 then redis.call('ZREMRANGEBYRANK', index, 0, math.min(old, 1000 + #done / 2) - 1) end
  end
  for _, s in ipairs(starting) do
    local ws, attempt = with_worker(s[3], worker), (num(s[2], 0) or 0) + 1
    redis.call('HSET', s[1], F.attempts, attempt, F.started_lease, worker .. '#' .. attempt,
               F.started, now, F.workers, ws)
    if s[5] then restamp(s[1], s[4], s[5], now) end
  end
  return lost
end
"""
