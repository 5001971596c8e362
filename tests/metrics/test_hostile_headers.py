"""The metrics view against hostile request headers, on fakeredis and a real redis-server:
any Accept header gets a scrape in a format and version Prometheus knows (the plain text
format when the one asked is unknown or malformed), any Authorization header but the token
gets 403; never a 500."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from tests.support.fixtures import Backend, configure_backend

from .scraping import TOKEN, URL

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.metrics.urls")]

PLAIN = "text/plain; version=0.0.4; charset=utf-8"
TEXT_1 = "text/plain; version=1.0.0; charset=utf-8"
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
# (Accept, the Content-Type answered, up to its escaping)
ACCEPTS = [
    ("application/openmetrics-text; version=abc", PLAIN),
    ("application/openmetrics-text; version=1.x", PLAIN),
    ("application/openmetrics-text; version=1e9", PLAIN),
    ("application/openmetrics-text; version=1.0.0a1", PLAIN),
    ("application/openmetrics-text; version=\x00", PLAIN),
    ("application/openmetrics-text; version=2.0.0", PLAIN),
    ("application/openmetrics-text; version=99999999999999999999.0.0", PLAIN),
    ("application/openmetrics-text; version=1.0.0.0.0", PLAIN),
    ("application/openmetrics-text; version=-1.0.0", PLAIN),
    ("text/plain; version=abc", PLAIN),
    ("text/plain; version=5.0.0; escaping=values", TEXT_1),  # the newest it knows
    ("", PLAIN),
    (",,,;;;==", PLAIN),
    ("*/*", PLAIN),
    ("a" * 100_000, PLAIN),
    ("application/openmetrics-text; version=abc, " * 2_000, PLAIN),
    ("application/openmetrics-text;;;=;=", OPENMETRICS),
    ("application/openmetrics-text; version=1.0.0", OPENMETRICS),
    ("application/openmetrics-text; version=1.0.0; escaping=bogus", OPENMETRICS),
    ("text/html, application/openmetrics-text; version=1.0.0", OPENMETRICS),
]
AUTHORIZATIONS = [
    "Bearer " + "x" * 100_000,
    "Bearer \x00",
    f"Bearer {TOKEN}\x00",
    f"Bearer {TOKEN} extra",
    f"Bearer\t{TOKEN}",
    f"Bearer{TOKEN}",
    "Bearer tök€n",
    "\xff\xfe",
    "Bearer",
    "Bearer ",
    "   ",
    "Basic YWRtaW46YWRtaW4=",
    f"Token {TOKEN}",
    f"Bearer {TOKEN.upper()}",
    "Bearer " + "\u202e" * 1000,
]


@pytest.fixture(params=["fakeredis", "redis"])
def store(request: pytest.FixtureRequest, settings: Any) -> Backend:
    backend = configure_backend(request, settings, request.param)
    settings.REDISLOCK = {**settings.REDISLOCK, "QUEUES": {"default": {}}, "METRICS_TOKEN": TOKEN}
    return backend


@pytest.mark.parametrize(("accept", "answered"), ACCEPTS)
def test_any_accept_header_gets_a_format_prometheus_reads(
    store: Backend, accept: str, answered: str
) -> None:
    response = Client().get(URL, HTTP_AUTHORIZATION=f"Bearer {TOKEN}", HTTP_ACCEPT=accept)
    assert response.status_code == 200, response.content[:2000]
    content_type = response["Content-Type"]
    assert content_type.split("; escaping=")[0] == answered
    text = response.content.decode()
    parse = openmetrics_families if answered == OPENMETRICS else text_string_to_metric_families
    names = {family.name for family in parse(text)}
    assert any(name.startswith("redislock_queue") for name in names), names


@pytest.mark.parametrize("authorization", AUTHORIZATIONS)
def test_any_authorization_but_the_token_is_refused(
    store: Backend, admin_client: Client, authorization: str
) -> None:
    assert Client().get(URL, HTTP_AUTHORIZATION=authorization).status_code == 403
    # Even from a session that could read: a header that is not the token is refused
    assert admin_client.get(URL, HTTP_AUTHORIZATION=authorization).status_code == 403


@pytest.mark.parametrize("authorization", AUTHORIZATIONS[:4])
def test_without_a_token_set_every_bearer_is_refused(
    store: Backend, settings: Any, authorization: str
) -> None:
    settings.REDISLOCK = {**settings.REDISLOCK, "METRICS_TOKEN": None}
    assert Client().get(URL, HTTP_AUTHORIZATION=authorization).status_code == 403
