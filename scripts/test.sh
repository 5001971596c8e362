#!/usr/bin/env bash
# Sets up everything the test suite needs on a machine with only Python, pip and apt, then
# runs lint, types and the whole suite on both Django lines: the Django that pip picks for
# python3 (5.2 on Python 3.10/3.11), then Django 6 on a Python 3.12+ (scripts/test_django6.sh).
# Extra arguments go to pytest. In CI (CI=true) a Django 6 leg that cannot run fails the run;
# elsewhere it is reported plainly at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh test,lint

echo "== ruff, mypy"
"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
"$VENV/bin/mypy"

# Tests never rewrite tracked files: the working tree's changes are the same after the run.
tracked_state() { git diff HEAD 2>/dev/null | sha1sum; }
before=$(tracked_state)
tracked_unchanged() {
  if [ "$(tracked_state)" != "$before" ]; then
    echo "!! The test run changed tracked files:" >&2
    git diff --stat >&2
    return 1
  fi
}

echo "== pytest on Django $("$VENV/bin/python" -m django --version), $("$VENV/bin/python" --version)"
"$VENV/bin/python" -m pytest "$@"
tracked_unchanged

if "$VENV/bin/python" -c 'import django, sys; sys.exit(django.VERSION < (6, 0))'; then
  echo "== this leg already ran Django 6; for Django 5.2 use a Python 3.10 or 3.11 virtualenv"
  exit 0
fi
echo "== the Django 6 leg"
bash scripts/django6_leg.sh "$@"
tracked_unchanged
