"""The key templates of ``@redis_locked`` and ``@redis_rate_limited``: checked when the view
is decorated (a field the view cannot have is a configuration error then, not at the first
request) and filled from the URL kwargs and ``request`` per request, every value %-encoded.

A template that reads ``request.user`` never puts anonymous visitors under one key by
accident (``{request.user.pk}`` is "None" for all of them): the decorator's ``anonymous``
option says what they get. ``"deny"`` (the default) refuses them (``KeyRefused``, answered
403); ``"ip"`` keys each by its address (``REMOTE_ADDR``; IPv6 by its /64 network, which one
client easily owns whole; ``@redis_rate_limited`` takes ``ipv4_mask``/``ipv6_mask`` to
group wider); ``"shared"`` puts them all under one key, on purpose. The
replacement starts with "!", which no %-encoded value contains, so it never equals a
user's key."""

from __future__ import annotations

import inspect
import ipaddress
import logging
import re
import string
from collections.abc import Callable
from hashlib import sha1
from typing import Any
from urllib.parse import quote

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest

from ..names import MAX_NAME_LENGTH, validate_name

logger = logging.getLogger("django_redislock.view_keys")  # its name before views/

# A URL value keeps only letters, digits and "-._~" in a lock name; the rest is %-encoded,
# so no value can break the name's rules (braces, whitespace) or, holding the template's
# separators (":", "/"), make two different sets of values share a name.
_NAME_SAFE = ""
ANONYMOUS_CHOICES = ("deny", "ip", "shared")
# A field that reads the user: request.user, request.user.pk, request.user[...].
_USER_FIELD = re.compile(r"^request\.user(?:[.\[]|$)")


class KeyRefused(Exception):
    """This request cannot be given a key: answered ``status`` with ``code`` and ``detail``
    (never a 500)."""

    def __init__(self, status: int, code: str, detail: str) -> None:
        super().__init__(detail)
        self.status, self.code, self.detail = status, code, detail


def refuse_anonymous() -> KeyRefused:
    return KeyRefused(403, "login-required", "Log in to use this.")


class _Raw(str):
    """A field's value written into the name as it is (not %-encoded)."""


class _Anything(dict[Any, Any]):
    """Stands for any URL argument, and any attribute of it, when checking a template."""

    def __getitem__(self, key: Any) -> Any:
        return self

    def __getattr__(self, name: str) -> Any:
        return self

    def __format__(self, spec: str) -> str:
        return "x"


class _Formatter(string.Formatter):
    """Fills a key template; a name the request lacks is a configuration error, and every
    value is %-encoded."""

    def __init__(self, template: KeyTemplate, kwargs: dict[str, Any], user: str | None) -> None:
        self.template = template
        self.kwargs = kwargs
        self.user = user  # what stands for an anonymous user's fields, if one is

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> Any:
        if self.user is not None and _USER_FIELD.match(field_name):
            return _Raw(self.user), field_name
        try:
            return super().get_field(field_name, args, kwargs)
        except (KeyError, IndexError, AttributeError) as exc:
            raise self.template.missing(field_name, self.kwargs, exc) from exc

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        return value if isinstance(value, _Raw) else super().convert_field(value, conversion)

    def format_field(self, value: Any, format_spec: str) -> str:
        if isinstance(value, _Raw):
            return str.__str__(value)
        return quote(format(value, format_spec), safe=_NAME_SAFE)


class KeyTemplate:
    def __init__(
        self,
        template: str,
        view: Callable[..., Any],
        view_name: str,
        *,
        decorator: str = "@redis_locked",
        what: str = "lock name",
        anonymous: str = "deny",
        validate: Callable[[Any], str] = validate_name,
        ip_masks: tuple[int, int] = (32, 64),
    ) -> None:
        self.template = template
        self.validate = validate
        self.ip_masks = ip_masks
        self.view = view
        self.where = f"{decorator} on {view_name}"
        self.what = what
        self.anonymous = anonymous
        self.reads_user = False
        self._check()

    def _check(self) -> None:
        template = self.template
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
        except ValueError as exc:
            raise ImproperlyConfigured(
                f"{self.where}: the key {template!r} is not a valid template ({exc})."
            ) from exc
        roots = {field.split(".")[0].split("[")[0] for field in fields}
        self.reads_user = any(_USER_FIELD.match(field) for field in fields)
        if "" in roots:
            raise ImproperlyConfigured(
                f"{self.where}: the key {template!r} has an empty {{}}; name the URL "
                "argument, e.g. {product_id}, or use {request.user.pk}."
            )
        anything: Any = _Anything()
        sample = string.Formatter().vformat(template, anything, anything)
        try:
            self.validate(sample)
        except (TypeError, ValueError) as exc:
            raise ImproperlyConfigured(
                f"{self.where}: the key {template!r} cannot make a {self.what}: {exc}"
            ) from exc
        try:
            parameters = inspect.signature(self.view).parameters
        except (TypeError, ValueError):
            return
        if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
            return  # URL kwargs are only known per request
        for root in sorted(roots - {"request"}):
            if not root.isdigit() and root not in parameters:
                raise ImproperlyConfigured(
                    f"{self.where}: the key {template!r} names {root!r}, which is not an "
                    f"argument of the view (it takes {', '.join(parameters)})."
                )

    def missing(self, field: str, kwargs: dict[str, Any], exc: Exception) -> ImproperlyConfigured:
        return ImproperlyConfigured(
            f"{self.where}: the key {self.template!r} names {field!r}, which this request "
            f"does not have ({type(exc).__name__}: {exc}; URL kwargs: "
            f"{', '.join(kwargs) or 'none'})."
        )

    def fill(self, request: HttpRequest, args: Any, kwargs: dict[str, Any]) -> str:
        """The name for this request (too long a name is cut and made unique). Raises
        ``KeyRefused`` for an anonymous user the ``anonymous`` option does not let in."""
        user = self._anonymous(request) if self.reads_user else None
        values = {**kwargs, "request": request}
        name = _Formatter(self, kwargs, user).vformat(self.template, args, values)
        if len(name) > MAX_NAME_LENGTH:  # long URL values: keep the name unique, and legal
            name = f"{name[: MAX_NAME_LENGTH - 41]}#{sha1(name.encode()).hexdigest()}"
        return name

    def _anonymous(self, request: HttpRequest) -> str | None:
        """What stands for the user's fields when the user is anonymous, else None."""
        user = getattr(request, "user", None)
        if user is None or not getattr(user, "is_anonymous", False):
            return None  # a user, or no auth middleware: filled (or reported) as it is
        if self.anonymous == "shared":
            return "!anonymous"
        if self.anonymous == "ip":
            network = client_network(request.META.get("REMOTE_ADDR"), *self.ip_masks)
            if network is not None:
                return f"!ip:{quote(network, safe=_NAME_SAFE)}"
            logger.warning(
                "%s: anonymous='ip' but the request has no valid REMOTE_ADDR (%r); refused. "
                "Behind a proxy, set REMOTE_ADDR from the header it adds.",
                self.where,
                request.META.get("REMOTE_ADDR"),
            )
        raise refuse_anonymous()


def client_network(address: Any, ipv4_mask: int = 32, ipv6_mask: int = 64) -> str | None:
    """The client's address as it keys anonymous users: its IPv4 network of ``ipv4_mask``
    bits (a /32 is the address itself), or its IPv6 network of ``ipv6_mask`` bits (a /64
    by default, which one client easily owns whole); None when ``address`` is not an IP
    address."""
    try:
        ip = ipaddress.ip_address(str(address or "").split("%")[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is None:
            return _network(ip, ipv6_mask, 128)
        ip = ip.ipv4_mapped
    return _network(ip, ipv4_mask, 32)


def _network(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, mask: int, bits: int) -> str:
    return str(ip) if mask == bits else str(ipaddress.ip_network(f"{ip}/{mask}", strict=False))


def validate_ip_masks(ipv4_mask: Any, ipv6_mask: Any) -> tuple[int, int]:
    """The prefix lengths that group anonymous clients by network: 0-32 and 0-128 bits."""
    for argument, mask, bits in (("ipv4_mask", ipv4_mask, 32), ("ipv6_mask", ipv6_mask, 128)):
        if not isinstance(mask, int) or isinstance(mask, bool):
            raise TypeError(f"{argument} must be a prefix length (int), not {type(mask).__name__}.")
        if not 0 <= mask <= bits:
            raise ValueError(f"{argument} must be from 0 to {bits} bits, not {mask}.")
    return ipv4_mask, ipv6_mask
