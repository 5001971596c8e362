"""Operating the app: Prometheus metrics (``views.metrics``, ``pip install
"django-redislock[metrics]"``) and OpenTelemetry spans (``tracing``, ``pip install
"django-redislock[otel]"``).

What is counted, and where:

- Gauges (jobs per queue and state, the oldest ready job's age, live workers) are read from
  Redis when the view is scraped (``collector``): right whichever process serves the view.
- Counters and histograms (job runs by outcome and their durations, lock acquisitions, busy
  and lost locks, acquire waits) are counted by each process that runs jobs or takes locks,
  from the app's signals (``counting``), once ``REDISLOCK['METRICS']`` is True. With several
  processes (gunicorn, ``run_queue_worker --processes``), run them all with prometheus_client's
  multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``): the view then sums every process's counts.

Importing this package imports neither prometheus_client nor OpenTelemetry.
"""

from __future__ import annotations

import logging
import sys

logger = logging.getLogger(__name__)

COUNTING = "django_redislock.metrics.counting"


def sync_receivers() -> None:
    """Connect the signal receivers that count job runs and lock events when
    ``REDISLOCK['METRICS']`` is True (and prometheus_client is installed), disconnect them
    otherwise: a project without metrics pays nothing. Called at start-up and when
    ``REDISLOCK`` changes."""
    from ..conf import conf

    if conf.METRICS:
        try:
            from . import counting
        except ImportError:  # reported by the system check (E030), never a crash here
            logger.warning("REDISLOCK['METRICS'] is True but prometheus_client is missing.")
            return
        counting.connect()
    elif COUNTING in sys.modules:  # never imported: nothing was connected
        sys.modules[COUNTING].disconnect()
