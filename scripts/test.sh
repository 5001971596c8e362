#!/usr/bin/env bash
# Sets up everything the test suite needs on a machine with only Python, pip and apt, then
# runs lint, types and the whole suite on both Django lines: the Django that pip picks for
# python3 (5.2 on Python 3.10/3.11), and beside it Django 6 on a Python 3.12+
# (scripts/test_django6.sh).
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

if "$VENV/bin/python" -c 'import django, sys; sys.exit(django.VERSION < (6, 0))'; then
  echo "== pytest on Django $("$VENV/bin/python" -m django --version), $("$VENV/bin/python" --version)"
  echo "== this leg already runs Django 6; for Django 5.2 use a Python 3.10 or 3.11 virtualenv"
  "$VENV/bin/python" -m pytest "$@"
  tracked_unchanged
  exit 0
fi

# The two legs run side by side: each waits on Redis and its own processes far more than it
# computes, so together they take little longer than the longer one alone. The Django 6
# leg is set up first (apt and pip never run twice at once), and its output is shown once
# it has ended.
echo "== setting up the Django 6 leg"
REDISLOCK_SETUP_ONLY=1 bash scripts/django6_leg.sh
six_log=$(mktemp)
bash scripts/django6_leg.sh "$@" >"$six_log" 2>&1 &
six_pid=$!
trap 'kill -- "$six_pid" 2>/dev/null || true' INT TERM

echo "== pytest on Django $("$VENV/bin/python" -m django --version), $("$VENV/bin/python" --version)," \
  "beside the Django 6 leg (its output follows at the end)"
five_rc=0
"$VENV/bin/python" -m pytest "$@" || five_rc=$?
echo "== waiting for the Django 6 leg"
six_rc=0
wait "$six_pid" || six_rc=$?
trap - INT TERM
echo "== the Django 6 leg's output"
cat "$six_log"
rm -f "$six_log"
tracked_unchanged
if [ "$five_rc" != 0 ] || [ "$six_rc" != 0 ]; then
  echo "!! failed: the Django 5.2 leg exited with $five_rc, the Django 6 leg with $six_rc" >&2
  exit 1
fi
echo "== both legs passed"
