"""The job vocabulary (one state enum, one table of hash fields) and the key layout."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from django_redislock.queue.job_codec import decoded, from_hash
from django_redislock.queue.job_factories import leased_job
from django_redislock.queue.jobs import LISTED_STATES, Field, Job, JobState
from django_redislock.queue.keys import QueueKeys
from django_redislock.queue.lua import script
from django_redislock.queue.replies import number


def test_each_state_has_its_own_letter_and_reads_back() -> None:
    letters = [state.letter for state in JobState if state.letter]
    assert len(letters) == len(set(letters)) == len(JobState) - 1  # unknown has none
    for state in JobState:
        if state.letter:
            assert JobState.of_letter(state.letter) is state
            assert f"{state}" == str(state) == state.value
    assert JobState.of_letter("?") is JobState.UNKNOWN
    assert {"ready": 1}[JobState.READY] == 1  # a member is its name, as a key too
    assert [str(s) for s in LISTED_STATES] == ["ready", "scheduled", "running", "dead", "waiting"]


def test_field_and_state_names_reach_the_lua_as_literals() -> None:
    names = Field.names()
    assert len(set(names.values())) == len(names)
    source = script("t", "return {F.task, F.due, S.ready, S.dead}").source
    assert f"return {{'{Field.TASK}', '{Field.DUE}', 'r', 'd'}}" in source
    with pytest.raises(ValueError, match=r"F\.nonsense, which is not a job F"):
        script("t", "return F.nonsense")


def test_a_script_carries_only_the_helpers_it_uses() -> None:
    assert script("t", "return 1").source.strip() == "return 1"
    # make_ready uses num, BAND and the fixed keys: each comes once, before it
    source = script("t", "make_ready(KEYS[JOB], ARGV[1])").source
    defined = re.findall(r"^local (?:function )?(\w+)", source, re.MULTILINE)
    assert defined == ["READY", "HELD", "WAITING", "JOB", "BAND", "num", "make_ready"]
    # JOB: the first key after the fixed ones
    assert f"local JOB = {len(QueueKeys('p', 'q').fixed) + 1}" in source
    assert "wake" not in source
    mentioned = "return 1  -- a comment that names wake and bury"
    assert script("t", mentioned).source.strip() == mentioned


def test_a_hash_reads_back_through_the_one_table() -> None:
    job = from_hash(
        "j1", "q", {Field.TASK: b"t", Field.ARGS: b"[1]", Field.STATE: b"x", Field.ATTEMPTS: b"2"}
    )
    assert (job.task, job.args, job.state, job.attempts) == ("t", [1], "running", 2)
    assert from_hash("j2", "q", {Field.STATE: b"zz"}).state == "unknown"


def test_every_key_of_a_queue_shares_its_hash_tag() -> None:
    keys = QueueKeys("p", "emails")
    built = [*keys.fixed, keys.job("a"), keys.corrupt("a"), keys.result("a"), keys.tick("e")]
    built += [keys.of_state(state) for state in LISTED_STATES]
    assert all(key.startswith("p:{Q:emails}:") for key in built)
    assert len(set(built)) == len(built) - len(LISTED_STATES)  # the sets are fixed keys
    with pytest.raises(ValueError, match="state must be one of"):
        keys.of_state("done")


SCALAR_VALUES = [
    [],
    [0, -(2**70), 1.5, -0.0, float("inf"), float("nan"), True, False, None],
    ["", "ünï\u2028code", "\ud800", 'quote " and \\ back', "\x00\x1f"],
    {"a": 1, "é": None, "": "x"},
]


@pytest.mark.parametrize("value", SCALAR_VALUES, ids=repr)
def test_scalars_encode_exactly_as_the_json_encoder_does(value: object) -> None:
    from django_redislock.queue.job_codec import dumps, dumps_scalars

    assert dumps_scalars(value) == dumps(value)  # type: ignore[arg-type]


def test_new_ids_are_unique_across_threads_and_forked_children() -> None:
    import os
    import threading

    from django_redislock.queue.arguments import new_id

    new_id()  # the pool is filled: a child forked now must not hand out what is left of it
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next 300 ids, to the parent
        try:
            os.write(write, ",".join(new_id() for _ in range(300)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = pipe.read().split(",")
    os.waitpid(pid, 0)
    parent: list[str] = []
    threads = [
        threading.Thread(target=lambda: parent.extend(new_id() for _ in range(500)))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(child) == 300
    assert len(parent) == 2000
    assert len(set(child) | set(parent)) == 2300
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{20}", id_) for id_ in child + parent)


def test_leased_job_is_the_job_its_fields_make() -> None:
    values: dict[str, Any] = dict(
        priority=3,
        attempts=2,
        score=5,
        enqueued=4,
        lease="w#2",
        worker="w",
        workers=("v", "w"),
        meta={"m": 1},
    )
    made = leased_job("id", "q", "t.f", [1], {"k": 2}, **values)
    expected = Job("id", "q", "t.f", [1], {"k": 2}, state=JobState.RUNNING.value, **values)
    assert made == expected
    assert repr(made) == repr(expected)
    assert list(vars(made)) == [f.name for f in dataclasses.fields(Job)]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (b"12", 12),
        ("42", 42),
        (b"-3", -3),
        (b" 7 ", 7),
        (b"1.5", 1),
        (b"1e3", 1000),
        (b"", 0),
        (None, 0),
        (b"x", 0),
        (5, 5),
        (b"12345678901234567890", 12345678901234567168),
    ],  # through a float, as it always was
)
def test_number_reads_as_int_of_float_would(value: Any, expected: int) -> None:
    assert number(value) == expected


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        (b"[1,2]", b"", ("t", [1, 2], {})),
        (b" [1] ", b'{"a":1}', ("t", [1], {"a": 1})),
        (b"[1] x", b"", ("", [], {})),
        (b"[", b"", ("", [], {})),
        ("[1]", "", ("t", [1], {})),
        ('["\u00e9"]'.encode(), b"", ("t", ["\u00e9"], {})),
        (b"{}", b"", ("", [], {})),
    ],
)
def test_decoded_reads_json_as_json_loads_would(args: Any, kwargs: Any, expected: Any) -> None:
    assert decoded(b"t", args, kwargs) == expected
