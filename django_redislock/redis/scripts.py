"""A Lua script as the app sends it: its name, source and SHA1 (``EVALSHA`` first, the
source only when the server's script cache lacks it). The scripts themselves live with the
structure they work on (``locks.scripts``, ``queue.fetch_scripts``, …)."""

from __future__ import annotations

import hashlib
from typing import NamedTuple


class LuaScript(NamedTuple):
    name: str
    source: str
    sha: str


def lua_script(name: str, source: str) -> LuaScript:
    """The script ``name`` of Lua ``source``, with its SHA1."""
    return LuaScript(name, source, hashlib.sha1(source.encode()).hexdigest())
