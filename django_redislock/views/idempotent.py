"""``@redis_idempotent``: a request resent with the same Idempotency-Key (a retry after a
timeout, a double click) runs the view once; the repeats get its response again.

The first request with a key claims it (one script, ``idempotency_records.CLAIM``), runs the
view while the lock renewer keeps the claim alive, and stores its response for ``ttl``. A
repeat finds the record in that same round trip: a stored response is replayed byte for
byte with ``Idempotent-Replayed: true``; a running one is answered 409 with ``Retry-After``
(or, with ``timeout``, waited for, woken by its end); another request under the same key
(method, path or body) is 422. A 5xx, a 429, an answer with ``Retry-After`` (a busy or
rate-limited refusal from a guard below) or an exception stores nothing and frees the key.
A streaming response runs once: a repeat is refused with 409, as is one whose response was
over ``REPLAY_LIMIT`` (1 MiB)."""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable, Iterable
from threading import current_thread
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.template.response import SimpleTemplateResponse

from .. import finalizers
from ..conf import ON_REDIS_ERROR_CHOICES
from ..locks import renewer as lock_renewer
from ..names import validate_seconds
from ..redis import aio
from ..redis.clients import get_redis
from .guard import REDIS_ERRORS, View, ViewGuard, refusal, refused, unavailable
from .idempotency_claims import Claim
from .idempotency_records import Record, done_value, not_kept_value, record_keys, replay
from .idempotency_requests import fingerprint, idempotency_key, request_scope
from .keys import ANONYMOUS_CHOICES, KeyRefused

logger = logging.getLogger("django_redislock.idempotent")

__all__ = ["redis_idempotent"]


def redis_idempotent(
    *,
    header: str = "Idempotency-Key",
    required: bool = False,
    ttl: float = 86400,
    timeout: float = 0,
    methods: Iterable[str] = ("POST", "PUT", "PATCH", "DELETE"),
    scope: Callable[[HttpRequest], str] | None = None,
    anonymous: str | None = None,
    on_redis_error: str | None = None,
    using: str | None = None,
) -> Callable[[View], View]:
    """Run a view once per Idempotency-Key (``header``) and replay its response to repeats
    for ``ttl`` seconds. Keys are per user (``scope(request) -> str`` to change that);
    anonymous visitors as ``anonymous`` says (``"deny"``, the default: 403; ``"ip"``;
    ``"shared"``). A repeat while the first runs waits up to ``timeout`` seconds, then gets
    409. Only ``methods`` are guarded. See the module docstring and docs/reference/views.rst."""
    if not isinstance(header, str) or not header:
        raise TypeError("header must be a non-empty str (an HTTP header name).")
    if not isinstance(required, bool):
        raise TypeError(f"required must be a bool, not {type(required).__name__}.")
    ttl = validate_seconds(ttl, "ttl", allow_zero=False, allow_inf=False)
    timeout = validate_seconds(timeout, "timeout", allow_zero=True, allow_inf=False)
    if isinstance(methods, str) or not all(isinstance(m, str) for m in methods):
        raise TypeError('methods must be a list of HTTP method names, e.g. ("POST",).')
    if scope is not None and not callable(scope):
        raise TypeError(f"scope must be a callable, not {type(scope).__name__}.")
    for value, argument, choices in (
        (anonymous, "anonymous", ANONYMOUS_CHOICES),
        (on_redis_error, "on_redis_error", ON_REDIS_ERROR_CHOICES),
    ):
        if value is not None and value not in choices:
            raise ValueError(
                f"{argument} must be one of {', '.join(map(repr, choices))}, not {value!r}."
            )
    if using is not None and not isinstance(using, str):
        raise TypeError(f"using must be a cache alias or a Redis URL, not {type(using).__name__}.")
    guarded = frozenset(m.upper() for m in methods)

    def decorate(view: View) -> View:
        guard = _IdempotencyGuard(view, on_redis_error=on_redis_error, using=using)
        guard.header, guard.required, guard.methods = header, required, guarded
        guard.ttl_ms, guard.timeout = int(ttl * 1000), timeout
        guard.scope, guard.anonymous = scope, anonymous or "deny"
        guard.needs_user = scope is None
        return guard.wrap()  # type: ignore[no-any-return]

    return decorate


class _IdempotencyGuard(ViewGuard):
    decorator = "@redis_idempotent"
    header: str
    required: bool
    methods: frozenset[str]
    ttl_ms: int
    timeout: float
    scope: Callable[[HttpRequest], str] | None
    anonymous: str

    def __init__(self, view: Callable[..., Any], *, on_redis_error: str | None, using: str | None):
        super().__init__(view, _no_key, on_redis_error=on_redis_error, anonymous=None, using=using)

    def begin(self, request: HttpRequest) -> Claim | HttpResponse | None:
        """The claim to try; a refusal; or None: the view runs unguarded."""
        if request.method not in self.methods or getattr(request, _GUARDED, False):
            return None  # (guarded already: the decorator is stacked on itself)
        try:
            key = idempotency_key(request, self.header, self.required)
            if key is None:
                return None
            keys = record_keys(request_scope(request, self.scope, self.anonymous), key)
        except KeyRefused as no_key:
            return refused(request, no_key)
        setattr(request, _GUARDED, True)
        return Claim(keys, fingerprint(request), self.using, get_redis(self.using))

    def sync_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        claim = self.begin(request)
        if claim is None:
            return self.view(request, *args, **kwargs)
        if isinstance(claim, HttpResponseBase):
            return claim
        try:
            found = claim.take(claim.renew_client, self.timeout)
        except REDIS_ERRORS as exc:
            if self.open_on(claim, exc):
                return self.view(request, *args, **kwargs)
            return unavailable(request)
        if found is not None:
            return self.answer(request, claim, found)
        lock_renewer.renewer.add(claim, claim.hold, current_thread())
        try:
            response = self.view(request, *args, **kwargs)
        except BaseException:
            claim.end(b"", self.ttl_ms)
            raise
        value = self.outcome(response, claim)
        if value is not None:
            claim.end(value, self.ttl_ms)
        return response

    async def async_view(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        claim = self.begin(request)
        if claim is None:
            return await self.view(request, *args, **kwargs)
        if isinstance(claim, HttpResponseBase):
            return claim
        try:
            found = await claim.atake(aio.get_async_redis(self.using), self.timeout)
        except REDIS_ERRORS as exc:
            if self.open_on(claim, exc):
                return await self.view(request, *args, **kwargs)
            return unavailable(request)
        if found is not None:
            return self.answer(request, claim, found)
        lock_renewer.renewer.add(claim, claim.hold, asyncio.current_task())
        try:
            response = await self.view(request, *args, **kwargs)
        except BaseException:
            await asyncio.shield(claim.aend(b"", self.ttl_ms))
            raise
        value = self.outcome(response, claim)
        if value is not None:
            await asyncio.shield(claim.aend(value, self.ttl_ms))
        return response

    def open_on(self, claim: Claim, exc: Exception) -> bool:
        return self.open_on_error(exc, f"its {self.header} ({claim.keys.record})")

    def outcome(self, response: Any, claim: Claim) -> bytes | None:
        """What the claim ends with after ``response``: the record to store, or b"" (the key
        is freed); None when that waits for the response's render."""
        if not isinstance(response, HttpResponseBase) or not _storable(response):
            return b""
        if response.streaming:
            return not_kept_value(claim.fingerprint, response, "streaming")
        if isinstance(response, SimpleTemplateResponse) and not response.is_rendered:
            # Stored once rendered (a DRF Response is rendered after the view); freed if it
            # never is (discarded by a middleware, say).
            response.add_post_render_callback(
                lambda rendered: claim.end(done_value(claim.fingerprint, rendered), self.ttl_ms)
            )
            finalizers.start()
            weakref.finalize(response, finalizers.post, lambda: claim.end(b"", self.ttl_ms))
            return None
        return done_value(claim.fingerprint, response)

    def answer(self, request: HttpRequest, claim: Claim, found: Record) -> HttpResponse:
        """The answer to a repeat that found ``found``."""
        if found.fingerprint != claim.fingerprint:
            detail = f"This {self.header} was used with another request (method, path or body)."
            return refusal(request, 422, "idempotency-key-reused", detail, retry_after=None)
        if found.state == "D":
            return replay(found)
        if found.state == "N":
            why = "it was streamed" if found.meta and found.meta.get("why") == "streaming" else ""
            detail = (
                f"A request with this {self.header} was processed already; its response "
                f"cannot be replayed ({why or 'it was too large'})."
            )
            status = {"status": found.meta and found.meta.get("s")}
            return refusal(
                request, 409, "idempotency-key-used", detail, retry_after=None, extra=status
            )
        detail = f"A request with this {self.header} is still being processed; retry shortly."
        return refusal(request, 409, "idempotency-key-in-flight", detail)


_GUARDED = "_redislock_idempotent"  # set on a request the decorator has taken in hand


def _no_key(request: HttpRequest, *args: Any, **kwargs: Any) -> str:
    raise AssertionError("@redis_idempotent names no key")  # never called: it has records


def _storable(response: HttpResponseBase) -> bool:
    """Whether a response is the outcome to keep: not a 5xx, not a "retry later" (a 429, or
    any answer with Retry-After: a guard below was busy or rate-limited)."""
    status = response.status_code
    return status < 500 and status != 429 and not response.has_header("Retry-After")
