"""The job queue's Lua scripts, one constant each, with what KEYS, ARGV and the reply are.

Key layout of one queue (``base`` = ``<prefix>:{Q:<queue>}:``, one hash tag per queue, so
every script runs on Redis Cluster):

    base j:<id>   hash  a job: p payload (JSON), pr priority, a attempts, s state
                        (r ready, s scheduled, x running, d dead), sc due (epoch ms),
                        e enqueued (epoch ms), st last started (epoch ms), ws the workers
                        of each attempt (comma-separated), l lease token, w worker,
                        err last error, ec its exception class path, tb its traceback,
                        f finished (epoch ms; dead or done)
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

-- Put job ``id`` (whose hash exists) on the ready set, behind its priority's earlier jobs.
local function make_ready(base, id)
  local key = base .. 'j:' .. id
  local pr = tonumber(redis.call('HGET', key, 'pr') or '0')
  local seq = redis.call('INCR', base .. 'seq')
  redis.call('ZADD', base .. 'ready', (100 - pr) * 1099511627776 + seq, id)
  redis.call('HSET', key, 's', 'r')
end

local function wake(base, n)
  for _ = 1, math.min(n, 64) do redis.call('RPUSH', base .. 'wake', 1) end
  redis.call('LTRIM', base .. 'wake', -64, -1)
end
"""

# ARGV[1] base  ARGV[2] replace "0"/"1"  ARGV[3] a schedule entry's name, or ""  ARGV[4] its
# tick (epoch ms)  then per job 4 values: id, payload, priority, due (epoch ms, or a negative
# number of ms from now; 0 = now)
# With an entry name, the jobs are enqueued only if the tick is later than the last tick
# claimed for that entry (``base tick:<name>``), which then becomes this one: the claim and
# the enqueue are one step, so a tick is enqueued once however many schedulers race.
# Returns per job three values: 1 added, 2 replaced or 0 kept (already pending; or running,
# never replaced); the due time (epoch ms) as stored; the state letter as stored.
ENQUEUE = _script(
    "enqueue",
    _COMMON
    + """
local base, replace = ARGV[1], ARGV[2] == '1'
if ARGV[3] ~= '' then
  local claim = base .. 'tick:' .. ARGV[3]
  if tonumber(redis.call('GET', claim) or '0') >= tonumber(ARGV[4]) then return {} end
  redis.call('SET', claim, ARGV[4])
end
local now = now_ms()
local results, woken = {}, 0
local first = redis.call('ZRANGE', base .. 'sched', 0, 0, 'WITHSCORES')[2]
for i = 5, #ARGV, 4 do
  local id, payload, pr, due = ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3])
  if due <= 0 then due = now - due end
  local key = base .. 'j:' .. id
  local state = redis.call('HGET', key, 's')
  local result = 1
  if state == 'x' or (state and state ~= 'd' and not replace) then
    result = 0
    due = tonumber(redis.call('HGET', key, 'sc'))
  else
    if state then
      result = state == 'd' and 1 or 2
      redis.call('ZREM', base .. 'ready', id)
      redis.call('ZREM', base .. 'sched', id)
      redis.call('ZREM', base .. 'dead', id)
      redis.call('DEL', key)
    end
    state = 'r'
    redis.call('HSET', key, 'p', payload, 'pr', pr, 'a', 0, 'sc', due, 'e', now)
    if due <= now then
      make_ready(base, id)
      woken = woken + 1
    else
      redis.call('ZADD', base .. 'sched', due, id)
      redis.call('HSET', key, 's', 's')
      state = 's'
      if not first or due < tonumber(first) then
        first = due
        woken = math.max(woken, 1)  -- a sleeping worker must shorten its wait
      end
    end
  end
  results[#results + 1] = result
  results[#results + 1] = due
  results[#results + 1] = state
end
if woken > 0 then wake(base, woken) end
return results
""",
)

# ARGV[1] base  ARGV[2] how many to lease  ARGV[3] lease ms  ARGV[4] worker id
# ARGV[5] max attempts
# Moves due scheduled jobs to ready, takes back expired leases (to ready, or to dead once
# out of attempts), then leases up to ARGV[2] ready jobs, highest priority first.
# Returns {ms until the next due job or lease expiry (-1: none), then per job 8 values: id,
# payload, attempts, priority, due, lease token, enqueued, workers (ws)}.
POP = _script(
    "pop",
    _COMMON
    + """
local base, count, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local worker, max_attempts = ARGV[4], tonumber(ARGV[5])
local now = now_ms()
for _, id in ipairs(redis.call('ZRANGEBYSCORE', base .. 'sched', '-inf', now, 'LIMIT', 0, 1000)) do
  redis.call('ZREM', base .. 'sched', id)
  make_ready(base, id)
end
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
local reply = {-1}
if count > 0 then
  local popped = redis.call('ZPOPMIN', base .. 'ready', count)
  for i = 1, #popped, 2 do
    local id = popped[i]
    local key = base .. 'j:' .. id
    local attempts = redis.call('HINCRBY', key, 'a', 1)
    local token = worker .. '#' .. attempts
    local f = redis.call('HMGET', key, 'p', 'pr', 'sc', 'e', 'ws')
    local workers = f[5] and (f[5] .. ',' .. worker) or worker
    redis.call('HSET', key, 's', 'x', 'l', token, 'w', worker, 'st', now, 'ws', workers)
    redis.call('ZADD', base .. 'run', now + lease, id)
    for _, v in ipairs({id, f[1], attempts, f[2], f[3], token, f[4], workers}) do
      reply[#reply + 1] = v
    end
  end
end
local next_at = nil
for _, set in ipairs({'sched', 'run'}) do
  local head = redis.call('ZRANGE', base .. set, 0, 0, 'WITHSCORES')[2]
  if head and (not next_at or tonumber(head) < next_at) then next_at = tonumber(head) end
end
if redis.call('ZCARD', base .. 'ready') > 0 then
  reply[1] = 0
elseif next_at then
  reply[1] = math.max(0, next_at - now)
end
return reply
""",
)

# ARGV[1] base  ARGV[2] id  ARGV[3] lease token  ARGV[4] "1" to keep a result  ARGV[5] the
# return value (JSON)  ARGV[6] result TTL ms
# Finishes a leased job: deletes it, or keeps its record as ``result:<id>`` (with the return
# value) for the TTL. 1, or 0 if the lease was lost.
ACK = _script(
    "ack",
    _COMMON
    + """
local base, id = ARGV[1], ARGV[2]
local key = base .. 'j:' .. id
if redis.call('HGET', key, 'l') ~= ARGV[3] then return 0 end
redis.call('ZREM', base .. 'run', id)
if ARGV[4] == '1' then
  local result = base .. 'result:' .. id
  redis.call('RENAME', key, result)
  redis.call('HDEL', result, 'l', 'w')
  redis.call('HSET', result, 's', 'k', 'v', ARGV[5], 'f', now_ms())
  redis.call('PEXPIRE', result, ARGV[6])
else
  redis.call('DEL', key)
end
return 1
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
