"""The ``REDISLOCK`` setting, read lazily so ``override_settings`` always applies."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

DEFAULTS: dict[str, Any] = {
    "CACHE": "default",
    "URL": None,
    "CLUSTER": False,
    "KEY_PREFIX": "redislock",
    "LOCK_TTL": 15.0,
    "LOCK_TIMEOUT": 0.0,
    "LOCK_RETRY_DELAY": 0.1,
    "LOCK_SHARDS": 16,
    "REDLOCK_NODES": [],
    "BUSY_STATUS": 409,
    "ON_REDIS_ERROR": "fail-closed",
    "QUEUES": {"default": {}},
    "SCHEDULE": {},
    "SPIN_WAIT": 0.0002,
    "MAX_CONNECTIONS": 100,  # the size of the connection pools this app builds
    "METRICS": False,  # count job outcomes and lock events for the Prometheus view
    "METRICS_TOKEN": None,  # a bearer token that may read the Prometheus view
    "HISTORY": True,  # workers record each task's runs, failures and durations (admin Tasks)
}

QUEUE_DEFAULTS: dict[str, Any] = {
    "LEASE": 300.0,
    "MAX_ATTEMPTS": 3,
    "RETRY_BACKOFF": 10.0,
    "RESULT_TTL": 86400.0,
    "ON_COMMIT": True,  # inside transaction.atomic(), push jobs when it commits
    "TIME_LIMIT": None,  # seconds a job may run before JobTimeLimitExceeded; None: no limit
    # seconds a job may go on after its time limit or cancel before it is stopped for sure
    "TIME_LIMIT_GRACE": 10.0,
    "EAGER": False,  # enqueue runs the job at once, in-process, without Redis (tests)
}

ON_REDIS_ERROR_CHOICES = ("fail-closed", "fail-open")


def user_settings() -> Any:
    """The raw ``REDISLOCK`` value as written by the user (may be of any type)."""
    return getattr(settings, "REDISLOCK", {})


class Conf:
    def _get(self, key: str) -> Any:
        raw = user_settings()
        if isinstance(raw, dict) and key in raw:
            return raw[key]
        return DEFAULTS[key]

    @property
    def CACHE(self) -> str:
        return str(self._get("CACHE"))

    @property
    def URL(self) -> str | None:
        value = self._get("URL")
        return None if value is None else str(value)

    @property
    def CLUSTER(self) -> bool:
        return bool(self._get("CLUSTER"))

    @property
    def KEY_PREFIX(self) -> str:
        return str(self._get("KEY_PREFIX"))

    @property
    def LOCK_TTL(self) -> float:
        return float(self._get("LOCK_TTL"))

    @property
    def LOCK_TIMEOUT(self) -> float:
        return float(self._get("LOCK_TIMEOUT"))

    @property
    def LOCK_RETRY_DELAY(self) -> float:
        return float(self._get("LOCK_RETRY_DELAY"))

    @property
    def LOCK_SHARDS(self) -> int:
        return int(self._get("LOCK_SHARDS"))

    @property
    def REDLOCK_NODES(self) -> list[str]:
        return list(self._get("REDLOCK_NODES"))

    @property
    def BUSY_STATUS(self) -> int:
        return int(self._get("BUSY_STATUS"))

    @property
    def ON_REDIS_ERROR(self) -> str:
        return str(self._get("ON_REDIS_ERROR"))

    @property
    def QUEUES(self) -> dict[str, dict[str, Any]]:
        value = self._get("QUEUES")
        if not isinstance(value, dict) or not all(isinstance(o, dict) for o in value.values()):
            raise ImproperlyConfigured(
                "REDISLOCK['QUEUES'] must be a dict of queue name to a dict of options; "
                "run manage.py check."
            )
        return {name: {**QUEUE_DEFAULTS, **options} for name, options in value.items()}

    @property
    def QUEUE_NAMES(self) -> list[str]:
        """The queue names in ``REDISLOCK['QUEUES']``, whatever its shape: never raises, for
        the system checks that must report a wrong value instead of crashing on it."""
        value = self._get("QUEUES")
        return (
            sorted(name for name in value if isinstance(name, str))
            if isinstance(value, dict)
            else []
        )

    @property
    def SPIN_WAIT(self) -> float:
        return float(self._get("SPIN_WAIT"))

    @property
    def MAX_CONNECTIONS(self) -> int:
        value = self._get("MAX_CONNECTIONS")
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 4
        return int(value if ok else DEFAULTS["MAX_CONNECTIONS"])

    @property
    def METRICS(self) -> bool:
        return self._get("METRICS") is True

    @property
    def HISTORY(self) -> bool:
        return self._get("HISTORY") is not False

    @property
    def METRICS_TOKEN(self) -> str | None:
        value = self._get("METRICS_TOKEN")
        return value if isinstance(value, str) and value else None

    @property
    def SCHEDULE(self) -> dict[str, dict[str, Any]]:
        value = self._get("SCHEDULE")
        if not isinstance(value, dict):
            raise ImproperlyConfigured(
                "REDISLOCK['SCHEDULE'] must be a dict of entry name to options; run manage.py "
                "check."
            )
        return dict(value)


conf = Conf()
