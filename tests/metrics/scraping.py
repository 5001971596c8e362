"""Reading the metrics view as Prometheus would: the samples of a scrape, by name and labels."""

from __future__ import annotations

from typing import Any

from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

TOKEN = "a-metrics-token-long-enough-0123456789"
URL = "/metrics/"


def parsed(text: str) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def scrape(client: Client | None = None, **headers: Any) -> Samples:
    """The samples of one scrape, with the token unless ``client`` (logged in) is given."""
    if client is None:
        client, headers = Client(), {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}", **headers}
    response = client.get(URL, **headers)
    assert response.status_code == 200, response.content
    return parsed(response.content.decode())


def value(samples: Samples, name: str, **labels: str) -> float:
    """A sample's value; 0 when absent (a labelled counter never incremented has none)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def summed(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples that carry ``labels`` (whatever their other labels:
    every task of a queue, say)."""
    wanted = set(labels.items())
    return sum(v for (n, found), v in samples.items() if n == name and wanted <= found)


def named(samples: Samples, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {labels: v for (n, labels), v in samples.items() if n == name}


def states(samples: Samples, queue: str) -> dict[str, float]:
    """``redislock_queue_jobs`` of ``queue``, by state: as ``Queue.counts()`` gives them."""
    return {
        dict(labels)["state"]: v
        for labels, v in named(samples, "redislock_queue_jobs").items()
        if ("queue", queue) in labels
    }
