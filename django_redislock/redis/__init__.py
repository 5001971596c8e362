"""Talking to Redis: the clients (sync and asyncio, from a URL or a django-redis cache), the
fast path for one-round-trip commands, a ``BLPOP`` that ends on time, Redlock's independent
nodes, the Lua script type, and what the server's persistence settings promise."""
