from __future__ import annotations

from typing import Any

import pytest

from ..conftest import Backend, _configure


@pytest.fixture
def fake(request: pytest.FixtureRequest, settings: Any) -> Backend:
    """fakeredis only, emptied: for what runs the same on every backend."""
    return _configure(request, settings, "fakeredis")
