#!/usr/bin/env bash
# Run the main job on a fresh machine: install, start the local multi-host test web and
# crawl it with `scrapy crawl` using the two-level scheduler; prints a short summary.
# Arguments go to `scrapy crawl`, e.g. `-s JOBDIR=/tmp/job1` (Ctrl-C once, run again to resume).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# The install is editable, so code changes need no reinstall: install only for a new venv,
# or when the package metadata (dependencies, entry points) changed since the last install.
STAMP=.venv/.scrapy_twolevel-demo-installed
if [ ! -f "$STAMP" ] || [ ! -x .venv/bin/scrapy ] \
    || [ pyproject.toml -nt "$STAMP" ] || [ setup.cfg -nt "$STAMP" ]; then
    echo "demo.sh: installing scrapy_twolevel into .venv" >&2
    .venv/bin/python -m pip install -q --disable-pip-version-check -e .
    touch "$STAMP"
fi
cd example_project
exec ../.venv/bin/scrapy crawl testweb "$@"
