from __future__ import annotations

from importlib import import_module
from typing import Any

import django
from django.apps import AppConfig
from django.core import checks
from django.core.signals import setting_changed


def _reset_on_change(*, setting: str, **kwargs: Any) -> None:
    if setting in ("REDISLOCK", "CACHES"):
        from .redis.aio import reset_async_connections
        from .redis.clients import reset_connections

        reset_connections()
        reset_async_connections()
    if setting == "REDISLOCK":
        from .redis.notices import quiet_maintenance_notices

        quiet_maintenance_notices()  # in every process, whichever opens a connection first
        from .metrics import sync_receivers

        sync_receivers()


class RedisLockConfig(AppConfig):
    name = "django_redislock"
    verbose_name = "Redis locks and queues"
    default_auto_field = "django.db.models.AutoField"

    def ready(self) -> None:
        from .checks import check_redis_durability, check_settings

        checks.register(check_settings, "django_redislock")
        checks.register(check_redis_durability, "django_redislock", deploy=True)
        if django.VERSION >= (6, 0):
            # Importing django.tasks registers its check of the TASKS backends (our E013,
            # E014); Django 6 does not import it on its own. On 5.2 the backport's app does.
            import_module("django.tasks")
        setting_changed.connect(_reset_on_change, dispatch_uid="django_redislock.reset")
        from .redis.notices import quiet_maintenance_notices

        quiet_maintenance_notices()  # in every process, whichever opens a connection first
        from .metrics import sync_receivers

        sync_receivers()  # counts job runs and lock events only when REDISLOCK['METRICS']
