"""Acceptance: the README's quickstart, followed verbatim in a new project in a temporary
directory, with the package installed from a wheel into a virtualenv of its own, against a
real ``redis-server``: the view answers (and 409 while its lock is held elsewhere), the task
it enqueued runs under ``run_queue_worker``, and the admin's dashboard loads.

Its commands run as written, but for what a test cannot do as a person does: ``python`` is
the virtualenv's, ``django-admin`` is ``python -m django``, ``createsuperuser`` takes
``--noinput`` (with the ``DJANGO_SUPERUSER_*`` variables), ``runserver`` ``--noreload`` and
a free port, the worker ``--burst`` (it exits once nothing is ready), and ``curl`` is made
with urllib. ``REDIS_URL`` points the project at the test's server."""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import socket
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.utils.module_loading import import_string

from django_redislock import Lock, get_queue
from django_redislock.redis.clients import URL_SCHEMES
from django_redislock.tasks import RedisTaskBackend
from tests.support.quickstart import (
    ROOT,
    Command,
    build_wheel,
    literal_blocks,
    quickstart,
    section,
)
from tests.support.quickstart import venv_with as make_venv
from tests.support.servers import RedisServer, free_port
from tests.support.waiting import wait_for

# What a test adds to a command a person types (see the module's docstring).
ADDED = {
    "createsuperuser": ["--noinput"],
    "runserver": ["--noreload"],
    "run_queue_worker": ["--burst"],
}
PASSWORD = "quick-start-1"


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with RedisServer() as redis_server:  # its own: no other test's jobs in its queue
        yield redis_server


def test_the_quickstart_is_at_most_40_lines() -> None:
    assert len(section("Quickstart").splitlines()) <= 40


@pytest.mark.processes
@pytest.mark.timeout(240)  # a guard: about 15 s, longer on a busy machine
def test_the_quickstart_verbatim(tmp_path: Path, server: RedisServer, settings: Any) -> None:
    steps = quickstart()
    python = make_venv(build_wheel(tmp_path), tmp_path / "venv")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO", "PYTHON"))}
    env |= {
        "REDIS_URL": server.url,
        "DJANGO_SUPERUSER_USERNAME": "admin",
        "DJANGO_SUPERUSER_EMAIL": "admin@example.com",
        "DJANGO_SUPERUSER_PASSWORD": PASSWORD,
    }
    where = subprocess.run(
        [str(python), "-c", "import django_redislock; print(django_redislock.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.startswith(str(tmp_path / "venv")), f"not the wheel's package: {where}"

    project = Project(python, tmp_path, env)
    started: list[subprocess.Popen[bytes]] = []
    try:
        for step in steps.steps:
            if step.argv[0] == "cd":
                project.cwd = project.cwd / step.argv[1]
            elif step.argv[0] == "curl":
                project.curl(step)
            elif step.argv[:3] == ["python", "manage.py", "runserver"]:
                started.append(project.runserver(step))
            else:
                project.run(step)
            if step.argv[-2:] == ["startapp", "shop"]:  # the project exists: write the code
                for path, code in steps.files.items():
                    with (project.cwd / path).open("a") as file:
                        file.write("\n" + code)
                check = project.manage("check")
                assert "no issues" in check, check
        assert sorted(project.answer) == ["item", "job"]
        assert project.answer["item"] == 1
        settings.REDISLOCK = {"URL": server.url}  # this process reads the project's Redis
        job = get_queue().get(project.answer["job"])
        assert (job.task, job.state) == ("shop.views.send_receipt", "done")
        assert json.loads(str(job.result)) == "receipt for item 1 sent"
        assert "shop.views.send_receipt" in project.worker_output

        # The lock is the site's: held here, the project's view answers 409.
        with Lock("buy:1", ttl=30):
            assert project.post("/buy/1/")[0] == 409
        assert project.post("/buy/2/")[0] == 200

        project.log_in()
        page = project.get(project.admin_path)
        assert "default" in page  # the queue
        done = project.get(f"{project.admin_path}queues/default/done/")
        assert project.answer["job"] in done
        assert "shop.views.send_receipt" in done
    finally:
        for process in started:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def test_the_quickstart_blocks_are_the_ones_the_test_reads() -> None:
    """Every literal block of the section is a file's code or commands the test runs."""
    steps = quickstart()
    assert set(steps.files) == {"mysite/settings.py", "shop/views.py", "mysite/urls.py"}
    commands = [" ".join(step.argv) for step in steps.steps]
    assert commands == [
        "django-admin startproject mysite",
        "cd mysite",
        "python manage.py startapp shop",
        "python manage.py migrate",
        "python manage.py createsuperuser",
        "python manage.py runserver",
        "curl -X POST http://localhost:8000/buy/1/",
        "python manage.py run_queue_worker",
    ]
    assert len(literal_blocks(section("Quickstart"))) == 3


def test_install_says_what_the_package_and_the_quickstart_do() -> None:
    """Install's settings are the quickstart's, on each Django line; its pip URL is the
    project's repository; the URL schemes it names are those the connection accepts."""
    install = section("Install")
    blocks = re.findall(r"\.\. code-block:: python\n\n((?:    .*\n|\n)+)", install + "\n")
    assert len(blocks) == 2  # Django 5.2, then 6.x
    tasks = next(
        line
        for line in quickstart().files["mysite/settings.py"].splitlines()
        if line.startswith("TASKS")
    )
    for block in blocks:
        assert f"    {tasks}\n" in block
    assert '"django_tasks"' in blocks[0]
    assert '"django_tasks"' not in blocks[1]
    backend = re.search(r'"BACKEND": "([\w.]+)"', tasks)
    assert backend
    assert import_string(backend.group(1)) is RedisTaskBackend
    urls = re.search(r'^Repository = "(.+)"$', (ROOT / "pyproject.toml").read_text(), re.M)
    assert urls
    repository = urls.group(1)
    assert f'@ git+{repository}"' in install
    assert f"git clone {repository}\n" in install
    named = re.findall(r"``(\w+(?:\+\w+)?://)``", install)
    assert sorted(named) == sorted(URL_SCHEMES)


class Project:
    """The new project: its commands, run in the virtualenv, and its server's answers."""

    def __init__(self, python: Path, cwd: Path, env: dict[str, str]) -> None:
        self.python = python
        self.cwd = cwd
        self.env = env
        self.port = free_port()
        self.answer: dict[str, Any] = {}
        self.worker_output = ""
        self.admin_path = ""
        self.cookies = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.cookies))

    def argv(self, step: Command) -> list[str]:
        argv = list(step.argv)
        if argv[0] == "django-admin":
            return [str(self.python), "-m", "django", *argv[1:]]
        assert argv[:2] == ["python", "manage.py"], f"a step the test cannot take: {argv}"
        return [str(self.python), *argv[1:], *ADDED.get(argv[2], [])]

    def run(self, step: Command) -> str:
        done = subprocess.run(
            self.argv(step), cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=60
        )
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"{step.argv}:\n{output}"
        if step.argv[-1] == "run_queue_worker":
            self.worker_output = output
        return output

    def manage(self, *args: str) -> str:
        return self.run(Command(["python", "manage.py", *args], ""))

    def runserver(self, step: Command) -> subprocess.Popen[bytes]:
        admin = re.search(r"admin: http://localhost:8000(/\S+/)", step.comment)
        assert admin, step.comment
        self.admin_path = admin.group(1)
        log = (self.cwd / "runserver.log").open("wb")
        process = subprocess.Popen(
            [*self.argv(step), f"127.0.0.1:{self.port}"],
            cwd=self.cwd,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()

        def listening() -> bool:
            assert process.poll() is None, (self.cwd / "runserver.log").read_text()
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", self.port)) == 0

        wait_for(listening, timeout=30, what="runserver listening")
        return process

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def curl(self, step: Command) -> None:
        assert step.argv[:3] == ["curl", "-X", "POST"], step.argv
        path = urllib.parse.urlsplit(step.argv[3]).path
        status, body = self.post(path)
        assert status == 200, body
        self.answer = json.loads(body)

    def post(self, path: str, data: dict[str, str] | None = None) -> tuple[int, str]:
        body = urllib.parse.urlencode(data or {}).encode()
        request = urllib.request.Request(self.url(path), data=body, method="POST")
        try:
            with self.opener.open(request, timeout=30) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def get(self, path: str) -> str:
        with self.opener.open(self.url(path), timeout=30) as response:
            assert response.status == 200
            page = response.read().decode()
        return re.sub(r"<wbr\s*/?>", "", page)  # the admin's break opportunities in names

    def log_in(self) -> None:
        form = self.get(f"/admin/login/?next={self.admin_path}")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form)
        assert token, form
        status, page = self.post(
            "/admin/login/",
            {
                "csrfmiddlewaretoken": token.group(1),
                "username": "admin",
                "password": PASSWORD,
                "next": self.admin_path,
            },
        )
        assert status == 200, page  # redirected to the dashboard, and it loaded
        assert "Log out" in page or "logout" in page, page
