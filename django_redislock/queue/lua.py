"""What every queue script shares: the job states and hash fields (from ``jobs``), the
queue's fixed keys, and the Lua helpers that keep a job's structures consistent.

KEYS: the fixed keys first (``QueueKeys.fixed``: ready, sched, run, dead, seq, wake, held,
parked, paused, starts, waiting, outbox), then those of the jobs a script touches (for POP,
those PEEK found: a job it was not given is left for the next call). An attempt is charged
when a job starts, not when it is leased (by POP when its jobs start at once, else by each
one's START, sent without awaiting it). A script reads and checks before its first write, and
sets a job whose field it cannot parse aside (dead, with the reason) rather than fail:
Redis does not roll back a script that fails half-way. ZADD/ZREM lists go in chunks
(Lua's ``unpack`` takes about 8,000 values); times are the server's (TIME), which workers
and web processes share.
"""

from __future__ import annotations

import re

from ..redis.scripts import LuaScript, lua_script
from .depend_lua import DEPEND
from .finish_lua import FINISH
from .jobs import Field, JobState
from .limit_lua import LIMITS

# The most jobs one script call takes or returns; callers split larger batches.
MAX_BATCH = 1000
FIXED_KEYS = 12


# The helpers a script may use, each definition after those it uses. A script gets only the
# ones it names (and theirs); ``S.<state>`` and ``F.<field>`` become string literals.
PRELUDE = """
local READY, SCHED, RUN, DEAD, SEQ, WAKE = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local HELD, PARKED, PAUSED, STARTS = KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local WAITING, OUTBOX = KEYS[11], KEYS[12]
local JOB = 13  -- the first key after the fixed ones (FIXED_KEYS)

local SETS = {[S.ready] = READY, [S.scheduled] = SCHED, [S.dead] = DEAD, [S.waiting] = WAITING}

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local BAND = 1099511627776  -- 2^40: the ready score of priority p is (100 - p) * BAND + seq

-- A number from a hash field: absent gives the default, anything unparsable (NaN and the
-- infinities too: no score or count may be one) gives nil.
local function num(v, default)
  if v == false or v == nil then return default end
  local n = tonumber(v)
  if n ~= n or n == math.huge or n == -math.huge then return nil end
  return n
end

-- A job's workers (one a started run) and ``worker``; the oldest go past 4 KB (RetryLater).
local function with_worker(ws, worker)
  if not ws then return worker end
  ws = ws .. ',' .. worker
  local cut = #ws > 4096 and string.find(ws, ',', #ws - 4096, true)
  return cut and string.sub(ws, cut + 1) or ws
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

-- Leave ``n`` wake-up tokens for the workers blocked on the queue. Past 128 (no worker
-- takes them) the list is cut back to 64: an LTRIM per 64 wake-ups at most.
local function wake(n)
  local tokens = {}
  for i = 1, math.min(n, 64) do tokens[i] = 1 end
  if redis.call('RPUSH', WAKE, unpack(tokens)) > 128 then redis.call('LTRIM', WAKE, -64, -1) end
end

-- Put job ``id`` (its hash at ``key``) on the ready set, behind its priority's earlier jobs
-- (a priority that is not a number counts as 0: POP then buries the job with the reason).
local function make_ready(key, id)
  local pr = num(redis.call('HGET', key, F.priority), 0) or 0
  if pr < -100 or pr > 100 then pr = 0 end
  redis.call('ZADD', READY, (100 - pr) * BAND + redis.call('INCR', SEQ), id)
  redis.call('HSET', key, F.state, S.ready)
end

-- Append a failed attempt's error (JSON) to the job's history, keeping the newest 256 KB.
local function add_error(key, entry)
  local history = redis.call('HGET', key, F.errors) or ''
  history = history .. entry .. '\\n'
  while #history > 262144 do
    local cut = string.find(history, '\\n', 1, true)
    history = string.sub(history, cut + 1)
  end
  redis.call('HSET', key, F.errors, history)
end

-- Send job ``id`` to the dead set with ``err`` (``corrupt``: where its non-hash key goes).
local function bury(key, id, now, err, corrupt)
  if corrupt then redis.call('RENAME', key, corrupt) else ended(key, id, S.dead, now, err) end
  redis.call('HDEL', key, F.lease, F.worker)
  redis.call('HSET', key, F.state, S.dead, F.finished, now, F.error, err, F.error_class, '',
             F.traceback, '')
  redis.call('ZADD', DEAD, now, id)
end

-- A job's expiry in ms, from its metadata (JSON, key "expires", seconds): false when it has
-- none, nil when it is not a number of seconds > 0 (the job is then buried, alone).
local function expires_ms(meta)
  if not meta or not string.find(meta, '"expires"', 1, true) then return false end
  local ok, m = pcall(cjson.decode, meta)
  if not ok or type(m) ~= 'table' then return nil end
  local x = m.expires
  if x == nil or x == cjson.null then return false end  -- in another value, or unset (null)
  if type(x) ~= 'number' or x ~= x or x <= 0 or x == math.huge then return nil end
  return x * 1000
end

-- Bury job ``id`` as expired (not started within its expiry of becoming due), uncharged;
-- count it in the queue's expired counter (the key before the last, the done set).
local function bury_expired(key, id, now)
  bury(key, id, now, 'expired', false)
  redis.call('INCR', KEYS[#KEYS - 1])
end

-- Bury job ``id`` as cancelled (``asked``: the cancel field, "who|ms"): never run again.
local function bury_cancelled(key, id, now, asked, why)
  local who = string.match(asked, '^(.*)|') or asked
  redis.call('HDEL', key, F.lease, F.worker, F.started_lease, F.next_task)
  local err = 'Cancelled by ' .. who .. (why or '') .. '.'
  redis.call('HSET', key, F.state, S.dead, F.finished, now, F.error, err, F.error_class,
             'django_redislock.exceptions.JobCancelled', F.traceback, '')
  redis.call('ZADD', DEAD, now, id)
  ended(key, id, S.dead, now, err)
end

-- The score of the first member of a sorted set, or nil.
local function head(key)
  local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return first[2] and tonumber(first[2])
end

-- Write a new job's hash at ``key`` from its ENQUEUE values ARGV[at..at+5], due and state.
local function write_job(key, at, state, due, now)
  local kwargs, meta, pr = ARGV[at + 3], ARGV[at + 4], ARGV[at + 5]
  if kwargs == '' and meta == '' and pr == '0' then  -- the usual job
    return redis.call('HSET', key, F.task, ARGV[at + 1], F.args, ARGV[at + 2], F.state, state,
                      F.due, due, F.enqueued, now)
  elseif kwargs == '' and pr == '0' then  -- the usual job of a task with options (in meta)
    return redis.call('HSET', key, F.task, ARGV[at + 1], F.args, ARGV[at + 2], F.state, state,
                      F.due, due, F.enqueued, now, F.meta, meta)
  end
  local hset = {'HSET', key, F.task, ARGV[at + 1], F.args, ARGV[at + 2], F.state, state,
                F.due, due, F.enqueued, now}
  if kwargs ~= '' then hset[#hset + 1] = F.kwargs; hset[#hset + 1] = kwargs end
  if meta ~= '' then hset[#hset + 1] = F.meta; hset[#hset + 1] = meta end
  if pr ~= '0' then hset[#hset + 1] = F.priority; hset[#hset + 1] = pr end
  redis.call(unpack(hset))
end

-- The follow-up run asked for while job ``key`` ran (replace on a running job), or nil.
local function next_run(key)
  local n = redis.call('HMGET', key, F.next_task, F.next_args, F.next_kwargs, F.next_meta,
                       F.next_priority, F.next_due, F.next_enqueued, F.next_debounced)
  if n[1] and n[2] then return n end
  return nil
end

-- Make the follow-up ``n`` (from next_run) the job ``id``: a fresh hash at ``key`` (no
-- attempts, no errors), ready or scheduled by its due time; the run before it has ended.
local function run_next(key, id, n, now)
  local pr, due = num(n[5], 0) or 0, num(n[6], now) or now
  if pr < -100 or pr > 100 then pr = 0 end
  redis.call('DEL', key)
  local hset = {'HSET', key, F.task, n[1], F.args, n[2], F.due, math.max(due, now),
                F.enqueued, tonumber(n[7]) or now}
  if n[3] and n[3] ~= '' then hset[#hset + 1] = F.kwargs; hset[#hset + 1] = n[3] end
  if n[4] and n[4] ~= '' then hset[#hset + 1] = F.meta; hset[#hset + 1] = n[4] end
  if pr ~= 0 then hset[#hset + 1] = F.priority; hset[#hset + 1] = pr end
  if n[8] then hset[#hset + 1] = F.debounced; hset[#hset + 1] = n[8] end
  hset[#hset + 1] = F.state
  if due <= now then
    hset[#hset + 1] = S.ready
    redis.call(unpack(hset))
    redis.call('ZADD', READY, (100 - pr) * BAND + redis.call('INCR', SEQ), id)
  else
    hset[#hset + 1] = S.scheduled
    redis.call(unpack(hset))
    redis.call('ZADD', SCHED, due, id)
  end
  wake(1)
end
"""

_LITERALS = {
    "S": {state.value: state.letter for state in JobState if state.letter},
    "F": Field.names(),
}
_NAMED = re.compile(r"\b([FS])\.(\w+)")
_COMMENT = re.compile(r"--.*")
_DEFINED = re.compile(r"^local (?:function )?(\w+(?:, \w+)*)", re.MULTILINE)


def _inlined(lua: str) -> str:
    def literal(match: re.Match[str]) -> str:
        table, name = match.groups()
        if name not in _LITERALS[table]:
            raise ValueError(f"A queue script names {match[0]}, which is not a job {table}.")
        return f"'{_LITERALS[table][name]}'"

    return _NAMED.sub(literal, lua)


# (the names a piece defines, the piece), in the prelude's order: the limits' pieces
# (``limit_lua``) after ``wake``, which they use, ``depend_lua``'s before ``bury``, and
# ``finish_lua``'s last
_TEXTS = PRELUDE.strip().split("\n\n")
_AFTER_WAKE = next(i for i, text in enumerate(_TEXTS) if "local function wake(" in text) + 1
_TEXTS[_AFTER_WAKE:_AFTER_WAKE] = LIMITS.strip().split("\n\n")
# dependencies after make_ready, which they use, and before bury, which uses them
_BEFORE_BURY = next(i for i, text in enumerate(_TEXTS) if "local function bury(" in text)
_TEXTS.insert(_BEFORE_BURY, DEPEND.strip())
_TEXTS.append(FINISH.strip())  # (last: it uses the pieces of both)
_PIECES = [(set(", ".join(_DEFINED.findall(text)).split(", ")), _inlined(text)) for text in _TEXTS]


def script(name: str, body: str) -> LuaScript:
    """A queue script: ``body`` after the prelude's pieces it uses. Each piece costs every
    call of the script (Redis runs a script's whole text each time), so none is sent unused."""
    code = _inlined(body)
    for defined, piece in reversed(_PIECES):  # a piece may use those before it
        uncommented = _COMMENT.sub("", code)
        if any(re.search(rf"\b{word}\b", uncommented) for word in defined):
            code = piece + "\n" + code
    return lua_script(name, code)
