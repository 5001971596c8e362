from __future__ import annotations

from typing import Any

import pytest

from tests.support.fixtures import Backend, configure_backend


@pytest.fixture
def fake(request: pytest.FixtureRequest, settings: Any) -> Backend:
    """fakeredis only, emptied: for what runs the same on every backend."""
    return configure_backend(request, settings, "fakeredis")
