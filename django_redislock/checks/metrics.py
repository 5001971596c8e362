"""Checks of the metrics settings: ``METRICS`` (counting job runs and lock events) and
``METRICS_TOKEN`` (who may read the Prometheus view)."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable
from typing import Any

from django.core.checks import Error

from .values import short

MIN_TOKEN = 16  # characters: a token anybody could guess guards nothing


def check_metrics(value: Any) -> Iterable[Error]:
    if not isinstance(value, bool):
        yield Error(
            f"REDISLOCK['METRICS'] must be True or False, not {short(value)}.",
            hint="Set it to True to count job runs and lock events for the Prometheus view.",
            id="django_redislock.E030",
        )
    elif value and importlib.util.find_spec("prometheus_client") is None:
        yield Error(
            "REDISLOCK['METRICS'] is True but prometheus_client is not installed.",
            hint="pip install 'django-redislock[metrics]', or set REDISLOCK['METRICS'] to False.",
            id="django_redislock.E030",
        )


def check_metrics_token(value: Any) -> Iterable[Error]:
    if value is None:
        return
    if not isinstance(value, str) or len(value) < MIN_TOKEN or value != value.strip():
        # never the value itself in the message: it is a secret
        what = (
            "too short, or with spaces around it"
            if isinstance(value, str)
            else f"of type {type(value).__name__}"
        )
        yield Error(
            f"REDISLOCK['METRICS_TOKEN'] must be None or a secret of at least {MIN_TOKEN} "
            f"characters without surrounding spaces; it is {what}.",
            hint="Generate one (python -c 'import secrets; print(secrets.token_urlsafe(32))'), "
            "read it from the environment, and give Prometheus the same as its bearer token.",
            id="django_redislock.E031",
        )
