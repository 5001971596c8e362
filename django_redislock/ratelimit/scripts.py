"""The rate limiter's Lua script. Its one key arrives in KEYS, built by ``keys`` (which
describes the layout)."""

from __future__ import annotations

from ..redis.scripts import _script

# One hit of ``n`` units. It passes when both hold at the server's clock:
# - at most ``count`` units in any window of ``period``: the ring keeps the time of the last
#   ``count`` passes, so the n-th oldest of them must have left the window (a pass at t
#   leaves it at t + period exactly);
# - when burst < count, a GCRA with an emission interval of period / count and room for
#   ``burst`` at once. Its time is kept as whole microseconds plus a fraction in 1/count of
#   one, so the arithmetic is exact; the ring already implies a burst of ``count``.
# A refused hit writes nothing; its reply is how long until the same hit would pass.
# Time never runs backwards within a limiter (a clock step back is held at its newest pass):
# the ring's order depends on it.
#
# KEYS[1]  the limiter's string (see keys)
# ARGV     count, period (us), burst, n
# Reply    {allowed 1/0, wait (us; 0 when allowed), the time of the hit (us)}
HIT = _script(
    "HIT",
    """
local key = KEYS[1]
local count, period = tonumber(ARGV[1]), tonumber(ARGV[2])
local burst, n = tonumber(ARGV[3]), tonumber(ARGV[4])
if not (count and period and burst and n) or n < 1 or n > burst or burst > count then
  return redis.error_reply('ERR HIT: bad arguments')
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
local wait = 0
local nth = slot(oldest + n - 1)
if nth + period > now then wait = nth + period - now end
if burst < count then
  if at < now or frac < 0 or frac >= count then at, frac = now, 0 end
  local q = frac + n * period
  at, frac = at + math.floor(q / count), q % count
  local excess = count * (at - now) + frac - burst * period  -- us x count
  if excess > 0 then wait = math.max(wait, math.ceil(excess / count)) end
end
if wait > 0 then return {0, wait, now} end
if kind ~= 'string' and kind ~= 'none' then redis.call('DEL', key) end
local stamp = string.format('%016.0f', now)
for i = 0, n - 1 do
  redis.call('SETRANGE', key, HEAD + ((oldest + i) % count) * W, stamp)
end
oldest = (oldest + n) % count
redis.call('SETRANGE', key, 0, string.format('%016.0f%08d%08d', at, frac, oldest))
redis.call('PEXPIRE', key, math.ceil(period / 1000))
return {1, 0, now}
""",
)
