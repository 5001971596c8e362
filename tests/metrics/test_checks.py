"""The system checks of the metrics settings (E030, E031): a wrong value is reported with a
hint, never a crash; the token itself never appears in a message."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from django_redislock.checks import check_settings

from .scraping import TOKEN


def ids(settings: Any, **redislock: Any) -> list[str]:
    settings.REDISLOCK = {"CACHE": "default", **redislock}
    return [message.id for message in check_settings()]  # type: ignore[misc]


@pytest.mark.parametrize("value", ["yes", 1, None, [True]])
def test_metrics_must_be_a_bool(settings: Any, value: Any) -> None:
    assert ids(settings, METRICS=value) == ["django_redislock.E030"]


def test_metrics_without_prometheus_client(settings: Any, monkeypatch: Any) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # as if not installed
    settings.REDISLOCK = {"CACHE": "default", "METRICS": True}
    (message,) = check_settings()
    assert message.id == "django_redislock.E030"
    assert "django-redislock[metrics]" in (message.hint or "")


def test_good_values_pass(settings: Any) -> None:
    assert ids(settings, METRICS=True, METRICS_TOKEN=TOKEN) == []
    assert ids(settings, METRICS=False, METRICS_TOKEN=None) == []


@pytest.mark.parametrize("value", ["tiny-secret", " " + TOKEN, 12345678901234567890, b"x" * 32, ""])
def test_a_token_must_be_a_long_enough_str(settings: Any, value: Any) -> None:
    settings.REDISLOCK = {"CACHE": "default", "METRICS_TOKEN": value}
    (message,) = check_settings()
    assert message.id == "django_redislock.E031"
    assert message.hint
    assert "secrets" in message.hint
    secret = str(value).strip()
    assert not secret or secret not in message.msg
