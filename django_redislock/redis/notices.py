"""redis-py's notices that say nothing to this app's users, kept out of their logs: "Failed
to enable maintenance notifications: …", logged at every new connection to a Redis older
than 8 (redis-py asks each server for them, and goes on without). Only that message of
redis-py's connection loggers is dropped."""

from __future__ import annotations

import logging

# The loggers redis-py logs it on (``logging.getLogger(__name__)`` in each module).
CONNECTION_LOGGERS = ("redis.connection", "redis.asyncio.connection")
MAINTENANCE = "Failed to enable maintenance notifications"


class MaintenanceNotices(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg.startswith(MAINTENANCE))


_filter = MaintenanceNotices()


def quiet_maintenance_notices() -> None:
    """Drop redis-py's maintenance notices from now on (once per process is enough; more
    does no harm)."""
    for name in CONNECTION_LOGGERS:
        logger = logging.getLogger(name)
        if _filter not in logger.filters:
            logger.addFilter(_filter)
