"""The job queue's Lua scripts, one constant each, with what KEYS, ARGV and the reply are.

Key layout of one queue (``base`` = ``<prefix>:{Q:<queue>}:``, one hash tag per queue, so
every script runs on Redis Cluster):

    base j:<id>   hash  a job: t task (dotted path), ar args (JSON), kw kwargs (JSON; absent:
                        none), pr priority (absent: 0), a attempts (absent: 0), s state
                        (r ready, s scheduled, x running, d dead), sc due (epoch ms),
                        e enqueued (epoch ms), st last started (epoch ms), ws the workers
                        of each attempt (comma-separated), l lease token, w worker,
                        err last error, ec its exception class path, tb its traceback,
                        f finished (epoch ms; dead or done). Short fields keep a job's hash
                        in Redis's compact encoding (values up to 64 bytes).
    base result:<id> hash  a finished job kept for RESULT_TTL: the job's hash, renamed,
                        with s k (done) and v its return value (JSON)
    base ready    zset  ready ids; score (100 - priority) * 2^40 + arrival number
    base sched    zset  scheduled ids; score = due (epoch ms)
    base run      zset  leased ids; score = lease expiry (epoch ms)
    base dead     zset  dead ids; score = when they died (epoch ms)
    base seq      string arrival counter (FIFO within a priority)
    base wake     list  wake-up tokens: a worker blocks on it (BLPOP) when idle
    base tick:<name> string  the last tick (epoch ms) enqueued for a SCHEDULE entry

Times come from the Redis server's clock (TIME), so workers and web processes with skewed
clocks still agree on what is due.
"""

from __future__ import annotations

from .scripts import _script

_COMMON = """
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local BAND = 1099511627776  -- 2^40: the ready score of priority p is (100 - p) * BAND + seq

-- Put job ``id`` (whose hash exists) on the ready set, behind its priority's earlier jobs.
local function make_ready(base, id)
  local key = base .. 'j:' .. id
  local pr = tonumber(redis.call('HGET', key, 'pr') or '0')
  local seq = redis.call('INCR', base .. 'seq')
  redis.call('ZADD', base .. 'ready', (100 - pr) * BAND + seq, id)
  redis.call('HSET', key, 's', 'r')
end

-- Leave ``n`` wake-up tokens for the workers blocked on the queue. Past 128 tokens (no
-- worker is taking them) the list is cut back to 64: one LTRIM per 64 wake-ups at most.
local function wake(base, n)
  local tokens = {}
  for i = 1, math.min(n, 64) do tokens[i] = 1 end
  if redis.call('RPUSH', base .. 'wake', unpack(tokens)) > 128 then
    redis.call('LTRIM', base .. 'wake', -64, -1)
  end
end

-- The score of the first member of a sorted set, or nil.
local function head(key)
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return first[2] and tonumber(first[2])
end
"""

# ARGV[1] base  ARGV[2] replace "0"/"1"  ARGV[3] a schedule entry's name, or ""  ARGV[4] its
# tick (epoch ms)  ARGV[5] "1" when every id is new (generated), so none is looked up
# then per job 6 values: id, task, args (JSON), kwargs (JSON, "" for none), priority, due
# (epoch ms, or a negative number of ms from now; 0 = now)
# With an entry name, the jobs are enqueued only if the tick is later than the last tick
# claimed for that entry (``base tick:<name>``), which then becomes this one: the claim and
# the enqueue are one step, so a tick is enqueued once however many schedulers race.
# Returns per job three values: 1 added, 2 replaced or 0 kept (already pending; or running,
# never replaced); the due time (epoch ms) as stored; the state letter as stored.
ENQUEUE = _script(
    "enqueue",
    _COMMON
    + """
local base, replace, fresh = ARGV[1], ARGV[2] == '1', ARGV[5] == '1'
if ARGV[3] ~= '' then
  local claim = base .. 'tick:' .. ARGV[3]
  if tonumber(redis.call('GET', claim) or '0') >= tonumber(ARGV[4]) then return {} end
  redis.call('SET', claim, ARGV[4])
end
local now, count = now_ms(), (#ARGV - 5) / 6
local seq = redis.call('INCRBY', base .. 'seq', count) - count
local sets = {r = 'ready', s = 'sched', d = 'dead'}
local results, woken, first = {}, 0, false  -- first: the head of sched, read when needed
local ready = {}  -- score, id, ...: added in one ZADD when every id is new
local jobs = base .. 'j:'
for i = 6, #ARGV, 6 do
  local id, pr, due = ARGV[i], tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5])
  if due <= 0 then due = now - due end
  local key = jobs .. id
  local state = nil
  if not fresh then state = redis.call('HGET', key, 's') end
  local result = 1
  if state == 'x' or (state and state ~= 'd' and not replace) then
    result = 0
    due = tonumber(redis.call('HGET', key, 'sc'))
  else
    if state then
      result = state == 'd' and 1 or 2
      if sets[state] then redis.call('ZREM', base .. sets[state], id) end
      redis.call('DEL', key)
    end
    if due <= now then
      state = 'r'
      seq = seq + 1
      if fresh then
        ready[#ready + 1] = (100 - pr) * BAND + seq
        ready[#ready + 1] = id
        if #ready == 1000 then
          redis.call('ZADD', base .. 'ready', unpack(ready))
          ready = {}
        end
      else
        redis.call('ZADD', base .. 'ready', (100 - pr) * BAND + seq, id)
      end
      woken = woken + 1
    else
      state = 's'
      redis.call('ZADD', base .. 'sched', due, id)
      if first == false then first = head(base .. 'sched') end
      if first == nil or due <= first then
        first = due
        woken = math.max(woken, 1)  -- a sleeping worker must shorten its wait
      end
    end
    if ARGV[i + 3] == '' and pr == 0 then  -- no kwargs, priority 0: the usual job
      redis.call('HSET', key, 't', ARGV[i + 1], 'ar', ARGV[i + 2], 's', state, 'sc', due,
                 'e', now)
    else
      local hset = {'HSET', key, 't', ARGV[i + 1], 'ar', ARGV[i + 2], 's', state, 'sc', due,
                    'e', now}
      if ARGV[i + 3] ~= '' then hset[#hset + 1] = 'kw'; hset[#hset + 1] = ARGV[i + 3] end
      if pr ~= 0 then hset[#hset + 1] = 'pr'; hset[#hset + 1] = pr end
      redis.call(unpack(hset))
    end
  end
  results[#results + 1] = result
  results[#results + 1] = due
  results[#results + 1] = state
end
if #ready > 0 then redis.call('ZADD', base .. 'ready', unpack(ready)) end
if woken > 0 then wake(base, woken) end
return results
""",
)

# ARGV[1] base  ARGV[2] how many to lease  ARGV[3] lease ms  ARGV[4] worker id
# ARGV[5] max attempts  ARGV[6] result TTL ms  ARGV[7] how many jobs to finish first, then
# per job to finish 3 values: id, lease token, return value (JSON; "" to keep no result)
# Finishes the given leased jobs (deleted, or kept as ``result:<id>`` with the value for the
# TTL), moves due scheduled jobs to ready, takes back expired leases (to ready, or to dead
# once out of attempts), then leases up to ARGV[2] ready jobs, highest priority first.
# Returns {ms until the next due job or lease expiry (0: more are ready, -1: none), the ids
# among the finished whose lease had been lost, then per leased job 9 values: id, task,
# args, kwargs, attempts, priority, due, enqueued, workers (ws)}.
POP = _script(
    "pop",
    _COMMON
    + """
local base, count, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local worker, max_attempts = ARGV[4], tonumber(ARGV[5])
local now = now_ms()
local lost, finished = {}, {}
for i = 8, 7 + 3 * tonumber(ARGV[7]), 3 do
  local id, value = ARGV[i], ARGV[i + 2]
  local key = base .. 'j:' .. id
  if redis.call('HGET', key, 'l') ~= ARGV[i + 1] then
    lost[#lost + 1] = id
  else
    finished[#finished + 1] = id
    if value == '' then
      redis.call('DEL', key)
    else
      local result = base .. 'result:' .. id
      redis.call('RENAME', key, result)
      redis.call('HSET', result, 's', 'k', 'v', value, 'f', now, 'l', '')
      redis.call('PEXPIRE', result, ARGV[6])
    end
  end
end
if #finished > 0 then redis.call('ZREM', base .. 'run', unpack(finished)) end
local sched_at = head(base .. 'sched')
if sched_at and sched_at <= now then
  local due = redis.call('ZRANGEBYSCORE', base .. 'sched', '-inf', now, 'LIMIT', 0, 1000)
  redis.call('ZREM', base .. 'sched', unpack(due))
  for _, id in ipairs(due) do make_ready(base, id) end
  sched_at = head(base .. 'sched')
end
local run_at = head(base .. 'run')
if run_at and run_at <= now then
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', base .. 'run', '-inf', now, 'LIMIT', 0, 100)) do
    redis.call('ZREM', base .. 'run', id)
    local key = base .. 'j:' .. id
    redis.call('HDEL', key, 'l', 'w')
    if tonumber(redis.call('HGET', key, 'a') or '0') >= max_attempts then
      redis.call('HSET', key, 's', 'd', 'f', now, 'ec', '', 'tb', '', 'err',
        'The lease ran out ' .. max_attempts .. ' times: its worker died or hung each time.')
      redis.call('ZADD', base .. 'dead', now, id)
    else
      make_ready(base, id)
    end
  end
  run_at = head(base .. 'run')
end
local reply = {-1, lost}
if count > 0 then
  local popped, leased = redis.call('ZPOPMIN', base .. 'ready', count), {}
  for i = 1, #popped, 2 do
    local id = popped[i]
    local key = base .. 'j:' .. id
    local f = redis.call('HMGET', key, 't', 'ar', 'kw', 'pr', 'sc', 'e', 'ws', 'a')
    local attempts = tonumber(f[8] or '0') + 1
    local workers = f[7] and (f[7] .. ',' .. worker) or worker
    redis.call('HSET', key, 's', 'x', 'a', attempts, 'l', worker .. '#' .. attempts,
      'w', worker, 'st', now, 'ws', workers)
    leased[#leased + 1] = now + lease
    leased[#leased + 1] = id
    for _, v in ipairs({id, f[1] or '', f[2] or '', f[3] or '', attempts, f[4] or '0',
                        f[5] or '0', f[6] or '0', workers}) do
      reply[#reply + 1] = v
    end
  end
  if #leased > 0 then
    redis.call('ZADD', base .. 'run', unpack(leased))
    if not run_at or now + lease < run_at then run_at = now + lease end
  end
  if #popped < 2 * count then count = -1 end  -- the ready set is empty now
end
if count >= 0 and redis.call('ZCARD', base .. 'ready') > 0 then
  reply[1] = 0
elseif sched_at or run_at then
  reply[1] = math.max(0, math.min(sched_at or run_at, run_at or sched_at) - now)
end
return reply
""",
)

# ARGV[1] base  then pairs of id, lease token
# Gives back leased jobs that never started (a worker's prefetched jobs, when it stops or
# one of its jobs runs long): ready again at the front of their priority, in their order,
# the attempt not counted. Returns how many it gave back.
RELEASE = _script(
    "release",
    _COMMON
    + """
local base, n, given = ARGV[1], (#ARGV - 1) / 2, 0
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  local key = base .. 'j:' .. id
  local f = redis.call('HMGET', key, 'l', 'pr', 'a', 'ws')
  if f[1] == ARGV[i + 1] then
    redis.call('ZREM', base .. 'run', id)
    redis.call('HDEL', key, 'l', 'w', 'st')
    local ws = f[4] and string.match(f[4], '^(.*),[^,]*$')
    if ws then redis.call('HSET', key, 'ws', ws) else redis.call('HDEL', key, 'ws') end
    redis.call('HSET', key, 's', 'r', 'a', math.max(0, tonumber(f[3] or '1') - 1))
    local pr = tonumber(f[2] or '0')
    redis.call('ZADD', base .. 'ready', (100 - pr) * BAND - n + (i - 2) / 2, id)
    given = given + 1
  end
end
if given > 0 then wake(base, given) end
return given
""",
)

# ARGV[1] base  ARGV[2] id  ARGV[3] lease token  ARGV[4] delay ms (-1: to the dead set)
# ARGV[5] error  ARGV[6] traceback  ARGV[7] exception class path
# Gives a leased job back: scheduled again after the delay, or dead. 1, or 0 if the lease
# was lost (another worker may have it by now).
SETTLE = _script(
    "settle",
    _COMMON
    + """
local base, id, delay = ARGV[1], ARGV[2], tonumber(ARGV[4])
local key = base .. 'j:' .. id
if redis.call('HGET', key, 'l') ~= ARGV[3] then return 0 end
redis.call('ZREM', base .. 'run', id)
redis.call('HDEL', key, 'l', 'w')
redis.call('HSET', key, 'err', ARGV[5], 'tb', ARGV[6], 'ec', ARGV[7])
local now = now_ms()
if delay < 0 then
  redis.call('HSET', key, 's', 'd', 'f', now)
  redis.call('ZADD', base .. 'dead', now, id)
elseif delay == 0 then
  redis.call('HSET', key, 'sc', now)
  make_ready(base, id)
  wake(base, 1)
else
  redis.call('HSET', key, 's', 's', 'sc', now + delay)
  redis.call('ZADD', base .. 'sched', now + delay, id)
  wake(base, 1)
end
return 1
""",
)

# ARGV[1] base  ARGV[2] lease ms  then pairs of id, lease token
# Renews the leases still held; returns the ids whose lease was lost.
RENEW = _script(
    "renew",
    _COMMON
    + """
local base, lease = ARGV[1], tonumber(ARGV[2])
local now, lost = now_ms(), {}
for i = 3, #ARGV, 2 do
  local id = ARGV[i]
  if redis.call('HGET', base .. 'j:' .. id, 'l') == ARGV[i + 1] then
    redis.call('ZADD', base .. 'run', 'XX', now + lease, id)
  else
    lost[#lost + 1] = id
  end
end
return lost
""",
)

# ARGV[1] base  ARGV[2] id  ARGV[3] due (epoch ms) it must still have, or ""
# ARGV[4] the states it may be in: "rs" (cancel: ready, scheduled) or "rsd" (delete: also dead)
# Deletes the job. 1, or 0 when missing, running, in another state or since rescheduled.
CANCEL = _script(
    "cancel",
    """
local base, id = ARGV[1], ARGV[2]
local key = base .. 'j:' .. id
local f = redis.call('HMGET', key, 's', 'sc')
local sets = {r = 'ready', s = 'sched', d = 'dead'}
if not f[1] or not sets[f[1]] or not string.find(ARGV[4], f[1], 1, true) then return 0 end
if ARGV[3] ~= '' and f[2] ~= ARGV[3] then return 0 end
redis.call('ZREM', base .. sets[f[1]], id)
redis.call('DEL', key)
return 1
""",
)

# ARGV[1] base  ARGV[2] id
# Makes a scheduled or dead job ready now (a dead one with its attempts reset).
# 1, or 0 when it is missing, already ready or running.
REQUEUE = _script(
    "requeue",
    _COMMON
    + """
local base, id = ARGV[1], ARGV[2]
local key = base .. 'j:' .. id
local state = redis.call('HGET', key, 's')
if state == 's' then
  redis.call('ZREM', base .. 'sched', id)
elseif state == 'd' then
  redis.call('ZREM', base .. 'dead', id)
  redis.call('HSET', key, 'a', 0)
  redis.call('HDEL', key, 'ws', 'f')
else
  return 0
end
redis.call('HSET', key, 'sc', now_ms())
make_ready(base, id)
wake(base, 1)
return 1
""",
)

# ARGV[1] base  ARGV[2] set (ready, sched, run, dead)  ARGV[3] offset  ARGV[4] limit
# ARGV[5] "1" to delete them (purge) instead of listing them
# Lists (or deletes) one page of a state; per job the flat HGETALL of its hash, after its
# id: {id, n, field, value, ...}. A purge returns how many it deleted.
PAGE = _script(
    "page",
    """
local base, set = ARGV[1], ARGV[1] .. ARGV[2]
local first, limit = tonumber(ARGV[3]), tonumber(ARGV[4])
local ids = redis.call('ZRANGE', set, first, first + limit - 1)
if ARGV[5] == '1' then
  for _, id in ipairs(ids) do
    redis.call('ZREM', set, id)
    redis.call('DEL', base .. 'j:' .. id)
  end
  return #ids
end
local reply = {}
for _, id in ipairs(ids) do
  local h = redis.call('HGETALL', base .. 'j:' .. id)
  reply[#reply + 1] = id
  reply[#reply + 1] = #h
  for _, v in ipairs(h) do reply[#reply + 1] = v end
end
return reply
""",
)

# ARGV[1] base
# How long (ms, server clock) the longest-waiting ready job has been due; -1 when none is
# ready. The ready set is ordered by priority first, so its head is not always the oldest:
# the head of each priority band in use is read (at most 201 bands, O(log n) each).
READY_AGE = _script(
    "ready_age",
    _COMMON
    + """
local base, band = ARGV[1], 1099511627776
local ready, oldest, min = base .. 'ready', nil, '-inf'
for _ = 1, 201 do
  local head = redis.call('ZRANGEBYSCORE', ready, min, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #head == 0 then break end
  local due = tonumber(redis.call('HGET', base .. 'j:' .. head[1], 'sc') or '0')
  if not oldest or due < oldest then oldest = due end
  min = string.format('%.0f', (math.floor(tonumber(head[2]) / band) + 1) * band)
end
if not oldest then return -1 end
return math.max(0, now_ms() - oldest)
""",
)
