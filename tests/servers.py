"""``tests.support.servers`` under its old name, for the ported peers' suites
(``locks/test_ported*.py``), which are kept as they were ported."""

from tests.support.servers import RedisServer

__all__ = ["RedisServer"]
