#!/usr/bin/env bash
# Sets up everything the test suite needs on a machine with only Python, pip and apt, then
# runs lint, types and the whole suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh test,lint

echo "== ruff, mypy"
"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
"$VENV/bin/mypy"

echo "== pytest"
exec "$VENV/bin/python" -m pytest "$@"
