"""What ``flash_sale_demo`` (and the tests) need: the shop served by several processes on a
loopback port, and buyers in several processes hammering it over HTTP."""

from __future__ import annotations

import http.client
import multiprocessing
import os
import pickle
import queue
import signal
import socket
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import urlencode


def wsgi_server(listener: socket.socket) -> Any:
    """Django's threaded WSGI server (runserver's) serving this project on ``listener``, a
    socket already listening, so that forked processes can share it. Quiet, and without
    Nagle's delay (else delayed ACKs add ~40 ms to keep-alive replies). Then call
    ``serve_forever()``."""
    from django.core.handlers.wsgi import WSGIHandler
    from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler

    class Handler(WSGIRequestHandler):
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

    host, port = listener.getsockname()[:2]
    httpd = ThreadedWSGIServer((host, port), Handler, bind_and_activate=False)
    httpd.socket.close()
    httpd.socket = listener
    httpd.server_name, httpd.server_port = host, port
    httpd.setup_environ()
    httpd.set_app(WSGIHandler())
    return httpd


def _die_with_parent() -> None:
    """Linux: have the kernel SIGTERM this child when its parent (the fork server, which
    ends with the demo) dies, so a killed demo leaves no server or buyer behind."""
    parent = os.getppid()
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def processes() -> Any:
    """Where the demo's processes come from: a fork server, a process started afresh (so
    single-threaded) that forks each child. The demo's own process runs threads (the lock
    renewer, database and Redis clients): a fork of it could deadlock a child on a lock one
    of those threads held."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["django", "shop.demo"])
    return context


def settings_now() -> dict[str, Any]:
    """This process's settings that differ from Django's defaults, as they are now (a test's
    overrides and its test database's name included), for a child to set up Django with."""
    from django.conf import global_settings, settings

    now = {}
    with warnings.catch_warnings():  # reading a deprecated setting warns
        warnings.simplefilter("ignore")
        for name in dir(settings):
            if not name.isupper():
                continue
            value = getattr(settings, name)
            if value == getattr(global_settings, name, object()):
                continue
            try:
                pickle.dumps(value)
            except Exception:  # a value only its settings module can make: made there
                continue
            now[name] = value
    return now


def _setup_django(overrides: dict[str, Any]) -> None:
    import django
    from django.conf import settings

    for name, value in overrides.items():
        setattr(settings, name, value)
    django.setup()


@dataclass
class Server:
    """The shop in ``workers`` processes (threads in each) sharing one listening socket."""

    host: str = "127.0.0.1"
    port: int = 0
    workers: list[Any] = field(default_factory=list)

    def start(self, workers: int = 4) -> Server:
        """Start the processes; return once each serves."""
        listener = socket.create_server((self.host, self.port), backlog=1024)
        self.port = listener.getsockname()[1]
        context = processes()
        ready = context.Queue()
        overrides = settings_now()
        try:
            for _ in range(workers):
                worker = context.Process(target=_serve, args=(listener, overrides, ready))
                worker.start()
                self.workers.append(worker)
            for _ in range(workers):
                ready.get(timeout=120)
        except BaseException:
            self.stop()
            raise
        finally:
            listener.close()
        return self

    def stop(self) -> None:
        for worker in self.workers:
            worker.terminate()
        for worker in self.workers:
            worker.join()
        self.workers.clear()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _serve(listener: socket.socket, overrides: dict[str, Any], ready: Any) -> None:
    code = 0
    try:
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
        _die_with_parent()
        _setup_django(overrides)
        server = wsgi_server(listener)
        ready.put(os.getpid())
        server.serve_forever()
    except BaseException:
        code = 1
        raise
    finally:
        os._exit(code)


class Client:
    """A buyer: plain HTTP/1.1 with the session and CSRF cookies of a browser."""

    def __init__(self, port: int, cookies: dict[str, str] | None = None) -> None:
        self.port = port
        self.cookies = dict(cookies or {})
        self.request("GET", "/products/")  # sets the CSRF cookie

    def request(
        self,
        method: str,
        path: str,
        data: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        timeout: float = 60,
    ) -> int:
        """The answer's status; ``TimeoutError`` when none came within ``timeout`` s."""
        headers = {
            **(headers or {}),
            "Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items()),
        }
        body = None
        if method == "POST":
            headers["X-CSRFToken"] = self.cookies.get("csrftoken", "")
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            body = urlencode(data or {})
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            response.read()
            for header in response.headers.get_all("Set-Cookie") or []:
                for name, morsel in SimpleCookie(header).items():
                    self.cookies[name] = morsel.value
            return response.status
        finally:
            connection.close()


def _buyer(port: int, path: str, attempts: int, data: dict[str, Any], cookies: Any,
           start: Any, progress: Any, results: Any) -> None:  # fmt: skip
    _die_with_parent()
    client = Client(port, cookies)
    answers: list[tuple[float, float, int]] = []
    start.wait()
    for _ in range(attempts):
        sent = time.monotonic()  # the same clock in every process (CLOCK_MONOTONIC)
        status = client.request("POST", path, data)
        answers.append((sent, time.monotonic(), status))
        with progress.get_lock():
            progress.value += 1
    results.put(answers)


@dataclass
class Run:
    """Every answer of a run: (sent, answered, status), times on the monotonic clock."""

    answers: list[tuple[float, float, int]]
    began: float
    seconds: float

    @property
    def statuses(self) -> Counter[int]:
        return Counter(status for _, _, status in self.answers)

    @property
    def requests(self) -> int:
        return len(self.answers)

    @property
    def sold_for(self) -> float:
        """Seconds from the start until the last sale (201) was answered."""
        sales = [answered for _, answered, status in self.answers if status == 201]
        return max(sales) - self.began if sales else 0.0

    @property
    def orders_per_second(self) -> float:
        sold_for = self.sold_for
        return self.statuses[201] / sold_for if sold_for else 0.0

    @property
    def busy_while_left(self) -> int:
        """ "Busy" answers (409) sent before the last sale: buyers turned away while stock
        was still left."""
        last_sale = self.sold_for + self.began
        return sum(1 for sent, _, status in self.answers if status == 409 and sent < last_sale)

    def latency(self, quantile: float) -> float:
        """The ``quantile`` (0.99: p99) of the answer times, in seconds."""
        took = sorted(answered - sent for sent, answered, _ in self.answers)
        return took[min(len(took) - 1, int(quantile * len(took)))] if took else 0.0


def hammer(
    port: int,
    path: str,
    *,
    buyers: int,
    attempts: int,
    data: dict[str, Any] | None = None,
    cookies: dict[str, str] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> Run:
    """POST ``path`` ``attempts`` times from each of ``buyers`` processes, all at once."""
    context = processes()
    start, progress, results = context.Event(), context.Value("l", 0), context.Queue()
    procs = [
        context.Process(
            target=_buyer,
            args=(port, path, attempts, data or {}, cookies, start, progress, results),
            daemon=True,
        )
        for _ in range(buyers)
    ]
    for proc in procs:
        proc.start()
    began = time.monotonic()
    start.set()
    total = buyers * attempts
    answers: list[tuple[float, float, int]] = []
    for _ in procs:
        while True:
            if on_progress is not None:
                on_progress(progress.value, total)
            try:
                answers += results.get(timeout=0.1)
                break
            except queue.Empty:
                if not any(proc.is_alive() for proc in procs) and results.empty():
                    raise RuntimeError("a buyer process died; see its traceback above") from None
    seconds = time.monotonic() - began
    for proc in procs:
        proc.join()
    if on_progress is not None:
        on_progress(total, total)
    return Run(answers, began, seconds)


def _resender(port: int, path: str, keys: list[str], patience: float, start: Any,
              results: Any) -> None:  # fmt: skip
    _die_with_parent()
    client = Client(port)
    sent = 0
    start.wait()
    for key in keys:
        timeout = patience  # the first try gives up early; the resends wait for an answer
        while True:
            sent += 1
            try:
                status = client.request("POST", path, headers={"Idempotency-Key": key},
                                        timeout=timeout)  # fmt: skip
            except TimeoutError:
                timeout = 60.0
                continue  # the same request, the same key, again
            if status != 409:
                break
            time.sleep(0.01)  # still being made: as Retry-After says, come back
    results.put(sent)


def resend(port: int, path: str, *, buyers: int, keys: int, patience: float) -> int:
    """Each of ``buyers`` processes places ``keys`` orders at ``path``, each with a key of
    its own; it gives up waiting for the first answer after ``patience`` seconds and sends
    the same request again (and again while answered 409). Returns the requests sent."""
    context = processes()
    start, results = context.Event(), context.Queue()
    run = uuid.uuid4().hex[:8]
    procs = [
        context.Process(
            target=_resender,
            args=(
                port,
                path,
                [f"{run}-{b}-{k}" for k in range(keys)],
                patience,
                start,
                results,
            ),
            daemon=True,
        )
        for b in range(buyers)
    ]
    for proc in procs:
        proc.start()
    start.set()
    sent = sum(results.get(timeout=300) for _ in procs)
    for proc in procs:
        proc.join()
    return sent
