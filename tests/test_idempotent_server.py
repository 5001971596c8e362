"""``@redis_idempotent`` behind a real gunicorn with 4 worker processes, on a real server and
on Cluster: 16 clients resending one key get one run of the view; a worker SIGKILLed in the
view leaves a claim that lapses, and the key then runs again."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from django_redislock import get_redis
from tests.idempotent_views import GATE, PIDS, runs
from tests.support.fixtures import Backend
from tests.support.servers import free_port
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parent.parent
CLIENTS = 16


class Answer(NamedTuple):
    status: int
    body: bytes
    replayed: bool


class Shop:
    """The test project under gunicorn; ``post`` sends one request."""

    def __init__(self, port: int) -> None:
        self.port = port

    def post(self, path: str, key: str, body: Any = None) -> Answer:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            headers = {"Idempotency-Key": key, "Content-Type": "application/json"}
            connection.request("POST", path, json.dumps(body or {"points": 50}), headers)
            response = connection.getresponse()
            replayed = response.getheader("Idempotent-Replayed") == "true"
            return Answer(response.status, response.read(), replayed)
        finally:
            connection.close()

    def answers(self) -> bool:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
            connection.request("GET", "/idem/ready/")  # a 404 will do
            connection.getresponse().read()
            return True
        except OSError:
            return False


def start_gunicorn(config: dict[str, Any], log: Path) -> tuple[subprocess.Popen[bytes], Shop]:
    port = free_port()
    env = {
        **os.environ,
        "TESTS_REDISLOCK": json.dumps(config),
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "example_project")]),
    }
    command = [sys.executable, "-m", "gunicorn", "--workers", "4", "--bind", f"127.0.0.1:{port}"]
    command += ["--timeout", "120", "tests.support.gunicorn_app:application"]
    with open(log, "wb") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=out)
    server = Shop(port)
    wait_for(lambda: process.poll() is not None or server.answers(), timeout=60, what="gunicorn up")
    assert process.poll() is None, log.read_text()[-3000:]
    return process, server


@pytest.fixture(scope="module")
def gunicorns(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One gunicorn per backend kind, started by the first test that needs it."""
    started: dict[str, Any] = {"dir": tmp_path_factory.mktemp("gunicorn")}
    yield started
    for process, _ in (v for k, v in started.items() if k != "dir"):
        process.terminate()
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


@pytest.fixture
def shop(real_backend: Backend, settings: Any, gunicorns: dict[str, Any]) -> Shop:
    """gunicorn with 4 sync worker processes serving the test project on ``real_backend``
    (flushed before each test, as always), its claims lapsing within a second."""
    if real_backend.kind not in gunicorns:
        config = {**settings.REDISLOCK, "LOCK_TTL": 1.0}
        log = gunicorns["dir"] / f"{real_backend.kind}.log"
        gunicorns[real_backend.kind] = start_gunicorn(config, log)
    process, server = gunicorns[real_backend.kind]
    assert process.poll() is None, "gunicorn died"
    return server  # type: ignore[no-any-return]


def until_not_busy(send: Any) -> Answer:
    """Resend while the answer is 409 "in flight" (as a client told Retry-After would)."""
    deadline = time.monotonic() + 60
    while True:
        answer = send()
        if answer.status != 409 or time.monotonic() > deadline:
            return answer
        time.sleep(0.02)


def test_sixteen_clients_resending_one_key_run_the_view_once(shop: Shop) -> None:
    start = threading.Barrier(CLIENTS)
    answers: list[Answer] = []

    def client() -> None:
        start.wait(30)
        answers.append(until_not_busy(lambda: shop.post("/idem/pay/", "burst-1")))

    threads = [threading.Thread(target=client, daemon=True) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    assert runs("pay") == 1, [(a.status, a.replayed, a.body[:60]) for a in answers]
    assert len(answers) == CLIENTS
    assert {a.status for a in answers} == {201}
    assert len({a.body for a in answers}) == 1  # one order, the same bytes for all
    assert sorted(a.replayed for a in answers) == [False] + [True] * (CLIENTS - 1)


def test_many_keys_at_once_each_run_once(shop: Shop) -> None:
    answers: dict[str, list[Answer]] = {f"k-{n}": [] for n in range(8)}

    def client(key: str) -> None:
        for _ in range(3):
            answers[key].append(until_not_busy(lambda: shop.post("/idem/pay/", key)))

    threads = [
        threading.Thread(target=client, args=(k,), daemon=True) for k in answers for _ in (1, 2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    assert runs("pay") == len(answers)
    for key, got in answers.items():
        assert len({a.body for a in got}) == 1, key
        assert sum(not a.replayed for a in got) == 1, key


def test_replays_and_a_reused_key_over_http(shop: Shop) -> None:
    first = shop.post("/idem/pay/", "r-1")
    again = shop.post("/idem/pay/", "r-1")
    other = shop.post("/idem/pay/", "r-1", {"points": 51})
    assert (first.status, again.status, other.status) == (201, 201, 422)
    assert again.body == first.body
    assert again.replayed
    assert runs("pay") == 1


def test_a_worker_killed_in_the_view_leaves_a_claim_that_lapses(shop: Shop) -> None:
    client = get_redis()
    lost: list[BaseException] = []

    def doomed() -> None:
        try:
            shop.post("/idem/pay/?wait=1", "kill-1")
        except (OSError, http.client.HTTPException) as exc:
            lost.append(exc)

    thread = threading.Thread(target=doomed, daemon=True)
    thread.start()
    wait_for(lambda: client.llen(PIDS) == 1, what="the view running in a worker")
    os.kill(int(client.lpop(PIDS)), signal.SIGKILL)
    thread.join(60)
    assert lost, "the client of the killed worker got an answer"
    client.rpush(GATE, 1)  # lets the next run of the view through at once
    # The dead worker's claim answers 409 until it lapses (LOCK_TTL 1 s), then the key runs.
    answer = until_not_busy(lambda: shop.post("/idem/pay/?wait=1", "kill-1"))
    assert (answer.status, answer.replayed) == (201, False)
    assert runs("pay") == 2
    assert shop.post("/idem/pay/?wait=1", "kill-1").replayed
