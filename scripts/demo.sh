#!/usr/bin/env bash
# The README demo: installs what it needs, then runs the example shop's flash sale three ways,
# unguarded, mutex-guarded and by reservation. Redis: $REDIS_URL if set, else an embedded real Redis.
#   bash scripts/demo.sh [--stock 100] [--buyers 8] [--attempts 250] [--workers 4]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh server,tasks,schedule
python="$(cd "$VENV" && pwd)/bin/python"
cd example_project
exec "$python" manage.py flash_sale_demo "$@"
