"""A worker's own connection to one queue, on which its POPs go out in order.

Serving one job at a time, a worker tells Redis each job it starts (so that its attempt is
charged then, not when it was leased ahead) together with the jobs that finished before it,
and sends the next fetch before the jobs leased ahead run out. None of these waits for its
reply: the replies are read in order later, when the worker needs the fetched jobs, before
it records a failure (so that Redis has seen the start first), or when a few have piled up.
One connection keeps them in the order they were sent; the Redis server runs them in that
order too. A fetch first reads the ids its POP may take (PEEK, on the queue's own
connection): the one round trip here that is waited for, about one per 30 jobs drained.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import redis

from ...exceptions import RedisUnavailable
from ...redis.clients import UNAVAILABLE, is_cluster
from ...redis.scripts import LuaScript
from ...redis.wire import packer
from ..fetch_scripts import MAX_BATCH, POP, START
from ..fetching import Fetched
from ..queue import Job, Queue
from ..replies import text

logger = logging.getLogger("django_redislock.queue.channel")  # the name users' LOGGING knows

Finished = list[tuple[Job, "str | None"]]
Call = tuple[list[str], list[Any]]
BACKLOG = 64  # replies left unread before the oldest are read


class Channel:
    def __init__(
        self,
        queue: Queue,
        worker: str,
        on_lost: Callable[[Sequence[str]], None],
        on_unsent: Callable[[Queue, Finished], None],
    ) -> None:
        self.queue, self.worker = queue, worker
        self.on_lost, self.on_unsent = on_lost, on_unsent
        client = queue.client
        self.node = (  # the node of the queue's slot, on Redis Cluster
            client.get_node_from_key(queue.keys.ready).redis_connection
            if is_cluster(client)
            else client
        )
        self.conn: Any = None
        self.pack: Any = None
        # Sent, reply not read yet: (START or POP, its keys after the fixed ones and its
        # arguments, the acknowledgements it carries)
        self.pending: deque[tuple[LuaScript, Call, Finished]] = deque()
        self.fetches = 0  # POPs among them
        self.fetched: Fetched | None = None  # read, not collected (its lost ones told)
        self.lock = threading.RLock()

    @property
    def fetching(self) -> bool:
        """A fetch was sent and its jobs not collected yet."""
        return self.fetched is not None or self.fetches > 0

    def note(self, finished: Finished, started: Sequence[Job] = ()) -> None:
        """Acknowledge ``finished`` and charge the attempt of ``started`` without waiting.
        Never raises: acknowledgements that could not be sent are handed back."""
        if not finished and not started:
            return
        # A START takes MAX_BATCH acknowledgements: more pile up when many threads' were
        # handed back (a connection killed under them).
        if len(finished) <= MAX_BATCH:
            chunks = [finished]
        else:
            chunks = [finished[i : i + MAX_BATCH] for i in range(0, len(finished), MAX_BATCH)]
        with self.lock:
            for i, chunk in enumerate(chunks):
                sent = False  # then handed back by _send, or with the pending by _drop
                try:
                    call = self.queue.start_args(
                        self.worker, chunk, started if i == len(chunks) - 1 else ()
                    )
                    self._send(START, call, chunk)
                    sent = True
                    if len(self.pending) > BACKLOG:
                        self._read_until(lambda: len(self.pending) <= BACKLOG // 2)
                except RedisUnavailable as exc:
                    logger.debug("Could not tell Redis of started/finished jobs: %s", exc)
                    for unsent in chunks[i + 1 :]:
                        self.on_unsent(self.queue, unsent)
                    return
                except Exception:  # a bug: the job runs all the same
                    logger.warning("Could not tell Redis of started/finished jobs", exc_info=True)
                    self._drop()
                    for unsent in chunks[i + 1 if sent else i :]:
                        self.on_unsent(self.queue, unsent)
                    return

    def send_fetch(self, count: int, finished: Finished) -> bool:
        """Send a fetch of up to ``count`` jobs (leased ahead, not charged); False when it
        could not be sent (its acknowledgements were handed back)."""
        try:  # on a connection of its own: read first, so it does not wait behind the channel
            candidates = self.queue.candidates(count)
        except RedisUnavailable:
            self.on_unsent(self.queue, finished)
            return False
        call = self.queue.fetch_args(count, None, self.worker, finished, (), False, candidates)
        with self.lock:
            try:
                self._send(POP, call, finished)
            except RedisUnavailable:
                return False
            return True

    def collect(self) -> Fetched | None:
        """Read replies up to the fetch in flight (its lost ids already told), or None when
        no fetch was in flight. Raises RedisUnavailable."""
        with self.lock:
            if not self.fetching:
                return None
            self._read_until(lambda: self.fetched is not None)
            found, self.fetched = self.fetched, None
            return found

    def fetch(self, count: int, finished: Finished) -> Fetched:
        """A fetch sent and read now (behind whatever was sent before it)."""
        with self.lock:
            if not self.send_fetch(count, finished):
                raise RedisUnavailable("Redis is unreachable: the fetch could not be sent")
            collected = self.collect()
            assert collected is not None
            return collected

    def sync(self) -> None:
        """Read every reply still pending: Redis has run all that was sent."""
        with self.lock:
            self._read_until(lambda: not self.pending)

    def poll(self) -> None:
        """Read the replies that have come, without waiting for more; never waits for a busy
        channel. The housekeeping thread calls it often: a connection killed or a script
        flushed under acknowledgements sent is found out now (they are sent again, or rerun)
        rather than when BACKLOG replies have piled up, long after their leases ran out."""
        if not self.lock.acquire(blocking=False):
            return
        try:
            if self.pending:
                self._read_until(lambda: not self._arrived())
        except RedisUnavailable as exc:  # what it carried was handed back, to send again
            logger.debug("Reading the worker's replies failed: %s", exc)
        finally:
            self.lock.release()

    def close(self) -> None:
        with self.lock:
            self._drop()

    # --- inside the lock ------------------------------------------------------------

    def _send(self, script: LuaScript, call: Call, finished: Finished) -> None:
        try:
            if self.conn is None:
                self.conn = self.node.connection_pool.get_connection()
                self.pack = packer(self.conn)
                # Loaded first, so that no EVALSHA sent here fails with NOSCRIPT: its rerun
                # would come after the commands sent behind it.
                for loaded in (START, POP):
                    self.conn.send_command("SCRIPT", "LOAD", loaded.source)
                    self.conn.read_response()
            fixed, (keys, args) = self.queue.keys.fixed, call
            command = ("EVALSHA", script.sha, len(fixed) + len(keys), *fixed, *keys, *args)
            self.conn.send_packed_command(self.pack(command), check_health=False)
        except (*UNAVAILABLE, OSError) as exc:
            self._drop()
            self.on_unsent(self.queue, finished)
            raise RedisUnavailable(f"Redis is unreachable ({exc})") from exc
        self.pending.append((script, call, finished))
        self.fetches += script is POP

    def _read_until(self, done: Callable[[], bool]) -> None:
        while self.pending and not done():
            script, call, _ = self.pending[0]
            try:
                try:
                    reply = self.conn.read_response()
                except redis.ResponseError:  # NOSCRIPT, or MOVED: it did not run; run it now
                    reply = self.queue.run(script, *call)
            except (*UNAVAILABLE, OSError) as exc:
                self._drop()
                raise RedisUnavailable(f"Redis is unreachable ({exc})") from exc
            except redis.ResponseError as exc:
                # Refused again (out of memory, a read-only replica...): it did not run. Left
                # pending, its reply slot would be taken by the next one's: start afresh.
                self._drop()
                raise RedisUnavailable(f"Redis refused the worker's script ({exc})") from exc
            self.pending.popleft()
            if script is POP:
                self.fetches -= 1
                self.fetched = self.queue.fetched(reply, self.worker)
                lost = self.fetched.lost
            else:
                lost = [text(job_id) for job_id in reply]
            if lost:
                self.on_lost(lost)

    def _arrived(self) -> bool:
        """A reply (or the connection's end) is there to read."""
        try:
            return bool(self.conn.can_read(timeout=0))
        except (*UNAVAILABLE, OSError):
            return True  # closed: reading it says so, and starts afresh

    def _drop(self) -> None:
        """Close the connection; what was sent on it may or may not have run: the
        acknowledgements are handed back (sent again, at worst reported lost), the starts
        are forgotten (a failure charges its attempt when it is recorded)."""
        pending, self.pending = self.pending, deque()
        self.fetches = 0
        for _, _, finished in pending:
            self.on_unsent(self.queue, finished)
        if self.conn is not None:
            self.conn.disconnect()
            self.node.connection_pool.release(self.conn)
            self.conn = None
