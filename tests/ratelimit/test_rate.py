"""Rates, bursts and limiter keys are checked before Redis is touched."""

from __future__ import annotations

from typing import Any

import pytest

from django_redislock.ratelimit.keys import limiter_key, validate_key
from django_redislock.ratelimit.limiter import RateLimit
from django_redislock.ratelimit.rate import Rate, parse_rate, validate_burst


@pytest.mark.parametrize(
    ("text", "count", "seconds"),
    [
        ("5/s", 5, 1),
        ("5/m", 5, 60),
        ("100/h", 100, 3600),
        ("1000/d", 1000, 86400),
        ("10/5m", 10, 300),
        ("10/2s", 10, 2),
        ("1/1s", 1, 1),
        ("10000/1d", 10000, 86400),
        ("100/10", 100, 10),  # django-ratelimit's unitless period: seconds
        ("100/10s", 100, 10),
        ("7/1", 7, 1),
        ("0/m", 0, 60),  # lets nothing through
    ],
)
def test_rates_parse_into_a_count_per_whole_microseconds(
    text: str, count: int, seconds: int
) -> None:
    rate = parse_rate(text)
    assert (rate.count, rate.period_us, rate.period, str(rate)) == (
        count,
        seconds * 1_000_000,
        seconds,
        text,
    )
    assert parse_rate(rate) is rate


@pytest.mark.parametrize(
    ("rate", "error", "match"),
    [
        (5, TypeError, "rate must be a str"),
        (None, TypeError, "rate must be a str"),
        ("5", ValueError, "'5' is not a rate"),
        ("5/", ValueError, "is not a rate"),
        ("/m", ValueError, "is not a rate"),
        ("5/min", ValueError, "is not a rate"),
        ("5 / m", ValueError, "is not a rate"),
        ("5/w", ValueError, "is not a rate"),
        ("-5/m", ValueError, "is not a rate"),
        ("1.5/m", ValueError, "is not a rate"),
        ("5/1.5m", ValueError, "is not a rate"),
        ("5/m\n", ValueError, "is not a rate"),
        ("\u0665/m", ValueError, "is not a rate"),
        ("10001/d", ValueError, "count must be from 0 to 10000"),
        ("100/0", ValueError, "period must be from 1 s"),
        ("100/m10", ValueError, "is not a rate"),
        ("100/10ms", ValueError, "is not a rate"),
        ((5,), TypeError, "two ints"),
        ((5, 1.5), TypeError, "two ints"),
        ((5, 0), ValueError, "period must be from 1 s"),
        ("5/0m", ValueError, "period must be from 1 s"),
        ("5/367d", ValueError, "period must be from 1 s to 366 days"),
        ("10000/7d", ValueError, "too large"),
    ],
)
def test_bad_rates_are_refused_clearly(rate: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        parse_rate(rate)
    with pytest.raises(error, match=match):
        RateLimit("k", rate=rate)


def test_django_ratelimit_count_and_seconds_pairs() -> None:
    rate = parse_rate((100, 10))
    assert (rate.count, rate.period_us, str(rate)) == (100, 10_000_000, "100/10s")


def test_burst_defaults_to_the_count_and_stays_within_it() -> None:
    rate = parse_rate("5/m")
    assert validate_burst(None, rate) == 5
    assert validate_burst(1, rate) == 1
    for bad, error in ((0, ValueError), (6, ValueError), (2.0, TypeError), (True, TypeError)):
        with pytest.raises(error, match="burst"):
            validate_burst(bad, rate)
    closed = parse_rate("0/m")
    assert validate_burst(None, closed) == validate_burst(0, closed) == 0
    with pytest.raises(ValueError, match="burst"):
        validate_burst(1, closed)


def test_keys_are_checked_and_hash_tagged_per_name() -> None:
    assert validate_key("points:42") == "points:42"
    for bad, match in (
        ("", "must not be empty"),
        ("a b", "whitespace"),
        ("a{b}", "brace"),
        ("x" * 201, "limit is 200"),
        ("a\x00", "control"),
    ):
        with pytest.raises(ValueError, match=f"Rate limit key .*{match}|{match}"):
            validate_key(bad)
    with pytest.raises(TypeError, match="Rate limit key must be a str"):
        validate_key(5)
    key = limiter_key("points:42", Rate(5, 60_000_000, "5/m"), 5)
    assert key == "redislock:{R:points:42}:5/60000000:5"


def test_hit_counts_are_checked() -> None:
    limit = RateLimit("k", rate="5/m", burst=3)
    for bad, error in ((0, ValueError), (4, ValueError), (1.0, TypeError), (False, TypeError)):
        with pytest.raises(error, match="n must be"):
            limit.hit(bad)
    with pytest.raises(TypeError, match="using"):
        RateLimit("k", rate="5/m", using=5)  # type: ignore[arg-type]
