"""The key a job's concurrency limit counts under (``concurrency_key``): a template filled
from the call's arguments at enqueue ("export:{user_id}", "{0}" for the first positional
one), kept rendered in the job's metadata with its limit (``{"concurrency": {"key": ...,
"limit": ...}}``, apart from the options' own names, which keep the task's template), where
POP reads both (see ``limit_lua``).

A template is checked when a task is decorated (a field its function cannot be given is an
error then) and filled at enqueue: a field the call does not give is a ValueError naming it;
the key it renders must be a valid name (``names.validate_name``: at most 200 characters,
no braces, whitespace or control characters)."""

from __future__ import annotations

import inspect
import string
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..names import validate_name
from .options import checked_option, imported

KEY_OPTION, LIMIT_OPTION = "concurrency_key", "concurrency_limit"
CONCURRENCY_META = "concurrency"  # (reserved in a job's metadata)
DEFAULT_LIMIT = 1


def template_fields(template: str, option: str = KEY_OPTION) -> list[str | int]:
    """The fields ``template`` reads: argument names, and positions ("{0}"); a ValueError
    naming ``option`` for a template ``str.format`` cannot fill from plain arguments."""
    fields: list[str | int] = []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValueError(f"{option} {template!r:.80} is not a valid template: {exc}.") from exc
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if not name.isidentifier() and not name.isdigit():
            raise ValueError(
                f"{option} {template!r:.80}: field {{{name}}} must name an argument "
                '("{user_id}") or a position ("{0}").'
            )
        if spec or conversion:
            raise ValueError(f"{option} {template!r:.80}: field {{{name}}} takes no format.")
        fields.append(int(name) if name.isdigit() else name)
    return fields


def check_template(
    template: str, func: Callable[..., Any] | None, option: str = KEY_OPTION
) -> None:
    """At decoration: every field of ``template`` is an argument ``func`` can be given."""
    fields = template_fields(template, option)
    if func is None:
        return
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):  # no signature to check against: checked at enqueue
        return
    kinds = {p.kind for p in parameters}
    names = {p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    for field in fields:
        if isinstance(field, int):
            if field >= len(positional) and inspect.Parameter.VAR_POSITIONAL not in kinds:
                raise ValueError(
                    f"{option} {template!r:.80}: the task takes no positional argument {field}."
                )
        elif field not in names and inspect.Parameter.VAR_KEYWORD not in kinds:
            raise ValueError(f"{option} {template!r:.80}: the task has no argument {field!r}.")


def render_key(
    template: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None,
    func: Callable[..., Any] | None = None,
    option: str = KEY_OPTION,
) -> str:
    """``template`` filled from a call's ``args`` and ``kwargs`` (positional arguments found
    by name through ``func``'s signature, with its defaults), checked as a name."""
    kwargs = kwargs or {}
    named: dict[str, Any] = dict(kwargs)
    fields = template_fields(template, option)
    if func is not None and any(isinstance(f, str) and f not in kwargs for f in fields):
        try:
            bound = inspect.signature(func).bind_partial(*args, **kwargs)
            bound.apply_defaults()
            named = {**bound.arguments, **kwargs}
        except (TypeError, ValueError):
            pass  # the call does not fit the function: its fields are looked up plainly
    for field in fields:
        if isinstance(field, int) and field >= len(args):
            raise ValueError(f"{option} {template!r:.80} reads argument {field}, not given.")
        if isinstance(field, str) and field not in named:
            raise ValueError(f"{option} {template!r:.80} reads argument {field!r}, not given.")
    key = template.format(*args, **named)
    try:
        return validate_name(key, what=option)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{exc} (from template {template!r:.80})") from exc


def task_function(task: str) -> Callable[..., Any] | None:
    """The function a task path names (a task's own, or a plain function), if it imports."""
    try:
        found = imported(task)
    except (ImportError, ValueError):
        return None
    found = getattr(found, "func", found)
    return found if callable(found) else None


def with_concurrency(
    meta: Any,
    template: str | None,
    limit: int | None,
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None,
    task: str,
) -> Any:
    """``meta`` carrying the rendered concurrency key and its limit (default 1); ``meta``
    itself when no key is given (a limit alone is an error). Positional arguments are found
    by name through the function ``task`` (a path) names, when the template needs it."""
    checked_option(KEY_OPTION, template)
    checked_option(LIMIT_OPTION, limit)
    if template is None:
        if limit is not None:
            raise ValueError(f"{LIMIT_OPTION} needs a {KEY_OPTION}.")
        return meta
    fields = template_fields(template)
    kwargs = kwargs or {}
    by_name = any(isinstance(f, str) and f not in kwargs for f in fields)
    key = render_key(template, args, kwargs, task_function(task) if by_name else None)
    added = {CONCURRENCY_META: {"key": key, "limit": DEFAULT_LIMIT if limit is None else limit}}
    if meta is None:
        return added
    return {**meta, **added} if isinstance(meta, Mapping) else meta
