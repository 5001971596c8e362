"""The key templates of ``@redis_locked``: checked when the view is decorated (a field the
view cannot have is a configuration error then, not at the first request) and filled from
the URL kwargs and ``request`` per request, every value %-encoded."""

from __future__ import annotations

import inspect
import string
from collections.abc import Callable
from hashlib import sha1
from typing import Any
from urllib.parse import quote

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest

from .locks.keys import MAX_NAME_LENGTH, validate_name

# A URL value keeps only letters, digits and "-._~" in a lock name; the rest is %-encoded,
# so no value can break the name's rules (braces, whitespace) or, holding the template's
# separators (":", "/"), make two different sets of values share a name.
_NAME_SAFE = ""


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

    def __init__(self, template: KeyTemplate, kwargs: dict[str, Any]) -> None:
        self.template = template
        self.kwargs = kwargs

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> Any:
        try:
            return super().get_field(field_name, args, kwargs)
        except (KeyError, IndexError, AttributeError) as exc:
            raise self.template.missing(field_name, self.kwargs, exc) from exc

    def format_field(self, value: Any, format_spec: str) -> str:
        return quote(format(value, format_spec), safe=_NAME_SAFE)


class KeyTemplate:
    def __init__(self, template: str, view: Callable[..., Any], view_name: str) -> None:
        self.template = template
        self.view = view
        self.view_name = view_name
        self._check()

    def _check(self) -> None:
        template = self.template
        try:
            roots = {
                field.split(".")[0].split("[")[0]
                for _, field, _, _ in string.Formatter().parse(template)
                if field is not None
            }
        except ValueError as exc:
            raise ImproperlyConfigured(
                f"@redis_locked on {self.view_name}: the key {template!r} is not a valid "
                f"template ({exc})."
            ) from exc
        if "" in roots:
            raise ImproperlyConfigured(
                f"@redis_locked on {self.view_name}: the key {template!r} has an empty {{}}; "
                "name the URL argument, e.g. {product_id}, or use {request.user.pk}."
            )
        anything: Any = _Anything()
        sample = string.Formatter().vformat(template, anything, anything)
        try:
            validate_name(sample)
        except (TypeError, ValueError) as exc:
            raise ImproperlyConfigured(
                f"@redis_locked on {self.view_name}: the key {template!r} cannot make a lock "
                f"name: {exc}"
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
                    f"@redis_locked on {self.view_name}: the key {template!r} names {root!r}, "
                    f"which is not an argument of the view (it takes {', '.join(parameters)})."
                )

    def missing(self, field: str, kwargs: dict[str, Any], exc: Exception) -> ImproperlyConfigured:
        return ImproperlyConfigured(
            f"@redis_locked on {self.view_name}: the key {self.template!r} names {field!r}, which "
            f"this request does not have ({type(exc).__name__}: {exc}; URL kwargs: "
            f"{', '.join(kwargs) or 'none'})."
        )

    def fill(self, request: HttpRequest, args: Any, kwargs: dict[str, Any]) -> str:
        """The lock name for this request (too long a name is cut and made unique)."""
        name = _Formatter(self, kwargs).vformat(self.template, args, {**kwargs, "request": request})
        if len(name) > MAX_NAME_LENGTH:  # long URL values: keep the name unique, and legal
            name = f"{name[: MAX_NAME_LENGTH - 41]}#{sha1(name.encode()).hexdigest()}"
        return name
