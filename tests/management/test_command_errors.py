"""Every operator command, with Redis unreachable: a ``CommandError`` with a hint and exit
status 3, never a traceback."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from tests.support.fresh_manage import run_manage
from tests.support.servers import free_port

COMMANDS = [
    ("redislock_stats",),
    ("redislock_requeue", "--queue", "default", "--yes"),
    ("redislock_purge", "--queue", "default", "--state", "dead", "--yes"),
    ("redislock_locks",),
    ("redislock_force_release", "order:1", "--yes"),
]


@pytest.mark.parametrize("args", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_redis_unreachable_is_a_command_error_with_a_hint(
    settings: Any, args: tuple[str, ...]
) -> None:
    settings.REDISLOCK = {"URL": f"redis://127.0.0.1:{free_port()}/0"}
    with pytest.raises(CommandError, match=r"Cannot reach Redis \(.*\)\. Check REDISLOCK") as err:
        call_command(*args, stdout=StringIO(), stderr=StringIO())
    assert err.value.returncode == 3


def test_from_the_command_line_it_exits_3_without_a_traceback() -> None:
    result = run_manage("redislock_stats", REDISLOCK={"URL": f"redis://127.0.0.1:{free_port()}/0"})
    assert result.returncode == 3, result.stderr
    assert result.stderr.startswith("CommandError: Cannot reach Redis")
    assert "Traceback" not in result.stderr
