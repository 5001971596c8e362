"""The threads of the worker's parts that work on their own (the lease keeper, the
heartbeat, the scheduler): each part starts its own and stops it, waiting for it to end."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ...exceptions import RedisUnavailable

logger = logging.getLogger("django_redislock.queue.background")  # the name users' LOGGING knows


class Background:
    """A thread running ``run(stopped)``; ``stop`` sets ``stopped`` and waits for it."""

    def __init__(
        self,
        name: str,
        run: Callable[[threading.Event], None],
        *,
        stopped: threading.Event | None = None,
        daemon: bool = False,
    ) -> None:
        self.stopped = threading.Event() if stopped is None else stopped
        self.thread = threading.Thread(target=run, args=(self.stopped,), name=name, daemon=daemon)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()
        if self.thread.ident is not None:  # started
            self.thread.join()


def periodic(
    seconds: float, step: Callable[[], None], what: str
) -> Callable[[threading.Event], None]:
    """A ``run`` for ``Background`` calling ``step`` every ``seconds`` until stopped. A step
    that fails is logged (Redis away: in a line, once until it works again) and tried again
    on the next round: the thread must not die."""

    def run(stopped: threading.Event) -> None:
        said = ""  # Redis away: said once until a step works again
        while not stopped.wait(seconds):
            try:
                step()
            except RedisUnavailable as exc:
                if str(exc) != said:
                    logger.warning("%s failed: %s", what, exc)
                said = str(exc)
            except Exception:
                logger.warning("%s failed", what, exc_info=True)
            else:
                if said:
                    logger.info("%s works again.", what)
                said = ""

    return run
