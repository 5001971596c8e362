from __future__ import annotations

from django.urls import include, path

urlpatterns = [path("metrics/", include("django_redislock.metrics.urls"))]
