"""Job ids never start with "-" (a command line would take ``--id -x…`` for an option), and
an id that does (given by a caller, or made before) is still named with ``--id=-x…``."""

from __future__ import annotations

from io import StringIO

from django.core.management import call_command

from django_redislock import get_queue
from django_redislock.queue.arguments import new_id, new_ids
from tests.support.fixtures import Backend


def test_new_ids_never_start_with_a_dash() -> None:
    # Each of 64 first characters was as likely: about 1,000 ids in 64,000 began with "-".
    ids = [*new_ids(64_000), *(new_id() for _ in range(1_000))]
    assert not [i for i in ids if i.startswith("-")]
    assert sum(i.startswith("_") for i in ids) > 500  # "_" stands for it: 2 in 64
    assert {len(i) for i in ids} == {20}
    assert len(set(ids)) == len(ids)


def test_an_id_starting_with_a_dash_is_named_with_an_equals_sign(backend: Backend) -> None:
    queue = get_queue()
    queue.enqueue("tests.tasks.record", args=[1], job_id="-abc", delay=3600)
    out = StringIO()
    call_command(
        "redislock_requeue", "--queue", "default", "--state", "scheduled", "--id=-abc", stdout=out
    )
    assert queue.counts()["ready"] == 1
    assert "-abc" in out.getvalue()
