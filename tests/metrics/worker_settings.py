"""The test settings for a worker started in a process of its own, with the ``REDISLOCK`` of
the test (from the environment) in place before Django starts: the app connects its metrics
receivers at start-up, as in a real project."""

import json
import os

from tests.settings import *  # noqa: F403

REDISLOCK = json.loads(os.environ["REDISLOCK_TEST_SETTINGS"])
# Any queue of REDISLOCK: a job keeps its queue as its task's queue_name.
TASKS = {"default": {"BACKEND": "django_redislock.tasks.RedisTaskBackend", "QUEUES": []}}
