"""``@redis_idempotent`` when its Redis goes away mid-view: the view's answer still reaches
its client, the failure is logged, and the claim ends with the server (or lapses)."""

from __future__ import annotations

import json
import logging
import threading
from typing import Any

import pytest
from django.test import Client

from django_redislock.redis.clients import reset_connections
from tests import idempotent_views
from tests.idempotent_views import runs
from tests.support.servers import RedisServer
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_redis_lost_while_the_view_runs_keeps_the_answer(settings: Any, caplog: Any) -> None:
    with RedisServer() as server:
        settings.REDISLOCK = {"URL": server.url, "LOCK_TTL": 1.0}
        reset_connections()
        answers: list[Any] = []

        def send() -> None:
            answers.append(
                Client().post(
                    "/idem/pay-event/",
                    json.dumps({"points": 5}),
                    content_type="application/json",
                    HTTP_IDEMPOTENCY_KEY="lost-1",
                )
            )

        idempotent_views.proceed.clear()
        thread = threading.Thread(target=send, daemon=True)
        thread.start()
        wait_for(lambda: runs("pay_event") == 1, what="the view running")
        server.kill()
        with caplog.at_level(logging.WARNING, logger="django_redislock.idempotent"):
            idempotent_views.proceed.set()
            thread.join(30)
        assert [a.status_code for a in answers] == [201]
        assert "Could not end idempotency claim" in caplog.text
        server.start()  # empty: the claim went with the server
        reset_connections()
        again = Client().post(
            "/idem/pay-event/",
            json.dumps({"points": 5}),
            content_type="application/json",
            HTTP_IDEMPOTENCY_KEY="lost-1",
        )
        assert again.status_code == 201
    reset_connections()
