#!/usr/bin/env bash
# Sets up everything the test suite needs on a machine with only Python, pip and apt, then
# runs lint, types and the whole suite (the docs' build with -W included: tests/test_docs.py)
# on both Django lines: the Django that pip picks for python3 (5.2 on Python 3.10/3.11), and
# beside it Django 6 on a Python 3.12+ (scripts/test_django6.sh). A failure in one step never stops the others: every step runs,
# and the run ends with a table of what passed and failed, and how long each took.
# Extra arguments go to pytest. In CI (CI=true) a Django 6 leg that cannot run fails the run;
# elsewhere it is reported plainly at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
set -e
source scripts/setup.sh test,lint
set +e

rows=()   # "step|outcome|seconds" for the closing table
failed=0
record() { # step rc seconds [outcome]
  local outcome=${4:-}
  if [ -z "$outcome" ]; then
    if [ "$2" = 0 ]; then outcome=passed; else outcome="FAILED (exit $2)"; fi
  fi
  [ "$2" = 0 ] || failed=1
  rows+=("$1|$outcome|$3")
}
step() { # name command...: runs it, records its outcome and time
  local name=$1 began=$SECONDS rc=0
  shift
  echo "== $name"
  "$@" || rc=$?
  record "$name" "$rc" $((SECONDS - began))
}
# The counts of a pytest run, from the JUnit XML report it wrote (whatever its verbosity).
pytest_counts() {
  "$VENV/bin/python" - "$1" <<'PY' 2>/dev/null || echo "no report (see its output)"
import sys
import xml.etree.ElementTree as ET

suite = ET.parse(sys.argv[1]).getroot()
suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
tests, failures, errors, skipped = (
    int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")
)
counts = [f"{tests - failures - errors - skipped} passed", f"{failures} failed"]
counts += [f"{errors} errors"] * bool(errors) + [f"{skipped} skipped"] * bool(skipped)
print(", ".join(counts))
PY
}

step "ruff check" "$VENV/bin/ruff" check .
step "ruff format" "$VENV/bin/ruff" format --check .
step "mypy" "$VENV/bin/mypy"

# Tests never rewrite tracked files: the working tree's changes are the same after the run.
tracked_state() { git diff HEAD 2>/dev/null | sha1sum; }
before=$(tracked_state)

six_log=$(mktemp)
six_time=$(mktemp)
five_xml=$(mktemp)
six_xml=$(mktemp)
six_pid=
if "$VENV/bin/python" -c 'import django, sys; sys.exit(django.VERSION < (6, 0))'; then
  echo "== this venv already runs Django 6; for Django 5.2 use a Python 3.10 or 3.11 virtualenv"
else
  # The two legs run side by side: each waits on Redis and its own processes far more than
  # it computes, so together they take little longer than the longer one alone. The Django
  # 6 leg is set up first (apt and pip never run twice at once), and its output is shown
  # once it has ended.
  echo "== setting up the Django 6 leg"
  began=$SECONDS
  if REDISLOCK_SETUP_ONLY=1 bash scripts/django6_leg.sh; then
    (
      began=$SECONDS
      PYTEST_ADDOPTS="${PYTEST_ADDOPTS:-} --durations=15 --junit-xml=$six_xml" bash scripts/django6_leg.sh "$@"
      rc=$?
      echo $((SECONDS - began)) >"$six_time"
      exit "$rc"
    ) >"$six_log" 2>&1 &
    six_pid=$!
    trap 'kill -- "$six_pid" 2>/dev/null || true' INT TERM
  else
    record "Django 6 leg" 1 $((SECONDS - began)) "FAILED: its setup failed (see above)"
  fi
fi

five_name="pytest, Django $("$VENV/bin/python" -m django --version)"
echo "== $five_name, $("$VENV/bin/python" --version)${six_pid:+, beside the Django 6 leg (its output follows at the end)}"
began=$SECONDS
PYTEST_ADDOPTS="${PYTEST_ADDOPTS:-} --durations=15 --junit-xml=$five_xml" "$VENV/bin/python" -m pytest "$@"
five_rc=$?
record "$five_name" "$five_rc" $((SECONDS - began)) \
  "$([ "$five_rc" = 0 ] && echo passed || echo FAILED): $(pytest_counts "$five_xml")"

if [ -n "$six_pid" ]; then
  echo "== waiting for the Django 6 leg"
  six_rc=0
  wait "$six_pid" || six_rc=$?
  trap - INT TERM
  echo "== the Django 6 leg's output"
  cat "$six_log"
  six_version=$(.venv-dj6/bin/python -m django --version 2>/dev/null || echo 6)
  if grep -q "did NOT run" "$six_log"; then
    rows+=("pytest, Django 6|not run: no Python 3.12+ was found|0")
  else
    record "pytest, Django $six_version" "$six_rc" "$(cat "$six_time" 2>/dev/null || echo 0)" \
      "$([ "$six_rc" = 0 ] && echo passed || echo FAILED): $(pytest_counts "$six_xml")"
  fi
fi
rm -f "$six_log" "$six_time" "$five_xml" "$six_xml"

if [ "$(tracked_state)" != "$before" ]; then
  echo "!! The test run changed tracked files:" >&2
  git diff --stat >&2
  record "tracked files unchanged" 1 0 "FAILED: the run changed them"
else
  record "tracked files unchanged" 0 0
fi

echo
echo "== summary"
printf '%-32s %-58s %8s\n' "step" "outcome" "time"
for row in "${rows[@]}"; do
  IFS='|' read -r name outcome seconds <<<"$row"
  printf '%-32s %-58s %5dm%02ds\n' "$name" "$outcome" $((seconds / 60)) $((seconds % 60))
done
if [ "$failed" != 0 ]; then
  echo "!! some steps failed (above)" >&2
  exit 1
fi
echo "== everything passed"
