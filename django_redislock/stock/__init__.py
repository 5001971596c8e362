"""Stock reservations: ``stock.Stock`` (sync) and ``async_stock.AsyncStock`` (asyncio) over
the scripts of ``scripts`` and the key layout of ``keys``; ``listing`` reads stocks for the
admin."""
