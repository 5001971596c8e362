"""Workflows: steps of tasks that wait for one another, across queues.

    from django_redislock.workflows import chain, group, step

    chain(step(reserve, order.pk), step(charge, order.pk), step(ship, order.pk)).enqueue()
    group([step(resize, image.pk, size) for size in SIZES]).then(step(publish, image.pk))
    group([...]).on_complete(step(report))     # once all ended, however

``enqueue()`` returns a ``Workflow``: ``id``, ``status``, ``progress()``, ``results()``,
``cancel()``, ``join(timeout)`` / ``ajoin``. ``Workflow.get(id, queue)`` finds one again.
"""

from .canvas import MAX_STEPS, chain, group, step
from .workflow import Workflow

__all__ = ["MAX_STEPS", "Workflow", "chain", "group", "step"]
