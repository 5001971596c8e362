"""The Lua scripts of pause and resume (issue 27): PAUSE and RESUME. Each gets the queue's
fixed keys first (see ``lua``). POP reads the ``paused`` hash at each fetch: a paused queue
leases nothing (its ready jobs stay ready), and a job of a paused task that it meets is
parked under the key "\\t<task path>" (see ``limit_lua``) until RESUME lets it go."""

from __future__ import annotations

from .lua import script

# ARGV[1] "*" (the whole queue) or a task path  ARGV[2] who pauses
# Notes the pause with who asked and when (a pause already there is kept as it was): 1 when
# it is new, 0 when it was paused already.
PAUSE = script(
    "pause",
    """
return redis.call('HSETNX', PAUSED, ARGV[1], ARGV[2] .. '|' .. now_ms())
""",
)

# ARGV[1] "*" (the whole queue) or a task path  ARGV[2] the most parked jobs to let go
# Ends the pause (its ready jobs start at once: workers are woken), and lets up to ARGV[2]
# of a task's parked jobs go, oldest first (back to ready; POP decides again). Returns
# {1 when it was paused, how many it let go}; the caller calls again while that many went.
RESUME = script(
    "resume",
    """
local was = redis.call('HDEL', PAUSED, ARGV[1])
local let_go = 0
if ARGV[1] ~= '*' then
  local k = '\\t' .. ARGV[1]
  local ok, members = pcall(redis.call, 'ZRANGEBYLEX', PARKED, '[' .. k .. '\\0',
                            '(' .. k .. '\\1', 'LIMIT', 0, tonumber(ARGV[2]))
  if ok then
    local back = {}
    for _, m in ipairs(members) do
      local rest = string.sub(m, #k + 2)
      back[#back + 1] = tonumber(string.sub(rest, 1, 16)) - 1e15
      back[#back + 1] = string.sub(rest, 17)
    end
    if #members > 0 then
      zrem_all(PARKED, members)
      zadd_all(READY, back)
    end
    let_go = #members
  end
end
if was == 1 or let_go > 0 then wake(math.max(let_go, 64)) end
return {was, let_go}
""",
)
