"""What ENQUEUE (and ADD) reply for one job, read as the job's state and times."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from .jobs import JobState
from .replies import text


class Enqueued(NamedTuple):
    """ENQUEUE's four values for one job (ADD's too): ``outcome`` 1 added, 2 replaced, 3
    kept for a follow-up run, 0 kept; its due time and its state's letter as stored; when
    it was enqueued (epoch ms)."""

    outcome: int
    due: int
    state: Any  # a JobState letter, as Redis gave it
    enqueued: int

    @classmethod
    def of(cls, values: Sequence[Any]) -> Enqueued:
        return cls(*values[:4])

    def placed(self) -> tuple[str, int, int]:
        """The job's state (a JobState name), score (due time) and enqueue time."""
        state = _STATE_NAMES.get(self.state) or JobState.of_letter(text(self.state)).value
        return state, int(self.due), int(self.enqueued)


# A state's letter as a script replies it (bytes, or str with decoded replies): its name.
_STATE_NAMES = {
    form: state.value
    for state in JobState
    if state.letter
    for form in (state.letter, state.letter.encode())
}
