"""The product catalog every page shows, cached: read under the read side of a
``ReadWriteLock`` (any number of requests at once) and rebuilt under its write side (alone:
no request reads a catalog half replaced, and a waiting rebuild goes before new readers)."""

from __future__ import annotations

from typing import Any

from django.core.cache import cache

from django_redislock import ReadWriteLock

from .models import Product

CACHE_KEY = "shop:catalog"


def catalog_lock() -> ReadWriteLock:
    return ReadWriteLock("catalog", ttl=30, timeout=5)


def read_catalog() -> list[dict[str, Any]]:
    """The cached catalog, rebuilt first when there is none."""
    with catalog_lock().read():
        products = cache.get(CACHE_KEY)
    return products if products is not None else rebuild_catalog()


def rebuild_catalog() -> list[dict[str, Any]]:
    """Read every product again and replace the cached catalog."""
    with catalog_lock().write():
        products = list(Product.objects.order_by("pk").values("id", "name", "stock"))
        cache.set(CACHE_KEY, products, timeout=None)
    return products
