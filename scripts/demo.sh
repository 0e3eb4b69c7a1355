#!/usr/bin/env bash
# Run the main job on a fresh machine: install, start the local multi-host test web and
# crawl it with `scrapy crawl` using the two-level scheduler; prints a short summary.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check -e .
cd example_project
exec ../.venv/bin/scrapy crawl testweb "$@"
