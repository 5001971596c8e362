"""Semaphores (N holders at once): ``Semaphore`` and ``AsyncSemaphore`` over the key layout
of ``keys`` and the scripts of ``scripts``, built on the lock machinery of ``locks`` (holds,
waiting, the renewer); ``listing`` reads them for the admin."""
