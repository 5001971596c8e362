#!/usr/bin/env bash
# Sets up everything the test suite needs on a machine with only Python, pip and apt, then
# runs lint, types and the whole suite on both Django lines at once: the Django that pip picks
# for python3 (5.2 on Python 3.10/3.11), and Django 6 on a Python 3.12+
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

python_is() { "$VENV/bin/python" -c "import django, sys; sys.exit(not ($1))"; }
if python_is 'django.VERSION >= (6, 0)'; then
  echo "== pytest on Django $("$VENV/bin/python" -m django --version); this is the Django 6 leg," \
    "for Django 5.2 use a Python 3.10 or 3.11 virtualenv"
  exec "$VENV/bin/python" -m pytest "$@"
fi

# The two legs run at the same time: the suite mostly waits (on Redis, on child processes, on
# timers), so both together take little longer than one. The Django 6 leg's output is kept
# in a file and shown once both are done.
log=$(mktemp)
bash scripts/django6_leg.sh "$@" >"$log" 2>&1 &
leg6=$!
trap 'kill "$leg6" 2>/dev/null || true' INT TERM
echo "== pytest on Django $("$VENV/bin/python" -m django --version)," \
  "$("$VENV/bin/python" --version) (the Django 6 leg runs meanwhile)"
set +e
"$VENV/bin/python" -m pytest "$@"
rc=$?
wait "$leg6"
rc6=$?
set -e
echo "== the Django 6 leg (it ran beside the one above)"
cat "$log"
rm -f "$log"
echo "== Django 5.2 leg: exit $rc; Django 6 leg: exit $rc6"
[ "$rc" = 0 ] && [ "$rc6" = 0 ]
