"""The rate limiter's Lua scripts. Their one key arrives in KEYS, built by ``keys`` (which
describes the layout)."""

from __future__ import annotations

from ..redis.scripts import lua_script

# What HIT and PEEK share: the arguments, the server's clock, the state read back, and
# STATE(), what the limiter has left at ``now``. The ring is in time order from its oldest
# slot (a slot never written reads as 0, the oldest time of all), so the passes still in
# the window are a suffix of it, found by bisection: O(log count) reads, not O(count).
# Time never runs backwards within a limiter (a clock step back is held at its newest
# pass): the ring's order depends on it.
_STATE = """
local key = KEYS[1]
local count, period, burst = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if not (count and period and burst) or count < 1 or burst < 1 or burst > count then
  return redis.error_reply('ERR rate limit: bad arguments')
end
local HEAD, W = 32, 16
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local kind = redis.call('TYPE', key)['ok']
local function read(from, width)  -- a field; missing or garbled reads as 0
  if kind ~= 'string' then return 0 end
  return tonumber(redis.call('GETRANGE', key, from, from + width - 1)) or 0
end
local function slot(i) return read(HEAD + (i % count) * W, W) end
local at, frac, oldest = read(0, 16), read(16, 8), read(24, 8)
if oldest < 0 or oldest >= count or oldest % 1 ~= 0 then oldest = 0 end
now = math.max(now, slot(oldest + count - 1))
local function debt()  -- the GCRA's time ahead of now, in us x count (0 when burst = count)
  if burst == count or at < now or frac < 0 or frac >= count then return 0 end
  return count * (at - now) + frac
end
-- {units free now, us until one unit is, us until all are (the newest pass has left the
-- window and the burst refilled)}
local function STATE()
  local lo, hi = 0, count
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if slot(oldest + mid) + period > now then hi = mid else lo = mid + 1 end
  end
  local free, one, all = lo, 0, 0
  if lo < count then all = slot(oldest + count - 1) + period - now end
  if lo == 0 then one = slot(oldest) + period - now end
  local x = debt()
  if x > 0 then
    local spaced = math.floor((burst * period - x) / period)
    if spaced < free then free = math.max(spaced, 0) end
    if spaced < 1 then one = math.max(one, math.ceil((x + period - burst * period) / count)) end
    all = math.max(all, math.ceil(x / count))
  end
  return free, one, all
end
"""

# One hit of ``n`` units. It passes when both hold at the server's clock:
# - at most ``count`` units in any window of ``period``: the ring keeps the time of the last
#   ``count`` passes, so the n-th oldest of them must have left the window (a pass at t
#   leaves it at t + period exactly);
# - when burst < count, a GCRA with an emission interval of period / count and room for
#   ``burst`` at once. Its time is kept as whole microseconds plus a fraction in 1/count of
#   one, so the arithmetic is exact; the ring already implies a burst of ``count``.
# A refused hit writes nothing; its reply is how long until the same hit would pass.
#
# KEYS[1]  the limiter's string (see keys)
# ARGV     count, period (us), burst, n, report (1: the reply also says what is left)
# Reply    {allowed 1/0, wait (us; 0 when allowed), the time of the hit (us)}, and with
#          report: then units free, us until one is, us until all are, after this hit
HIT = lua_script(
    "HIT",
    _STATE
    + """
local n, report = tonumber(ARGV[4]), ARGV[5] == '1'
if not n or n < 1 or n > burst then return redis.error_reply('ERR HIT: bad arguments') end
local wait = 0
local nth = slot(oldest + n - 1)
if nth + period > now then wait = nth + period - now end
local x = debt() + n * period
if burst < count and x > burst * period then
  wait = math.max(wait, math.ceil((x - burst * period) / count))
end
if wait > 0 then
  if report then return {0, wait, now, STATE()} end
  return {0, wait, now}
end
if burst < count then
  if at < now or frac < 0 or frac >= count then at, frac = now, 0 end
  local q = frac + n * period
  at, frac = at + math.floor(q / count), q % count
end
if kind ~= 'string' and kind ~= 'none' then redis.call('DEL', key) end
local stamp = string.format('%016.0f', now)
for i = 0, n - 1 do
  redis.call('SETRANGE', key, HEAD + ((oldest + i) % count) * W, stamp)
end
oldest = (oldest + n) % count
redis.call('SETRANGE', key, 0, string.format('%016.0f%08d%08d', at, frac, oldest))
redis.call('PEXPIRE', key, math.ceil(period / 1000))
if not report then return {1, 0, now} end
kind = 'string'
return {1, 0, now, STATE()}
""",
)

# What the limiter has left, without counting a hit: writes nothing.
#
# KEYS[1]  the limiter's string (see keys)
# ARGV     count, period (us), burst
# Reply    {units free now, us until one is, us until all are, the server time (us)}
PEEK = lua_script(
    "PEEK",
    _STATE
    + """
local free, one, all = STATE()
return {free, one, all, now}
""",
)
