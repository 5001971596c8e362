"""Rate limits: ``RateLimit``/``AsyncRateLimit`` for any code, ``@redis_rate_limited`` for
views. Each hit is one atomic script on the Redis server's clock."""
