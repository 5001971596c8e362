"""The keys a job's limits count under (``concurrency_key``, ``rate_key``): templates filled
from the call's arguments at enqueue ("export:{user_id}", "{0}" for the first positional
one), kept rendered in the job's metadata with the limit or rate (``{"concurrency": {"key":
..., "limit": ...}}``, ``{"rate_limit": {"key": ..., "count": ..., "period": ms}}``, apart
from the options' own names, which keep the task's template), where POP reads them (see
``limit_lua``).

A template is checked when a task is decorated (a field its function cannot be given is an
error then) and filled at enqueue: a field the call does not give is a ValueError naming it;
the key it renders must be a valid name (``names.validate_name``: at most 200 characters,
no braces, whitespace or control characters)."""

from __future__ import annotations

import decimal
import inspect
import string
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..names import validate_name
from ..ratelimit.rate import parse_rate
from .options import checked_option, imported

KEY_OPTION, LIMIT_OPTION = "concurrency_key", "concurrency_limit"
RATE_KEY_OPTION, RATE_OPTION = "rate_key", "rate"
LIMIT_OPTIONS = (KEY_OPTION, LIMIT_OPTION, RATE_KEY_OPTION, RATE_OPTION)
# (reserved in a job's metadata)
CONCURRENCY_META = "concurrency"  # {"key": ..., "limit": ...}
# What a template's field may be filled with: values whose text is the same in every process.
KEY_VALUES = (str, int, float, decimal.Decimal, uuid.UUID)
RATE_META = "rate_limit"  # {"key": ..., "count": ..., "period": ms}
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
        value = args[field] if isinstance(field, int) else named[field]
        if value is None:  # "None" would put every such call under one key
            raise ValueError(f"{option} {template!r:.80}: argument {field!r} is None.")
        if not isinstance(value, KEY_VALUES) or isinstance(value, bool):
            raise TypeError(
                f"{option} {template!r:.80}: argument {field!r} is a {type(value).__name__}; "
                "a key is made of strings and numbers."
            )
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


def _rendered(
    option: str, template: str, args: Sequence[Any], kwargs: Mapping[str, Any] | None, task: str
) -> str:
    """``template`` filled from the call; positional arguments found by name through the
    function ``task`` (a path) names, when the template needs it."""
    kwargs = kwargs or {}
    by_name = any(isinstance(f, str) and f not in kwargs for f in template_fields(template, option))
    return render_key(template, args, kwargs, task_function(task) if by_name else None, option)


def _with(meta: Any, added: dict[str, Any]) -> Any:
    if meta is None:
        return added
    return {**meta, **added} if isinstance(meta, Mapping) else meta


def with_limits(
    meta: Any,
    given: Mapping[str, Any],
    args: Sequence[Any],
    kwargs: Mapping[str, Any] | None,
    task: str,
) -> Any:
    """``meta`` carrying the keys ``given`` (the four options by name, None for unset) render
    for this call: the concurrency key with its limit (default 1), the rate key with its
    rate. A limit or a rate without its key is an error, and a rate of 0 jobs."""
    template, limit = given.get(KEY_OPTION), given.get(LIMIT_OPTION)
    rate_template, rate = given.get(RATE_KEY_OPTION), given.get(RATE_OPTION)
    for name in (KEY_OPTION, LIMIT_OPTION, RATE_KEY_OPTION, RATE_OPTION):
        checked_option(name, given.get(name))
    if template is None and limit is not None:
        raise ValueError(f"{LIMIT_OPTION} needs a {KEY_OPTION}.")
    if rate_template is not None and rate is None:
        raise ValueError(f"{RATE_KEY_OPTION} needs a {RATE_OPTION}.")
    if rate_template is None and rate is not None:
        raise ValueError(f"{RATE_OPTION} needs a {RATE_KEY_OPTION}.")
    added: dict[str, Any] = {}
    if template is not None:
        key = _rendered(KEY_OPTION, template, args, kwargs, task)
        added[CONCURRENCY_META] = {"key": key, "limit": DEFAULT_LIMIT if limit is None else limit}
    if rate_template is not None:
        parsed = parse_rate(rate)
        if parsed.count < 1:
            raise ValueError(f"{RATE_OPTION} {rate!r}: a job's rate lets at least one start.")
        key = _rendered(RATE_KEY_OPTION, rate_template, args, kwargs, task)
        period_ms = parsed.period_us // 1000
        added[RATE_META] = {"key": key, "count": parsed.count, "period": period_ms}
    return _with(meta, added) if added else meta


def with_item_limits(meta: Any, spec: Mapping[str, Any]) -> Any:
    """``with_limits`` for an ``enqueue_many`` item (a dict of ``enqueue``'s arguments)."""
    if all(spec.get(name) is None for name in LIMIT_OPTIONS):
        return meta
    task = spec.get("task")
    path = task if isinstance(task, str) else ""
    return with_limits(meta, spec, spec.get("args", ()), spec.get("kwargs"), path)
