#!/usr/bin/env bash
# Runs one benchmark (locks, ...) in the project's virtualenv, installing what it needs.
#   bash scripts/bench.sh locks [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh bench
name=${1:?usage: scripts/bench.sh NAME [args]}
shift
# As a module: run as a script, benchmarks/queue.py would shadow the standard library.
exec "$VENV/bin/python" -m "benchmarks.$name" "$@"
