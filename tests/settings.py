import os
import sys
import tempfile
from pathlib import Path

import django
import fakeredis

# The example project's shop app is tested live; whatever loads these settings (pytest,
# mypy's Django plugin) must be able to import it.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "example_project"))

SECRET_KEY = "django-redislock-tests"
DEBUG = False
USE_TZ = True
ROOT_URLCONF = "tests.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django_redislock",
    "tests",
    "shop",  # the example project's app, tested live
]
if django.VERSION < (6, 0):
    # The Django Tasks backport. Django 6 has django.tasks built in: there the backport's
    # app would run the task backends' checks a second time, through its own registry.
    INSTALLED_APPS.insert(INSTALLED_APPS.index("django_redislock"), "django_tasks")
# A file, not :memory:, so that child processes forked by the tests share the test database.
_DB = os.path.join(tempfile.gettempdir(), f"django-redislock-tests-{os.getpid()}.sqlite3")
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": _DB,
        "TEST": {"NAME": _DB},
        "OPTIONS": {"timeout": 30, "init_command": "PRAGMA journal_mode=WAL"},
    },
    # A second database: a job enqueued in its transaction waits for its commit.
    "other": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": _DB + "-other",
        "TEST": {"NAME": _DB + "-other"},
    },
}
CACHES = {
    # fakeredis behind django-redis: the fast backend, through the CACHE code path.
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": "redis://fakeredis:6379/0",
        "OPTIONS": {"CONNECTION_POOL_KWARGS": {"connection_class": fakeredis.FakeRedisConnection}},
    },
    "locmem": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
}
REDISLOCK = {"CACHE": "default"}
TASKS = {"default": {"BACKEND": "django_redislock.tasks.RedisTaskBackend"}}
LOGGING_CONFIG = None
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins: tests hash many
