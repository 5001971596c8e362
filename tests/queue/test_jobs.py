"""The job vocabulary (one state enum, one table of hash fields) and the key layout."""

from __future__ import annotations

import pytest

from django_redislock.queue.jobs import LISTED_STATES, Field, JobState, from_hash
from django_redislock.queue.keys import QueueKeys
from django_redislock.queue.lua import PRELUDE


def test_each_state_has_its_own_letter_and_reads_back() -> None:
    letters = [state.letter for state in JobState if state.letter]
    assert len(letters) == len(set(letters)) == len(JobState) - 1  # unknown has none
    for state in JobState:
        if state.letter:
            assert JobState.of_letter(state.letter) is state
            assert f"{state}" == str(state) == state.value
    assert JobState.of_letter("?") is JobState.UNKNOWN
    assert {"ready": 1}[JobState.READY] == 1  # a member is its name, as a key too
    assert [str(s) for s in LISTED_STATES] == ["ready", "scheduled", "running", "dead"]


def test_field_names_are_unique_and_reach_the_lua() -> None:
    names = Field.names()
    assert len(set(names.values())) == len(names)
    for name, stored in names.items():
        assert f"{name} = '{stored}'" in PRELUDE
    for state in JobState:
        if state.letter:
            assert f"{state.value} = '{state.letter}'" in PRELUDE


def test_a_hash_reads_back_through_the_one_table() -> None:
    job = from_hash("j1", "q", {Field.TASK: b"t", Field.ARGS: b"[1]",
                                Field.STATE: b"x", Field.ATTEMPTS: b"2"})  # fmt: skip
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
