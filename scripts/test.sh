#!/usr/bin/env bash
# Run the whole test suite on a fresh machine: make a venv, install, lint, build docs, test.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# The live view's browser test drives Debian's headless Chromium (tests/test_live_browser.py).
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  $SUDO apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null \
    || { $SUDO apt-get update -q >/dev/null && \
         $SUDO apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null; }
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test]"
.venv/bin/ruff check .
.venv/bin/mypy  # strict over the package (setup.cfg [mypy])
.venv/bin/python -m sphinx -W -q -b html docs docs/_build/html
.venv/bin/python -m pytest -q --durations=25 "$@"
if [ $# -eq 0 ]; then
  # Scrapy's own crawl tests with our components (docs/compat.rst).
  .venv/bin/python scripts/scrapy_compat.py
  # The lowest Scrapy setup.cfg allows: the crawl layer (the conformance suite among it)
  # again, in a venv of its own, spread over 3 processes.
  LOWEST=$(sed -n 's/^ *scrapy>=\([0-9.]*\),.*/\1/p' setup.cfg)
  [ -x .venv-scrapy-lowest/bin/python ] || "$PY" -m venv .venv-scrapy-lowest
  .venv-scrapy-lowest/bin/python -m pip install -q --disable-pip-version-check \
    -e ".[test]" "scrapy==$LOWEST"
  .venv-scrapy-lowest/bin/python -m pytest -q -m crawl -n 3 -p no:cacheprovider
fi
