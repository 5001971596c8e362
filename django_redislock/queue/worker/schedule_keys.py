"""Where a SCHEDULE entry's state lives: its keys, in its queue's hash slot, and the Lua
scripts that pause and resume it.

With ``base`` the queue's (``QueueKeys.base``) and ``<name>`` the entry's:

    base tick:<name>          string  the last tick claimed, epoch ms (``QueueKeys.tick``);
                                      FOREVER while the entry is paused
    base tick:<name>:now      string  the last "run now" claimed: its nonce (epoch µs)
    base tick-paused:<name>   hash    the entry's pause: ``by`` (who), ``at`` (epoch ms) and
                                      ``tick`` (the claim FOREVER replaced; "" if none)

A paused entry's claim is FOREVER, a tick no scheduler can pass: ENQUEUE claims a tick only
if it is later than the claimed one, so no tick is enqueued once PAUSE returned, and the
scheduler needs no other read. A run now goes through ENQUEUE's claim too, under the entry
name ``<name>:now`` (no valid entry name holds a ``:``), so a nonce is enqueued once.
"""

from __future__ import annotations

from typing import NamedTuple

from ...redis.scripts import lua_script
from ..keys import QueueKeys

# 2^53 - 1 ms: the largest whole number a Lua number (a double) holds exactly.
FOREVER = 9_007_199_254_740_991


def run_now_entry(name: str) -> str:
    """The entry name whose tick claims are entry ``name``'s run-now nonces."""
    return f"{name}:now"


class EntryKeys(NamedTuple):
    tick: str
    paused: str
    run_now: str


def entry_keys(keys: QueueKeys, name: str) -> EntryKeys:
    """The keys of SCHEDULE entry ``name`` in the queue of ``keys``."""
    return EntryKeys(
        keys.tick(name), keys.base + "tick-paused:" + name, keys.tick(run_now_entry(name))
    )


# KEYS[1] the entry's tick key  KEYS[2] its pause record
# ARGV[1] who pauses  ARGV[2] FOREVER
# Sets the claim to FOREVER, keeping the claim it replaces (if a number) in the pause record
# with who paused and when (the server's time). Returns 1 when paused now, 0 when it was
# paused already (a claim found below FOREVER then is set back to it). A record that is no
# hash is an error, before any write.
PAUSE_ENTRY = lua_script(
    "pause_entry",
    """
local kind = redis.call('TYPE', KEYS[2])['ok']
if kind ~= 'none' and kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE the pause record ' .. KEYS[2] .. ' is a ' .. kind ..
                           ', not a hash: resume the entry to clear it')
end
local claimed = redis.call('GET', KEYS[1])
if kind == 'hash' then
  if claimed ~= ARGV[2] then redis.call('SET', KEYS[1], ARGV[2]) end  -- (a claim put back)
  return 0
end
local kept = ''
if claimed and claimed ~= ARGV[2] and tonumber(claimed) then kept = claimed end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[2], 'by', ARGV[1], 'at', now, 'tick', kept)
redis.call('SET', KEYS[1], ARGV[2])
return 1
""",
)

# KEYS[1] the entry's tick key  KEYS[2] its pause record
# ARGV[1] the entry's latest tick at or before now (epoch ms)  ARGV[2] FOREVER
# Ends the pause: the claim becomes the later of ARGV[1] and the claim kept at the pause, so
# the next tick is the first to run (the ticks passed while paused never do, catch_up or
# not). A record that is no hash is deleted all the same. Returns 1 when it was paused (a
# record, or a FOREVER claim), 0 when not.
RESUME_ENTRY = lua_script(
    "resume_entry",
    """
local claimed = redis.call('GET', KEYS[1])
local recorded = redis.call('EXISTS', KEYS[2]) == 1
if not recorded and claimed ~= ARGV[2] then return 0 end
local claim = ARGV[1]
if recorded then
  local kept = redis.pcall('HGET', KEYS[2], 'tick')
  if type(kept) == 'string' and tonumber(kept) and tonumber(kept) > tonumber(claim) then
    claim = kept
  end
  redis.call('DEL', KEYS[2])
end
redis.call('SET', KEYS[1], claim)
return 1
""",
)
