#!/usr/bin/env bash
# Run the whole test suite on a fresh machine: make a venv, install, lint, build docs, test.
# With arguments, they go to pytest and the last two steps (Scrapy's own tests, the lowest
# Scrapy) are skipped: `bash scripts/test.sh -m "unit or glue"` is the fast gate.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# Test processes: the suite waits on loopback servers, subprocesses and Redis more than it
# computes (at -n 4 its processes used 1.4 of 2 cores, about 4 min against 10 serial).
JOBS=${TEST_JOBS:-4}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# The live view's browser test drives Debian's headless Chromium (tests/test_live_browser.py).
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  $SUDO apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null \
    || { $SUDO apt-get update -q >/dev/null && \
         $SUDO apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null; }
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test]"
LOGS=$(mktemp -d)
trap 'rm -rf "$LOGS"' EXIT
if [ $# -eq 0 ]; then
  # The lowest Scrapy setup.cfg allows gets a venv of its own, installed while the rest runs
  # (after the main install: both write the checkout's egg-info).
  LOWEST=$(sed -n 's/^ *scrapy>=\([0-9.]*\),.*/\1/p' setup.cfg)
  (
    [ -x .venv-scrapy-lowest/bin/python ] || "$PY" -m venv .venv-scrapy-lowest
    .venv-scrapy-lowest/bin/python -m pip install -q --disable-pip-version-check \
      -e ".[test]" "scrapy==$LOWEST"
  ) >"$LOGS/lowest-install.log" 2>&1 &
  LOWEST_INSTALL=$!
fi
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy  # strict over the package (setup.cfg [mypy])
.venv/bin/python -m sphinx -W -q -b html docs docs/_build/html
.venv/bin/python -m pytest -q -n "$JOBS" --durations=25 "$@"
if [ $# -eq 0 ]; then
  wait "$LOWEST_INSTALL" || { cat "$LOGS/lowest-install.log"; exit 1; }
  # Side by side: Scrapy's own crawl tests with our components (docs/compat.rst; the stock
  # outcomes come from scripts/compat/), and the crawl layer (the conformance suite among
  # it) on the lowest Scrapy, spread over 4 processes (the compatibility run ends first).
  .venv/bin/python scripts/scrapy_compat.py >"$LOGS/compat.log" 2>&1 &
  COMPAT=$!
  status=0
  .venv-scrapy-lowest/bin/python -m pytest -q -m crawl -n 4 -p no:cacheprovider || status=$?
  compat_status=0
  wait "$COMPAT" || compat_status=$?
  cat "$LOGS/compat.log"
  [ "$status" -eq 0 ] && [ "$compat_status" -eq 0 ]
fi
