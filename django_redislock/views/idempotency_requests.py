"""What ``@redis_idempotent`` reads from a request: its Idempotency-Key (checked), whose key it
is (the scope), and its fingerprint (method, path and body), which a repeat must match."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.http.request import RawPostDataException

from .keys import KeyRefused, client_network, refuse_anonymous

logger = logging.getLogger("django_redislock.idempotent")

# A key is 1-255 printable ASCII characters (the IETF draft's and Stripe's bound); anything
# else (empty, longer, control characters, non-ASCII) is refused before Redis is touched.
_KEY = re.compile(r"[\x20-\x7e]{1,255}")


def idempotency_key(request: HttpRequest, header: str, required: bool) -> str | None:
    """The request's key, or None when it sent none and none is ``required``. KeyRefused
    (400) when the key is missing but required, or malformed (an empty value included)."""
    # (META straight away: ``request.headers`` would copy every header first.)
    value: str | None = request.META.get("HTTP_" + header.upper().replace("-", "_"))
    if value is None:
        if required:
            raise KeyRefused(
                400, "idempotency-key-missing", f"This request needs an {header} header."
            )
        return None
    if not _KEY.fullmatch(value):
        raise KeyRefused(
            400,
            "idempotency-key-malformed",
            f"The {header} header must be 1 to 255 printable ASCII characters.",
        )
    return value


def request_scope(
    request: HttpRequest, scope: Callable[[HttpRequest], str] | None, anonymous: str
) -> str:
    """Whose keys this request's key is among: ``scope(request)`` when given; else the
    user's, and for an anonymous visitor as ``anonymous`` says ("deny": refused with 403,
    "ip": its network's, "shared": one scope for them all)."""
    if scope is not None:
        value = scope(request)
        if not isinstance(value, str):
            raise TypeError(f"scope must return a str, not {type(value).__name__}.")
        return f"s:{value}"
    user = getattr(request, "user", None)
    if user is not None and getattr(user, "is_authenticated", False):
        return f"u:{user.pk}"
    if anonymous == "shared":
        return "anonymous"
    if anonymous == "ip":
        network = client_network(request.META.get("REMOTE_ADDR"))
        if network is not None:
            return f"ip:{network}"
    raise refuse_anonymous()


def fingerprint(request: HttpRequest) -> str:
    """SHA-256 of the method, the full path (the query string included) and the body. A
    multipart form stands by its fields and its files' names and sizes: a client's retry may
    send the same form with another boundary (and the CSRF check may have parsed it). A
    larger body than Django lets a request hold in memory (``DATA_UPLOAD_MAX_MEMORY_SIZE``)
    is not read: its length and type stand for it."""
    digest = hashlib.sha256()
    digest.update(f"{request.method}\n{request.get_full_path()}\n".encode())
    kind = request.META.get("CONTENT_TYPE", "")
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    length = _content_length(request)
    small = limit is None or length <= limit
    if kind.startswith("multipart/"):
        if small:
            request.body  # noqa: B018 (kept in memory, so the view can still read it)
        digest.update(repr(sorted(request.POST.lists())).encode())
        files = [(n, f.name, f.size) for n, many in request.FILES.lists() for f in many]
        digest.update(repr(sorted(files)).encode())
    elif small:
        digest.update(_body(request))
    else:
        digest.update(f"unread:{length}:{kind}".encode())
    return digest.hexdigest()


def _body(request: Any) -> bytes:
    """The raw body; once read as a stream (a DRF view whose authentication or permissions
    read ``request.data`` first), what was parsed from it."""
    try:
        return bytes(request.body)
    except RawPostDataException:
        data = getattr(request, "data", None)
        if data is None:
            logger.warning(
                "@redis_idempotent on %s: the request's body was read as a stream before the "
                "decorator, so its fingerprint leaves the body out.",
                request.path,
            )
        return json.dumps(data, sort_keys=True, default=str).encode()


def _content_length(request: Any) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0
