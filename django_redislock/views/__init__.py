"""The view guards: ``locked`` (``@redis_locked``) and ``rate_limited``
(``@redis_rate_limited``, with ``rate_arguments`` and ``rate_headers``) over what they share
in ``guard`` (arguments, sync/async wrapping, the Redis-down policy, the refusals) and the key
templates of ``keys``."""
