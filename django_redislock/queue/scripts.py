"""The job queue's Lua scripts, one constant each, with what KEYS, ARGV and the reply are.

Key layout of one queue (``base`` = ``<prefix>:{Q:<queue>}:``, one hash tag per queue, so
every script runs on Redis Cluster):

    base j:<id>   hash  a job: t task (dotted path), ar args (JSON), kw kwargs (JSON; absent:
                        none), m metadata (JSON; absent: none), pr priority (absent: 0),
                        a attempts started (absent: 0), s state (r ready, s scheduled,
                        x running, d dead), sc due (epoch ms), e enqueued (epoch ms),
                        st last started (epoch ms), ws the workers of each started attempt
                        (comma-separated), l lease token, w worker, sl the lease token under
                        which the current attempt was started (charged), err last error,
                        ec its exception class path, tb its traceback, eh every failed
                        attempt's error (one JSON object a line), f finished (epoch ms; dead
                        or done). Short fields keep a job's hash in Redis's compact encoding.
    base result:<id> hash  a finished job kept for RESULT_TTL: the job's hash, renamed,
                        with s k (done) and v its return value (JSON)
    base j:<id>:corrupt  whatever was found at ``j:<id>`` when it was not a hash, set aside
    base ready    zset  ready ids; score (100 - priority) * 2^40 + arrival number
    base sched    zset  scheduled ids; score = due (epoch ms)
    base run      zset  leased ids; score = lease expiry (epoch ms)
    base dead     zset  dead ids; score = when they died (epoch ms)
    base seq      string arrival counter (FIFO within a priority)
    base wake     list  wake-up tokens: a worker blocks on it (BLPOP) when idle
    base tick:<name> string  the last tick (epoch ms) enqueued for a SCHEDULE entry

An attempt is charged (``a`` + 1) when a job starts, not when it is leased: a worker leases
a few jobs ahead, and if it dies only the job it was running has used an attempt. POP
charges the jobs it leases when told they start at once; a worker that leases ahead starts
each job with a POP of count 0 that names it (sent without waiting for the reply).

Every script reads and checks what it needs before its first write, and treats a field it
cannot parse as a bad job (sent to the dead set with the reason), never as a script error:
Redis does not roll back a script that fails half-way. Lists given to ZADD/ZREM go in chunks
(Lua's ``unpack`` has a limit of about 8,000 values).

Times come from the Redis server's clock (TIME), so workers and web processes with skewed
clocks still agree on what is due.
"""

from __future__ import annotations

from ..redis.scripts import _script

# The most jobs one script call takes or returns; callers split larger batches.
MAX_BATCH = 1000

_COMMON = """
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local BAND = 1099511627776  -- 2^40: the ready score of priority p is (100 - p) * BAND + seq

-- A number from a hash field: absent gives the default, anything unparsable gives nil.
local function num(v, default)
  if v == false or v == nil then return default end
  return tonumber(v)
end

-- ZADD score/member pairs and ZREM members, a thousand values per call.
local function zadd_all(key, flat)
  for i = 1, #flat, 1000 do
    redis.call('ZADD', key, unpack(flat, i, math.min(i + 999, #flat)))
  end
end
local function zrem_all(key, ids)
  for i = 1, #ids, 1000 do
    redis.call('ZREM', key, unpack(ids, i, math.min(i + 999, #ids)))
  end
end

-- Put job ``id`` on the ready set, behind its priority's earlier jobs (a priority that is
-- not a number counts as 0: POP then sends the job to the dead set with the reason).
local function make_ready(base, id)
  local key = base .. 'j:' .. id
  local pr = num(redis.call('HGET', key, 'pr'), 0) or 0
  if pr < -100 or pr > 100 then pr = 0 end
  local seq = redis.call('INCR', base .. 'seq')
  redis.call('ZADD', base .. 'ready', (100 - pr) * BAND + seq, id)
  redis.call('HSET', key, 's', 'r')
end

-- Append one failed attempt's error (a JSON object) to the job's error history, keeping
-- the newest 256 KB.
local function add_error(key, entry)
  local history = redis.call('HGET', key, 'eh') or ''
  history = history .. entry .. '\\n'
  while #history > 262144 do
    local cut = string.find(history, '\\n', 1, true)
    history = string.sub(history, cut + 1)
  end
  redis.call('HSET', key, 'eh', history)
end

-- Send job ``id`` to the dead set with ``err``. A key that is not a hash is set aside
-- (renamed to ``j:<id>:corrupt``) so that the dead entry can say why.
local function bury(base, id, now, err, corrupt)
  local key = base .. 'j:' .. id
  if corrupt then redis.call('RENAME', key, key .. ':corrupt') end
  redis.call('HDEL', key, 'l', 'w')
  redis.call('HSET', key, 's', 'd', 'f', now, 'err', err, 'ec', '', 'tb', '')
  redis.call('ZADD', base .. 'dead', now, id)
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

-- Finish the ``n_finish`` leased jobs described from ARGV[at] (id, lease token, return value
-- as JSON or "" to keep none: deleted, or kept as ``result:<id>`` for ``ttl`` ms), then
-- charge the attempt of the ``n_start`` jobs described after them (id, lease token) that
-- start now. Reads and checks every lease before its first write. Returns the ids whose
-- lease had been lost.
local function finish_and_start(base, worker, ttl, at, n_finish, n_start, now)
  local lost, finished, finishing, starting = {}, {}, {}, {}
  for i = at, at - 1 + 3 * n_finish, 3 do
    local ok, l = pcall(redis.call, 'HGET', base .. 'j:' .. ARGV[i], 'l')
    if ok and l == ARGV[i + 1] then finishing[#finishing + 1] = i else lost[#lost + 1] = ARGV[i] end
  end
  for i = at + 3 * n_finish, at - 1 + 3 * n_finish + 2 * n_start, 2 do
    local ok, f = pcall(redis.call, 'HMGET', base .. 'j:' .. ARGV[i], 'l', 'sl', 'a', 'ws')
    if ok and f[1] == ARGV[i + 1] then
      if f[2] ~= f[1] then starting[#starting + 1] = {ARGV[i], f[3], f[4]} end
    else
      lost[#lost + 1] = ARGV[i]
    end
  end
  for _, i in ipairs(finishing) do
    local id, value = ARGV[i], ARGV[i + 2]
    local key = base .. 'j:' .. id
    finished[#finished + 1] = id
    if value == '' then
      redis.call('DEL', key)
    else
      local result = base .. 'result:' .. id
      redis.call('RENAME', key, result)
      redis.call('HSET', result, 's', 'k', 'v', value, 'f', now, 'l', '')
      redis.call('PEXPIRE', result, ttl)
    end
  end
  if #finished > 0 then zrem_all(base .. 'run', finished) end
  for _, s in ipairs(starting) do
    local key, ws = base .. 'j:' .. s[1], s[3] and (s[3] .. ',' .. worker) or worker
    local attempt = (num(s[2], 0) or 0) + 1
    redis.call('HSET', key, 'a', attempt, 'sl', worker .. '#' .. attempt, 'st', now, 'ws', ws)
  end
  return lost
end
"""

# ARGV[1] base  ARGV[2] replace "0"/"1"  ARGV[3] a schedule entry's name, or ""  ARGV[4] its
# tick (epoch ms)  ARGV[5] "1" when every id is new (generated), so none is looked up
# then per job 7 values: id, task, args (JSON), kwargs (JSON, "" for none), metadata (JSON,
# "" for none), priority, due (epoch ms, or a negative number of ms from now; 0 = now)
# With an entry name, the jobs are enqueued only if the tick is later than the last tick
# claimed for that entry (``base tick:<name>``), which then becomes this one: the claim and
# the enqueue are one step, so a tick is enqueued once however many schedulers race.
# Returns per job four values: 1 added, 2 replaced or 0 kept (already pending; or running,
# never replaced); the due time (epoch ms) as stored; the state letter as stored; when it
# was enqueued (epoch ms).
ENQUEUE = _script(
    "enqueue",
    _COMMON
    + """
local base, replace, fresh = ARGV[1], ARGV[2] == '1', ARGV[5] == '1'
local count = (#ARGV - 5) / 7
if count > 1000 then return redis.error_reply('ENQUEUE takes at most 1000 jobs') end
local now = now_ms()
local jobs = base .. 'j:'
-- Read and decide first: what each job finds (kept, replaced, added) and its due time.
local found = {}
for i = 6, #ARGV, 7 do
  local key = jobs .. ARGV[i]
  local state, sc, e = false, false, false
  if not fresh then
    local f = redis.pcall('HMGET', key, 's', 'sc', 'e')
    if f.err then  -- not a hash: replaced by the new job, the old value set aside
      found[#found + 1] = {'corrupt'}
    else
      state, sc, e = f[1], f[2], f[3]
      found[#found + 1] = {state, sc, e}
    end
  else
    found[#found + 1] = {false}
  end
end
if ARGV[3] ~= '' then
  local claim = base .. 'tick:' .. ARGV[3]
  if (tonumber(redis.call('GET', claim) or '0') or 0) >= tonumber(ARGV[4]) then return {} end
  redis.call('SET', claim, ARGV[4])
end
local seq = redis.call('INCRBY', base .. 'seq', count) - count
local sets = {r = 'ready', s = 'sched', d = 'dead'}
local results, woken, first = {}, 0, false  -- first: the head of sched, read when needed
local ready = {}  -- score, id, ...: added in ZADDs of 500 when every id is new
for n = 1, count do
  local i = 6 + (n - 1) * 7
  local id, pr, due = ARGV[i], tonumber(ARGV[i + 5]), tonumber(ARGV[i + 6])
  if due <= 0 then due = now - due end
  local key = jobs .. id
  local state, result, enqueued = found[n][1], 1, now
  if state == 'corrupt' then
    redis.call('RENAME', key, key .. ':corrupt')
    state = false
  end
  if state and not sets[state] and state ~= 'x' and state ~= 'k' then state = 'd' end
  if state == 'x' or (state and state ~= 'd' and not replace) then
    result = 0
    due = tonumber(found[n][2]) or now
    enqueued = tonumber(found[n][3]) or now
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
    if ARGV[i + 3] == '' and ARGV[i + 4] == '' and pr == 0 then  -- the usual job
      redis.call('HSET', key, 't', ARGV[i + 1], 'ar', ARGV[i + 2], 's', state, 'sc', due,
                 'e', now)
    else
      local hset = {'HSET', key, 't', ARGV[i + 1], 'ar', ARGV[i + 2], 's', state, 'sc', due,
                    'e', now}
      if ARGV[i + 3] ~= '' then hset[#hset + 1] = 'kw'; hset[#hset + 1] = ARGV[i + 3] end
      if ARGV[i + 4] ~= '' then hset[#hset + 1] = 'm'; hset[#hset + 1] = ARGV[i + 4] end
      if pr ~= 0 then hset[#hset + 1] = 'pr'; hset[#hset + 1] = pr end
      redis.call(unpack(hset))
    end
  end
  results[#results + 1] = result
  results[#results + 1] = due
  results[#results + 1] = state
  results[#results + 1] = enqueued
end
if #ready > 0 then redis.call('ZADD', base .. 'ready', unpack(ready)) end
if woken > 0 then wake(base, woken) end
return results
""",
)

# ARGV[1] base  ARGV[2] how many to lease (at most 1000)  ARGV[3] lease ms  ARGV[4] worker
# ARGV[5] max attempts  ARGV[6] result TTL ms  ARGV[7] "1": the leased jobs start now
# (charge their attempt), "0": leased ahead, charged when a later call starts them
# ARGV[8] how many jobs to finish, ARGV[9] how many jobs to start, then per job to finish
# 3 values: id, lease token, return value (JSON; "" to keep no result), then per job to
# start 2 values: id, lease token.
# Finishes the given leased jobs (deleted, or kept as ``result:<id>`` with the value for the
# TTL), charges the attempt of the jobs that start, moves due scheduled jobs to ready, takes
# back expired leases (to ready; to dead once a started attempt's lease ran out on the last
# attempt), then leases up to ARGV[2] ready jobs, highest priority first. A ready job whose
# hash is missing or unreadable goes to the dead set with the reason, alone.
# Returns {ms until the next due job or lease expiry (0: more are ready, -1: none), the ids
# among the finished and started whose lease had been lost, then per leased job 10 values:
# id, task, args, kwargs, metadata, attempt (the number this run is), priority, due,
# enqueued, workers (ws, this run's included)}.
POP = _script(
    "pop",
    _COMMON
    + """
local base, count, lease = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local worker, max_attempts, charge = ARGV[4], tonumber(ARGV[5]), ARGV[7] == '1'
local n_finish, n_start = tonumber(ARGV[8]), tonumber(ARGV[9])
if count > 1000 or n_finish > 1000 or n_start > 1000 then
  return redis.error_reply('POP takes at most 1000 jobs of each kind')
end
local now = now_ms()
local lost = finish_and_start(base, worker, ARGV[6], 10, n_finish, n_start, now)
local sched_at = head(base .. 'sched')
if sched_at and sched_at <= now then
  local due = redis.call('ZRANGEBYSCORE', base .. 'sched', '-inf', now, 'LIMIT', 0, 1000)
  zrem_all(base .. 'sched', due)
  for _, id in ipairs(due) do make_ready(base, id) end
  sched_at = head(base .. 'sched')
end
local run_at = head(base .. 'run')
if run_at and run_at <= now then
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', base .. 'run', '-inf', now, 'LIMIT', 0, 100)) do
    redis.call('ZREM', base .. 'run', id)
    local key = base .. 'j:' .. id
    local ok, f = pcall(redis.call, 'HMGET', key, 'a', 'l', 'sl', 't')
    if not ok then
      bury(base, id, now,
        'The job in Redis is not a hash; it was set aside as ' .. key .. ':corrupt.', true)
    elseif not f[4] then
      bury(base, id, now, 'The job\\'s data was missing from Redis when its lease ran out.', false)
    else
      local started = f[2] and f[2] == f[3]
      redis.call('HDEL', key, 'l', 'w', 'sl')
      local a = num(f[1], 0) or max_attempts
      if started then  -- a failed attempt: its worker never told how it ended
        local err = 'Attempt ' .. a .. ' of ' .. max_attempts .. ' ended without an outcome: '
          .. 'its lease ran out (its worker died, was killed or hung while running it).'
        local by = string.gsub(string.match(f[2], '^(.*)#') or f[2], '[^%w%-%.:_]', '?')
        redis.call('HSET', key, 'ec', '', 'tb', '', 'err', err)
        add_error(key, '{"e":"' .. err .. '","w":"' .. by .. '"}')
      end
      if started and a >= max_attempts then
        redis.call('HSET', key, 's', 'd', 'f', now)
        redis.call('ZADD', base .. 'dead', now, id)
      else
        make_ready(base, id)
      end
    end
  end
  run_at = head(base .. 'run')
end
local reply = {-1, lost}
if count > 0 then
  -- Read and check the candidates first; then lease the good ones and bury the bad ones.
  local ids, leased, bad, taken = redis.call('ZRANGE', base .. 'ready', 0, count - 1), {}, {}, {}
  for _, id in ipairs(ids) do
    local key = base .. 'j:' .. id
    local ok, f = pcall(redis.call, 'HMGET', key, 't', 'ar', 'kw', 'm', 'pr', 'sc', 'e', 'ws', 'a')
    local err = nil
    if not ok then
      err = 'The job in Redis is not a hash; it was set aside as ' .. key .. ':corrupt.'
    elseif not f[1] and not f[2] then
      err = 'The job\\'s data is missing from Redis (its id was ready without its hash).'
    elseif not f[1] or f[1] == '' then
      err = 'The job has no task (field t is missing).'
    elseif not f[2] then
      err = 'The job has no arguments (field ar is missing).'
    else
      for _, p in ipairs({{5, 'pr', 'priority'}, {6, 'sc', 'due time'}, {7, 'e', 'enqueue time'},
                          {9, 'a', 'attempts'}}) do
        if num(f[p[1]], 0) == nil then
          err = 'The job\\'s ' .. p[3] .. ' (field ' .. p[2] .. ') is not a number: '
            .. string.sub(f[p[1]], 1, 40)
          break
        end
      end
    end
    taken[#taken + 1] = id
    if err then bad[#bad + 1] = {id, err, not ok} else leased[#leased + 1] = {id, f} end
  end
  zrem_all(base .. 'ready', taken)
  for _, b in ipairs(bad) do bury(base, b[1], now, b[2], b[3]) end
  local expiries = {}
  for _, job in ipairs(leased) do
    local id, f = job[1], job[2]
    local key = base .. 'j:' .. id
    local attempt = num(f[9], 0) + 1
    local token = worker .. '#' .. attempt
    local workers = f[8] and (f[8] .. ',' .. worker) or worker
    if charge then
      redis.call('HSET', key, 's', 'x', 'a', attempt, 'l', token, 'sl', token, 'w', worker,
        'st', now, 'ws', workers)
    else
      redis.call('HSET', key, 's', 'x', 'l', token, 'w', worker)
    end
    expiries[#expiries + 1] = now + lease
    expiries[#expiries + 1] = id
    for _, v in ipairs({id, f[1], f[2], f[3] or '', f[4] or '', attempt, f[5] or '0',
                        f[6] or '0', f[7] or '0', workers}) do
      reply[#reply + 1] = v
    end
  end
  if #expiries > 0 then
    zadd_all(base .. 'run', expiries)
    if not run_at or now + lease < run_at then run_at = now + lease end
  end
  if #ids < count then count = -1 end  -- the ready set is empty now
end
if count >= 0 and redis.call('ZCARD', base .. 'ready') > 0 then
  reply[1] = 0
elseif sched_at or run_at then
  reply[1] = math.max(0, math.min(sched_at or run_at, run_at or sched_at) - now)
end
return reply
""",
)

# ARGV[1] base  ARGV[2] worker  ARGV[3] result TTL ms  ARGV[4] how many jobs to finish
# ARGV[5] how many jobs to start (at most 1000 of each), then per job to finish 3 values:
# id, lease token, return value (JSON; "" to keep no result), then per job to start 2
# values: id, lease token.
# What a worker sends, not waiting for the reply, as it starts a job leased ahead: the jobs
# finished before it are acknowledged, and its attempt is charged. Returns the ids whose
# lease had been lost.
START = _script(
    "start",
    _COMMON
    + """
local n_finish, n_start = tonumber(ARGV[4]), tonumber(ARGV[5])
if n_finish > 1000 or n_start > 1000 then
  return redis.error_reply('START takes at most 1000 jobs of each kind')
end
return finish_and_start(ARGV[1], ARGV[2], ARGV[3], 6, n_finish, n_start, now_ms())
""",
)

# ARGV[1] base  then pairs of id, lease token (at most 1000 pairs)
# Gives back leased jobs that never started (a worker's jobs leased ahead, when it stops or
# one of its jobs runs long): ready again at the front of their priority, in their order,
# an attempt charged under this lease given back. Returns how many it gave back.
RELEASE = _script(
    "release",
    _COMMON
    + """
local base, n = ARGV[1], (#ARGV - 1) / 2
if n > 1000 then return redis.error_reply('RELEASE takes at most 1000 jobs') end
local back = {}
for i = 2, #ARGV, 2 do
  local ok, f = pcall(redis.call, 'HMGET', base .. 'j:' .. ARGV[i], 'l', 'pr', 'a', 'ws', 'sl')
  if ok and f[1] == ARGV[i + 1] then back[#back + 1] = {i, f} end
end
for _, b in ipairs(back) do
  local i, f = b[1], b[2]
  local id = ARGV[i]
  local key = base .. 'j:' .. id
  redis.call('ZREM', base .. 'run', id)
  redis.call('HDEL', key, 'l', 'w', 'sl')
  if f[5] == f[1] then  -- charged under this lease: give the attempt back
    local ws = f[4] and string.match(f[4], '^(.*),[^,]*$')
    if ws then redis.call('HSET', key, 'ws', ws) else redis.call('HDEL', key, 'ws') end
    redis.call('HSET', key, 'a', math.max(0, (num(f[3], 1) or 1) - 1))
    redis.call('HDEL', key, 'st')
  end
  redis.call('HSET', key, 's', 'r')
  local pr = num(f[2], 0) or 0
  redis.call('ZADD', base .. 'ready', (100 - pr) * BAND - n + (i - 2) / 2, id)
end
if #back > 0 then wake(base, #back) end
return #back
""",
)

# ARGV[1] base  ARGV[2] id  ARGV[3] lease token  ARGV[4] delay ms (-1: to the dead set)
# ARGV[5] error  ARGV[6] traceback  ARGV[7] exception class path  ARGV[8] the error as a
# JSON object for the history ("" for none)  ARGV[9] worker id
# Gives a leased job back: scheduled again after the delay, or dead; its attempt is charged
# if it was not yet. 1, or 0 if the lease was lost (another worker may have it by now).
SETTLE = _script(
    "settle",
    _COMMON
    + """
local base, id, delay = ARGV[1], ARGV[2], tonumber(ARGV[4])
local key = base .. 'j:' .. id
local ok, f = pcall(redis.call, 'HMGET', key, 'l', 'sl', 'a', 'ws')
if not ok or f[1] ~= ARGV[3] then return 0 end
local now = now_ms()
redis.call('ZREM', base .. 'run', id)
redis.call('HDEL', key, 'l', 'w', 'sl')
if f[2] ~= f[1] then  -- never started through POP: this attempt is charged now
  redis.call('HSET', key, 'a', (num(f[3], 0) or 0) + 1, 'st', now,
    'ws', f[4] and (f[4] .. ',' .. ARGV[9]) or ARGV[9])
end
redis.call('HSET', key, 'err', ARGV[5], 'tb', ARGV[6], 'ec', ARGV[7])
if ARGV[8] ~= '' then add_error(key, ARGV[8]) end
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
  local ok, l = pcall(redis.call, 'HGET', base .. 'j:' .. id, 'l')
  if ok and l == ARGV[i + 1] then
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
# A dead id whose key is not a hash is deleted too (delete cleans up what POP set aside).
CANCEL = _script(
    "cancel",
    """
local base, id = ARGV[1], ARGV[2]
local key = base .. 'j:' .. id
local sets = {r = 'ready', s = 'sched', d = 'dead'}
local ok, f = pcall(redis.call, 'HMGET', key, 's', 'sc')
if not ok or not f[1] then
  -- No hash (a key of another type, or none): only an entry of the dead set can be deleted.
  if not string.find(ARGV[4], 'd', 1, true) or not redis.call('ZSCORE', base .. 'dead', id) then
    return 0
  end
  redis.call('ZREM', base .. 'dead', id)
  redis.call('DEL', key, key .. ':corrupt')
  return 1
end
if not sets[f[1]] or not string.find(ARGV[4], f[1], 1, true) then return 0 end
if ARGV[3] ~= '' and f[2] ~= ARGV[3] then return 0 end
redis.call('ZREM', base .. sets[f[1]], id)
redis.call('DEL', key, key .. ':corrupt')
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
local ok, state = pcall(redis.call, 'HGET', key, 's')
if not ok then return 0 end
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

# ARGV[1] base  ARGV[2] set (ready, sched, run, dead)  ARGV[3] offset  ARGV[4] limit (at most
# 1000)  ARGV[5] "1" to delete them (purge) instead of listing them
# Lists (or deletes) one page of a state; per job the flat HGETALL of its hash, after its
# id: {id, n, field, value, ...} (n = -1: the key is not a hash). A purge returns how many
# it deleted.
PAGE = _script(
    "page",
    """
local base, set = ARGV[1], ARGV[1] .. ARGV[2]
local first, limit = tonumber(ARGV[3]), tonumber(ARGV[4])
if limit > 1000 then return redis.error_reply('PAGE takes at most 1000 jobs') end
local ids = redis.call('ZRANGE', set, first, first + limit - 1)
if ARGV[5] == '1' then
  for _, id in ipairs(ids) do
    redis.call('ZREM', set, id)
    redis.call('DEL', base .. 'j:' .. id, base .. 'j:' .. id .. ':corrupt')
  end
  return #ids
end
local reply = {}
for _, id in ipairs(ids) do
  local ok, h = pcall(redis.call, 'HGETALL', base .. 'j:' .. id)
  reply[#reply + 1] = id
  if ok then
    reply[#reply + 1] = #h
    for _, v in ipairs(h) do reply[#reply + 1] = v end
  else
    reply[#reply + 1] = -1
  end
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
  local ok, sc = pcall(redis.call, 'HGET', base .. 'j:' .. head[1], 'sc')
  local due = ok and num(sc, 0) or nil
  if due and (not oldest or due < oldest) then oldest = due end
  min = string.format('%.0f', (math.floor(tonumber(head[2]) / band) + 1) * band)
end
if not oldest then return -1 end
return math.max(0, now_ms() - oldest)
""",
)
