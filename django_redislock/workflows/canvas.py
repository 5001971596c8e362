"""Building a workflow: ``step`` binds a task's call, ``chain`` runs steps one after
another, ``group`` side by side; ``.then(...)`` runs what follows once they all succeeded,
``.on_complete(...)`` once they all ended, however. Nothing touches Redis until
``.enqueue()`` (``workflow``), which writes every step at once.

A workflow flattens to its steps, each with the steps it waits for: the first steps of
what follows a chain's link wait for the last steps of what comes before it (all of a
group's members, the last of a chain).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .workflow import Workflow

MAX_STEPS = 10_000  # of one workflow
SUCCEEDED, FINISHED = "succeeded", "finished"


class Node:
    """One step of a flattened workflow: the steps it waits for (their indices), and when
    it runs (once they succeeded, or once they finished)."""

    __slots__ = ("after", "run_when", "step")

    def __init__(self, step: Step, after: list[int], run_when: str) -> None:
        self.step, self.after, self.run_when = step, after, run_when


class Canvas:
    """What ``step``, ``chain`` and ``group`` build."""

    __slots__ = ()

    def then(self, *following: Any) -> Chain:
        """Run ``following`` (steps, chains, groups, one after another) once every last
        step of this one succeeded; one that ends dead ends them dead (``DependencyFailed``)."""
        return Chain([self, *map(_canvas, following)], [SUCCEEDED] * len(following))

    def on_complete(self, following: Any) -> Chain:
        """Run ``following`` once every last step of this one ended, however it ended."""
        return Chain([self, _canvas(following)], [FINISHED])

    def enqueue(self) -> Workflow:
        """Write every step (one round trip per queue and 1,000 steps; inside
        ``transaction.atomic()``, when it commits) and return the workflow's handle."""
        from .enqueueing import enqueue

        return enqueue(self)

    def nodes(self) -> list[Node]:
        """The steps, flattened, in the order they were given."""
        found: list[Node] = []
        self._flatten(found, [], SUCCEEDED)
        if not found:
            raise ValueError("A workflow needs at least one step.")
        if len(found) > MAX_STEPS:
            raise ValueError(f"A workflow has at most {MAX_STEPS} steps, not {len(found)}.")
        return found

    def _flatten(self, found: list[Node], after: list[int], run_when: str) -> list[int]:
        """Add this one's steps after ``after``; returns the indices of its last steps."""
        raise NotImplementedError


class Step(Canvas):
    """A call of a task, bound but not enqueued (``step(task, *args, **kwargs)``)."""

    __slots__ = ("args", "kwargs", "task")

    def __init__(self, task: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if not callable(getattr(task, "enqueue", None)) or not hasattr(task, "module_path"):
            raise TypeError(
                f"step() takes a task (a function decorated with @task), not {task!r:.60}."
            )
        self.task, self.args, self.kwargs = task, args, kwargs

    def __repr__(self) -> str:
        return f"step({self.task.module_path}, *{self.args!r}, **{self.kwargs!r})"

    def _flatten(self, found: list[Node], after: list[int], run_when: str) -> list[int]:
        found.append(Node(self, after, run_when))
        return [len(found) - 1]


class Chain(Canvas):
    """Items one after another: each waits for the last steps of the one before it, to
    have succeeded (``then``) or finished (``on_complete``)."""

    __slots__ = ("items", "links")

    def __init__(self, items: list[Canvas], links: list[str]) -> None:
        self.items, self.links = items, links

    def _flatten(self, found: list[Node], after: list[int], run_when: str) -> list[int]:
        tails = self.items[0]._flatten(found, after, run_when)
        for item, link in zip(self.items[1:], self.links, strict=True):
            tails = item._flatten(found, tails, link)
        return tails


class Group(Canvas):
    """Items side by side, each after what comes before the group."""

    __slots__ = ("items",)

    def __init__(self, items: list[Canvas]) -> None:
        self.items = items

    def _flatten(self, found: list[Node], after: list[int], run_when: str) -> list[int]:
        tails: list[int] = []
        for item in self.items:
            tails += item._flatten(found, after, run_when)
        return tails or after  # (an empty group: what follows it waits for what preceded)


def _canvas(item: Any) -> Canvas:
    if not isinstance(item, Canvas):
        raise TypeError(
            f"A workflow is made of step(), chain() and group(), not {type(item).__name__} "
            f"({item!r:.60}); wrap a task's call in step(task, *args, **kwargs)."
        )
    return item


def step(task: Any, *args: Any, **kwargs: Any) -> Step:
    """``task`` called with ``args`` and ``kwargs``, bound, not enqueued. ``task`` may be a
    ``task.using(...)`` (another queue, priority, ``run_after``...)."""
    return Step(task, args, kwargs)


def chain(*items: Any) -> Chain:
    """``items`` (steps, chains, groups) one after another: each starts once the last steps
    of the one before it succeeded."""
    if not items:
        raise ValueError("chain() needs at least one step.")
    canvases = [_canvas(item) for item in items]
    return Chain(canvases, [SUCCEEDED] * (len(canvases) - 1))


def group(items: Iterable[Any]) -> Group:
    """``items`` (steps, chains, groups) side by side: ``.then(...)`` runs once they all
    succeeded, ``.on_complete(...)`` once they all ended."""
    if isinstance(items, Canvas):
        raise TypeError("group() takes a list of steps: group([step(...), step(...)]).")
    return Group([_canvas(item) for item in items])
