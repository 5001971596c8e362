"""``AsyncStock``: ``Stock`` with awaitable methods, over the asyncio client of the running
event loop (``redis.aio``)."""

from __future__ import annotations

from typing import Any

from ..redis import aio
from .stock import Operation, Reservation, StockBase, StockCounts


class AsyncStock(StockBase):
    """The asyncio twin of ``Stock``: the same arguments, answers and errors, awaited."""

    async def _run(self, operation: Operation) -> Any:
        client = aio.get_async_redis(self.using)
        while True:
            raw = await aio.run_script(client, operation.script, operation.keys, operation.args)
            reply = self._read(raw)
            if reply.status != "more":
                return operation.answer(reply)

    async def set(self, quantity: int) -> StockCounts:
        """See ``Stock.set``."""
        return await self._run(self._set_op(quantity))  # type: ignore[no-any-return]

    async def add(self, quantity: int) -> StockCounts:
        """See ``Stock.add``."""
        return await self._run(self._add_op(quantity))  # type: ignore[no-any-return]

    async def reserve(self, quantity: int = 1, ttl: float = 600.0) -> Reservation | None:
        """See ``Stock.reserve``."""
        return await self._run(self._reserve_op(quantity, ttl))  # type: ignore[no-any-return]

    async def confirm(self, reservation: Reservation | str) -> None:
        """See ``Stock.confirm``."""
        await self._run(self._finish_op(reservation, "c"))

    async def release(self, reservation: Reservation | str) -> bool:
        """See ``Stock.release``."""
        return await self._run(self._finish_op(reservation, "r"))  # type: ignore[no-any-return]

    async def counts(self) -> StockCounts:
        """See ``Stock.counts``."""
        return await self._run(self._counts_op())  # type: ignore[no-any-return]

    async def available(self) -> int:
        return (await self.counts()).available

    async def reserved(self) -> int:
        return (await self.counts()).reserved

    async def confirmed(self) -> int:
        return (await self.counts()).confirmed

    async def delete(self) -> bool:
        """See ``Stock.delete``."""
        return await self._run(self._delete_op())  # type: ignore[no-any-return]
