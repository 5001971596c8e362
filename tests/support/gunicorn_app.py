"""The test project as a WSGI application for a real gunicorn (``tests/test_idempotent_server.py``):
its ``REDISLOCK`` setting comes from the ``TESTS_REDISLOCK`` environment variable (JSON), as
the test that starts it configured its own."""

from __future__ import annotations

import json
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

from django.conf import settings
from django.core.wsgi import get_wsgi_application

settings.REDISLOCK = json.loads(os.environ["TESTS_REDISLOCK"])
application = get_wsgi_application()
