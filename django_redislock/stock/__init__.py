"""Stock reservations: ``Stock`` (sync) and ``AsyncStock`` (asyncio)."""
