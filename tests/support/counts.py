"""What ``Queue.counts()`` gives for a queue holding the jobs named (every other state 0)."""

from __future__ import annotations

STATES = ("ready", "scheduled", "running", "dead", "parked", "waiting")


def job_counts(**held: int) -> dict[str, int]:
    """``{"ready": 0, …, "waiting": 0}`` with the counts ``held`` names (``dead=1``)."""
    unknown = set(held) - set(STATES)
    if unknown:
        raise TypeError(f"Not a state: {', '.join(sorted(unknown))}.")
    return {state: held.get(state, 0) for state in STATES}
