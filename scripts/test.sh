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
# /metrics is checked with Prometheus's own promtool (tests/test_prometheus.py).
if ! command -v promtool >/dev/null; then
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  $SUDO apt-get install -y -q --no-install-recommends prometheus >/dev/null \
    || { $SUDO apt-get update -q >/dev/null && \
         $SUDO apt-get install -y -q --no-install-recommends prometheus >/dev/null; }
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test]"
LOGS=$(mktemp -d)
trap 'jobs -p | xargs -r kill 2>/dev/null || true; rm -rf "$LOGS"' EXIT
if [ $# -eq 0 ]; then
  # The lowest Scrapy setup.cfg allows gets a venv of its own, installed while the lint
  # steps run (after the main install: both write the checkout's egg-info).
  LOWEST=$(sed -n 's/^ *scrapy>=\([0-9.]*\),.*/\1/p' setup.cfg)
  (
    [ -x .venv-scrapy-lowest/bin/python ] || "$PY" -m venv .venv-scrapy-lowest
    .venv-scrapy-lowest/bin/python -m pip install -q --disable-pip-version-check \
      -e ".[test]" "scrapy==$LOWEST"
  ) >"$LOGS/lowest-install.log" 2>&1 &
  LOWEST_INSTALL=$!
  # Scrapy's own crawl tests with our components (docs/compat.rst; the stock outcomes come
  # from scripts/compat/), beside the lint steps on the other core.
  .venv/bin/python scripts/scrapy_compat.py >"$LOGS/compat.log" 2>&1 &
  COMPAT=$!
fi
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy  # strict over the package (setup.cfg [mypy])
.venv/bin/python -m sphinx -W -q -b html docs docs/_build/html
status=0
.venv/bin/python -m pytest -q -n "$JOBS" --durations=25 "$@" || status=$?
if [ $# -eq 0 ]; then
  wait "$COMPAT" || status=1
  cat "$LOGS/compat.log"
  wait "$LOWEST_INSTALL" || { cat "$LOGS/lowest-install.log"; exit 1; }
  # On the lowest Scrapy, after the suite (beside it, the suite's timing-sensitive crawls
  # failed when the machine was slow): the conformance suite, with the files where
  # Scrapy's versions differ most (start-up and settings, kill -9 and resume, start()) and
  # one `scrapy twolevel` command (docs/compat.rst). LOWEST_TESTS="-m crawl" runs the
  # whole crawl layer there.
  echo "== The crawl tests on Scrapy $LOWEST (.venv-scrapy-lowest) =="
  # shellcheck disable=SC2086
  .venv-scrapy-lowest/bin/python -m pytest -q -n "$JOBS" -p no:cacheprovider ${LOWEST_TESTS:-\
    tests/test_conformance.py tests/test_startup.py tests/test_crash.py \
    tests/test_start_pacing.py \
    tests/test_live_crawl.py::test_twolevel_status_reads_the_jobdir_of_a_crawl_killed_with_9} \
    || status=1
fi
exit "$status"
