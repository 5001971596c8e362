"""No tables: one unmanaged model that carries the admin pages' permissions."""

from __future__ import annotations

from django.db import models


class Dashboard(models.Model):
    class Meta:
        managed = False
        default_permissions = ()
        permissions = [
            ("view_dashboard", "Can view locks, queues, jobs and workers"),
            ("release_lock", "Can force-release locks"),
            ("manage_queues", "Can run, retry, delete and purge jobs"),
        ]
        verbose_name = "dashboard"
        verbose_name_plural = "dashboard"

    def __str__(self) -> str:
        return "Redis locks and queues"
