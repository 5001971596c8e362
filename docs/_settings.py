"""The least Django needs for autodoc to import django_redislock while the docs build.

Nothing connects to Redis: the cache's address is never used.
"""

from __future__ import annotations

import django

SECRET_KEY = "django-redislock-docs"
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django_redislock",
]
if django.VERSION < (6, 0):
    INSTALLED_APPS.append("django_tasks")  # the Django Tasks backport
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": "redis://127.0.0.1:6379/0",
    }
}
REDISLOCK = {"CACHE": "default"}
TASKS = {"default": {"BACKEND": "django_redislock.tasks.RedisTaskBackend"}}
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
