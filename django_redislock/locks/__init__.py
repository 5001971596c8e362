"""Distributed locks: the key layout and value codec of a lock, its Lua scripts, what the
sync and asyncio locks share, the two locks, the auto-renew thread, Redlock and the listing
of held locks for the admin; the waiting and renewing that ``semaphores`` builds on."""
