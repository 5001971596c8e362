"""``path("metrics/", include("django_redislock.metrics.urls"))`` serves the metrics at
``metrics/``."""

from __future__ import annotations

from django.urls import path

from .views import metrics

app_name = "django_redislock_metrics"
urlpatterns = [path("", metrics, name="metrics")]
