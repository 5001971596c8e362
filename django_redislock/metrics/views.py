"""``metrics``: the Prometheus view. Mount it in your urls::

    from django_redislock.metrics.views import metrics

    urlpatterns = [..., path("metrics/", metrics)]

Who may read it: a request with ``Authorization: Bearer <REDISLOCK['METRICS_TOKEN']>`` (what
a Prometheus scrape job sends with ``authorization: {credentials: ...}``), or a logged-in
staff user with the app's view permission (the admin's). Anyone else gets 403; a wrong
token is a 403 too, whoever is logged in.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Callable, Iterable

from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe

try:
    from prometheus_client import CollectorRegistry, Metric
    from prometheus_client.exposition import (
        CONTENT_TYPE_PLAIN_0_0_4,
        choose_encoder,
        generate_latest,
    )
    from prometheus_client.multiprocess import MultiProcessCollector
    from prometheus_client.registry import Collector
except ImportError as exc:  # mounted without the extra
    raise ImproperlyConfigured(
        "The metrics view needs prometheus_client: pip install 'django-redislock[metrics]'."
    ) from exc

from ..admin.actions import VIEW
from ..conf import conf
from . import counting
from .collector import RedisCollector

MULTIPROCESS_DIR = "PROMETHEUS_MULTIPROC_DIR"
FORBIDDEN = "A metrics token, or a staff user with the app's view permission, is needed.\n"
# The formats answered as asked (media type -> versions); any other Accept gets the plain
# text format 0.0.4, which every Prometheus reads.
KNOWN_FORMATS = {"application/openmetrics-text": {"1.0.0"}, "text/plain": {"0.0.4", "1.0.0"}}


class _ThisProcess(Collector):
    """The counts of this process (outside multiprocess mode)."""

    def collect(self) -> Iterable[Metric]:
        return counting.REGISTRY.collect()


def allowed(request: HttpRequest) -> bool:
    """Whether ``request`` may read the metrics: the bearer token, or a staff user with the
    app's view permission."""
    header = request.headers.get("Authorization", "")
    if header:
        scheme, _, given = header.partition(" ")
        token = conf.METRICS_TOKEN
        if scheme.lower() != "bearer" or token is None:
            return False
        return hmac.compare_digest(given.strip().encode(), token.encode())
    user = request.user if hasattr(request, "user") else None
    return bool(user is not None and user.is_staff and user.has_perm(VIEW))


def registry() -> CollectorRegistry:
    """What a scrape reads: the gauges from Redis, and the counts of every process
    (multiprocess mode) or of this one."""
    scraped = CollectorRegistry(auto_describe=False)
    scraped.register(RedisCollector())
    directory = os.environ.get(MULTIPROCESS_DIR)
    if directory:
        MultiProcessCollector(scraped, path=directory)  # type: ignore[no-untyped-call]
    else:
        scraped.register(_ThisProcess())
    return scraped


@require_safe
def metrics(request: HttpRequest) -> HttpResponse:
    """The metrics in Prometheus's text format (or OpenMetrics when the scraper asks)."""
    if not allowed(request):
        return HttpResponse(FORBIDDEN, status=403, content_type="text/plain")
    encoder, content_type = negotiated(request.headers.get("Accept", ""))
    return HttpResponse(encoder(registry()), content_type=content_type)


def negotiated(accept: str) -> tuple[Callable[[CollectorRegistry], bytes], str]:
    """The encoder and content type that answer ``accept``: what prometheus_client chooses
    when that is a format and version it knows, else the plain text format. Its choice is
    not taken as is: it raises on a version that is no number ("version=abc") and echoes
    any version given ("version=2.0.0") into the response's Content-Type."""
    try:
        encoder, content_type = choose_encoder(accept)
    except (TypeError, ValueError):
        return generate_latest, CONTENT_TYPE_PLAIN_0_0_4
    media, *params = (part.strip() for part in content_type.split(";"))
    version = dict(p.partition("=")[::2] for p in params).get("version", "")
    if version not in KNOWN_FORMATS.get(media, ()) or not content_type.isprintable():
        return generate_latest, CONTENT_TYPE_PLAIN_0_0_4
    return encoder, content_type
