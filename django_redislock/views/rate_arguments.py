"""The forms ``@redis_rate_limited``'s ``rate`` and ``key`` take beyond a rate and a key
template, as django-ratelimit users write them: a rate of ``None`` (no limit), a callable
``(group, request) -> rate`` or the dotted path of one; a key callable ``(group, request)``
(told apart from ``(request, *args, **kwargs)`` by its first parameter's name) or the
dotted path of either. Every form is checked when the view is decorated; a dotted path is
imported then too, unless its module is still being imported (a view module naming its
own function), in which case at the first request."""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from ..ratelimit.keys import validate_key
from ..ratelimit.rate import RATE_RE, Rate, parse_rate

DOTTED_PATH = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")


class Rates:
    """The view's rate for each request: fixed, or asked of a callable per request."""

    def __init__(self, rate: Any) -> None:
        self.fixed: Rate | None = None
        self.function: Callable[[str, Any], Any] | None = None
        self.path: str | None = None
        if rate is None:
            return
        if callable(rate) and not isinstance(rate, (Rate, tuple)):
            self.function = rate
        elif isinstance(rate, str) and not RATE_RE.match(rate) and DOTTED_PATH.fullmatch(rate):
            self.path = rate
            self.function = _import(rate, "rate")
        else:
            self.fixed = parse_rate(rate)

    @property
    def unlimited(self) -> bool:
        return self.fixed is None and self.function is None and self.path is None

    def for_request(self, group: str, request: Any, where: str) -> Rate | None:
        """This request's rate; None: no limit. ``where`` names the view in errors."""
        if self.function is None and self.path is None:
            return self.fixed
        function = self.function or self._late_import(where)
        answer = function(group, request)
        if answer is None:
            return None
        try:
            return parse_rate(answer)
        except (TypeError, ValueError) as exc:
            raise ImproperlyConfigured(
                f"{where}: the rate callable {_name(function)} answered {answer!r}, "
                f"which is not a rate ({exc})."
            ) from exc

    def _late_import(self, where: str) -> Callable[..., Any]:
        assert self.path is not None
        function = _import(self.path, "rate")
        if function is None:
            raise ImproperlyConfigured(f"{where}: rate {self.path!r} cannot be imported.")
        self.function = function
        return function


# django-ratelimit's named keys. Here a string is a template, so each of these would be one
# fixed name shared by every client: a ported view would limit the whole site at once.
NAMED_KEYS = {
    "ip": "a callable such as lambda request, *args, **kwargs: 'ip:' + request.META['REMOTE_ADDR']",
    "user": "'user:{request.user.pk}'",
    "user_or_ip": "'user:{request.user.pk}' with anonymous='ip'",
}


def key_function(key: Any, prefix: str | None) -> Any:
    """``key`` as ``ViewGuard`` takes it: a template (prefixed with ``prefix:`` when given)
    or a callable ``(request, *args, **kwargs) -> name``; a ``(group, request)`` callable
    gets its group from ``with_group`` once the view is known."""
    if isinstance(key, str) and key in NAMED_KEYS:
        raise ValueError(
            f"key {key!r} is a django-ratelimit key name; here a key is a template, so it "
            f"would be one budget for every client. Write {NAMED_KEYS[key]}."
        )
    if isinstance(key, str) and "{" not in key and DOTTED_PATH.fullmatch(key):
        function = _import(key, "key")
        key = function if function is not None else _LateKey(key)
    if isinstance(key, str):
        return key if prefix is None else f"{prefix}:{key}"
    if not callable(key):
        raise TypeError(
            f"key must be a str template, a callable or a dotted path, not {type(key).__name__}."
        )
    if not isinstance(key, _LateKey) and _first_parameter(key) == "group":
        key = _GroupKey(key)
    return key if prefix is None else _Prefixed(key, prefix)


def with_group(key: Any, group: str) -> Any:
    """``key`` for one view: a ``(group, request)`` callable is called with ``group``."""
    if isinstance(key, _Prefixed):
        return _Prefixed(with_group(key.function, group), key.prefix)
    if isinstance(key, _GroupKey):
        return _GroupKey(key.function, group)
    return key


def validate_group(group: Any) -> str | None:
    """``group``: a name part that keeps a view's limits apart from others using the same key."""
    if group is None:
        return None
    try:
        return validate_key(group)
    except (TypeError, ValueError) as exc:
        raise type(exc)(str(exc).replace("Rate limit key", "group", 1)) from None


class _GroupKey:
    """django-ratelimit's key callable, ``(group, request) -> name``."""

    def __init__(self, function: Callable[..., Any], group: str = "") -> None:
        self.function, self.group = function, group

    def __call__(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        return self.function(self.group, request)


class _LateKey:
    """A key callable named by a dotted path its module had not defined yet at decoration."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.function: Callable[..., Any] | None = None

    def __call__(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        if self.function is None:
            function = _import(self.path, "key")
            if function is None:
                raise ImproperlyConfigured(f"key {self.path!r} cannot be imported.")
            self.function = function
        if _first_parameter(self.function) == "group":
            raise ImproperlyConfigured(
                f"key {self.path!r}: a (group, request) key callable must be importable when "
                "the view is decorated; define it in another module."
            )
        return self.function(request, *args, **kwargs)


class _Prefixed:
    def __init__(self, function: Callable[..., Any], prefix: str) -> None:
        self.function, self.prefix = function, prefix

    def __call__(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        name = self.function(request, *args, **kwargs)
        return f"{self.prefix}:{name}" if isinstance(name, str) else name


def _import(path: str, argument: str) -> Callable[..., Any] | None:
    """The callable at ``path``; None while its module is still being imported."""
    module = path.rpartition(".")[0]
    try:
        function = import_string(path)
    except ImportError as exc:
        spec = getattr(sys.modules.get(module), "__spec__", None)
        if getattr(spec, "_initializing", False):
            return None  # a module naming its own function, still being imported
        hint = "; a fixed key is written with ':' between its parts" if argument == "key" else ""
        raise ValueError(
            f"{argument} {path!r} looks like a dotted path to a callable but cannot be "
            f"imported ({exc}){hint}."
        ) from exc
    if not callable(function):
        raise TypeError(f"{argument} {path!r} names a {type(function).__name__}, not a callable.")
    return function  # type: ignore[no-any-return]


def _first_parameter(function: Callable[..., Any]) -> str | None:
    try:
        parameters = list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return None
    return parameters[0] if parameters else None


def _name(function: Any) -> str:
    return f"{getattr(function, '__module__', '?')}.{getattr(function, '__qualname__', function)}"
