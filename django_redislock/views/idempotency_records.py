"""The Redis side of ``@redis_idempotent``: one record per (scope, Idempotency-Key), its key
layout, its scripts, its codec, and the claim the renewer keeps alive while the view runs.
Nothing else in the package builds these keys or reads these values.

Key layout of one record (``<digest>`` = the first 32 hex digits of the SHA-256 of the scope
and the key, so a client's key never reaches the key name and every key of a record shares
one hash tag):

    <prefix>:idem:{<digest>}      string  the record, one of
                                          "R|<token>|<fingerprint>": the view is running under
                                          claim <token> (PX ``LOCK_TTL``, renewed meanwhile);
                                          "D|<fingerprint>|<meta json>\\n<body>": done, its
                                          response replayable (PX the decorator's ttl);
                                          "N|<fingerprint>|<meta json>": done, its response not
                                          kept (streaming, or over ``REPLAY_LIMIT``)
    <prefix>:idem:{<digest>}:n    string  "1" while a repeat waits for the running request
                                          (PX the claim's TTL): the end then wakes it
    <prefix>:idem:{<digest>}:w    list    wake-ups: the token of the claim that ended, pushed
                                          when somebody waits; each waiter pushes it back for
                                          the next, and it expires in a second
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any, NamedTuple

from django.http import HttpResponse, HttpResponseBase

from ..conf import conf
from ..redis.scripts import lua_script

logger = logging.getLogger("django_redislock.idempotent")

# A response whose body is larger is not kept (its record says so, and a repeat is refused).
REPLAY_LIMIT = 1 << 20
# The headers a replay repeats besides the status and the body: every Content-* header
# (Content-Length is recomputed) and Location. Cookies and caching headers belong to the
# first answer only.
REPLAYED_HEADERS = ("location",)

# KEYS[1] record  KEYS[2] waiting flag  KEYS[3] wake-up list
# ARGV[1] token  ARGV[2] fingerprint  ARGV[3] claim ms
# ARGV[4] a record found corrupt, to replace if still there ("" none)
# ARGV[5] "1" when the caller will wait for a running record  ARGV[6] a wake-up to pass on
# ("" none)  ARGV[7] how long a passed-on wake-up stays, ms
# Reply: {1} claimed (the key was free); {2} claimed over a corrupt record (a value of
#        another type or shape); {0, record, pttl}: the record there.
CLAIM = lua_script(
    "idempotency_claim",
    """
local record, waiting, wake = KEYS[1], KEYS[2], KEYS[3]
if ARGV[6] ~= '' then
  redis.call('LPUSH', wake, ARGV[6])
  redis.call('PEXPIRE', wake, ARGV[7])
end
local ok, value = pcall(redis.call, 'GET', record)
local corrupt = not ok
if ok and value then
  if ARGV[4] ~= '' and value == ARGV[4] then
    corrupt = true
  elseif string.match(value, '^R|[^|]+|%x+$') or string.match(value, '^[DN]|%x+|') then
    if ARGV[5] == '1' and string.sub(value, 1, 2) == 'R|' then
      redis.call('SET', waiting, '1', 'PX', ARGV[3])
    end
    return {0, value, redis.call('PTTL', record)}
  else
    corrupt = true
  end
end
redis.call('SET', record, 'R|' .. ARGV[1] .. '|' .. ARGV[2], 'PX', ARGV[3])
if corrupt then return {2} end
return {1}
""",
)

# Ends claim ARGV[1]: the record becomes ARGV[2] for ARGV[3] ms, or ("" ARGV[2]) is deleted,
# freeing the key; a waiting repeat is woken.
# KEYS[1] record  KEYS[2] waiting flag  KEYS[3] wake-up list
# ARGV[1] token  ARGV[2] the record's new value, or ""  ARGV[3] ttl ms  ARGV[4] wake-up ms
# Reply: 1 when done, 0 when the claim was not the token's any more (lapsed).
FINISH = lua_script(
    "idempotency_finish",
    """
local ok, value = pcall(redis.call, 'GET', KEYS[1])
local mine = 'R|' .. ARGV[1] .. '|'
if not ok or not value or string.sub(value, 1, #mine) ~= mine then return 0 end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
end
if redis.call('DEL', KEYS[2]) == 1 then
  redis.call('LPUSH', KEYS[3], ARGV[1])
  redis.call('PEXPIRE', KEYS[3], ARGV[4])
end
return 1
""",
)

# KEYS[1] record  ARGV[1] token  ARGV[2] claim ms
# Reply: 1 when the claim was renewed, 0 when it is not the token's any more.
RENEW = lua_script(
    "idempotency_renew",
    """
local ok, value = pcall(redis.call, 'GET', KEYS[1])
local mine = 'R|' .. ARGV[1] .. '|'
if not ok or not value or string.sub(value, 1, #mine) ~= mine then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
""",
)


class RecordKeys(NamedTuple):
    record: str
    waiting: str
    wake: str


def record_keys(scope: str, key: str) -> RecordKeys:
    digest = hashlib.sha256(f"{scope}\x00{key}".encode()).hexdigest()[:32]
    base = f"{conf.KEY_PREFIX}:idem:{{{digest}}}"
    return RecordKeys(base, f"{base}:n", f"{base}:w")


class Record(NamedTuple):
    """A record as read back: ``state`` "R" (running: ``token`` is its claim's), "D" (done:
    ``meta`` and ``body`` are its response) or "N" (done, not replayable: ``meta`` says
    why)."""

    state: str
    fingerprint: str
    token: str = ""
    meta: dict[str, Any] | None = None
    body: bytes = b""


class CorruptRecord(ValueError):
    """A record that cannot be read back; CLAIM replaces exactly that ``value``."""

    def __init__(self, value: bytes, why: str) -> None:
        super().__init__(why)
        self.value = value


def parse_record(value: Any) -> Record:
    """The record ``value`` (bytes, as CLAIM returned it); CorruptRecord when unreadable."""
    raw = value if isinstance(value, bytes) else str(value).encode()
    state, _, rest = raw.partition(b"|")
    try:
        if state == b"R":
            token, _, fingerprint = rest.partition(b"|")
            return Record("R", fingerprint.decode("ascii"), token=token.decode("ascii"))
        fingerprint, _, payload = rest.partition(b"|")
        meta_text, newline, body = payload.partition(b"\n")
        meta = json.loads(meta_text)
        status, reason = (meta.get("s"), meta.get("r")) if isinstance(meta, dict) else (0, 0)
        if not (isinstance(status, int) and 100 <= status <= 599):
            raise ValueError("its metadata has no HTTP status")
        if reason is not None and not _text(reason):
            raise ValueError("its reason phrase is not one")
        if state == b"D" and not (newline and _headers(meta.get("h"))):
            raise ValueError("a replayable record without its headers or its body")
        return Record(state.decode("ascii"), fingerprint.decode("ascii"), meta=meta, body=body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptRecord(raw, f"unreadable idempotency record ({exc})") from exc


def _headers(value: Any) -> bool:
    """Whether ``value`` is a list of [name, value] pairs of strings."""
    return isinstance(value, list) and all(
        isinstance(pair, list) and len(pair) == 2 and all(_text(v) for v in pair) for pair in value
    )


def _text(value: Any) -> bool:
    """Whether ``value`` is a str fit for a header line."""
    return isinstance(value, str) and "\n" not in value and "\r" not in value


def done_value(fingerprint: str, response: HttpResponseBase) -> bytes:
    """The record of a finished, rendered, non-streaming ``response``: replayable, or not
    kept when its body is over ``REPLAY_LIMIT``."""
    body = bytes(response.content)  # type: ignore[attr-defined]
    meta: dict[str, Any] = {"s": response.status_code, "r": response.reason_phrase}
    if len(body) > REPLAY_LIMIT:
        return not_kept_value(fingerprint, response, "too-large")
    meta["h"] = [
        [name, value]
        for name, value in response.items()
        if (name.lower().startswith("content-") and name.lower() != "content-length")
        or name.lower() in REPLAYED_HEADERS
    ]
    head = f"D|{fingerprint}|{json.dumps(meta, separators=(',', ':'))}\n".encode()
    return head + body


def not_kept_value(fingerprint: str, response: HttpResponseBase, why: str) -> bytes:
    meta = {"s": response.status_code, "why": why}
    return f"N|{fingerprint}|{json.dumps(meta, separators=(',', ':'))}".encode()


def replay(record: Record) -> HttpResponse:
    """The stored response again, byte for byte, marked ``Idempotent-Replayed: true``."""
    meta = record.meta or {}
    response = HttpResponse(record.body, status=meta["s"], reason=meta.get("r"))
    for name, value in meta["h"]:
        response[name] = value
    response["Idempotent-Replayed"] = "true"
    return response
