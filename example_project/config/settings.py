"""Settings of the example shop. Redis: ``REDIS_URL`` if set, else an embedded real Redis."""

import os
from pathlib import Path

import django

from . import embedded_redis

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = os.environ.get("SECRET_KEY", "example-shop-not-a-secret")
DEBUG = os.environ.get("DEBUG", "") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",  # the admin's styles, served by runserver with DEBUG=1
    "django_redislock",
    "shop",
]
if django.VERSION < (6, 0):
    INSTALLED_APPS.append("django_tasks")  # the Django Tasks backport
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "config.urls"
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
WSGI_APPLICATION = "config.wsgi.application"

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("SHOP_DB", BASE_DIR / "shop.sqlite3"),
        # Several server processes write at once: WAL lets readers go on, and a writer
        # waits for the file lock instead of failing, but for less than the buy lock's TTL
        # (5 s): a write that waited longer could land after the lock passed to the next buyer.
        # In WAL mode, synchronous=NORMAL syncs at checkpoints rather than at every commit.
        "OPTIONS": {
            "timeout": 2,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
        },
    }
}

REDIS_URL = os.environ.get("REDIS_URL") or embedded_redis.url(
    Path(os.environ.get("SHOP_REDIS_FILE", BASE_DIR / "redis.db"))
)
CACHES = {
    "default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": REDIS_URL},
}
REDISLOCK = {
    "CACHE": "default",
    "KEY_PREFIX": "shop",
    "QUEUES": {"default": {"LEASE": 60, "MAX_ATTEMPTS": 5, "RETRY_BACKOFF": 5}},
    "SCHEDULE": {"sweep-unpaid": {"task": "shop.tasks.sweep_unpaid", "every": 60}},
}
# Tasks run by ``manage.py run_queue_worker``.
TASKS = {"default": {"BACKEND": "django_redislock.tasks.RedisTaskBackend"}}
# An order not paid within this time is closed and its item put back on sale.
SHOP_UNPAID_SECONDS = int(os.environ.get("SHOP_UNPAID_SECONDS", 15 * 60))

USE_TZ = True
STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LOGIN_URL = "/admin/login/"
