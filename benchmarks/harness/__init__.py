"""What the benchmark scripts share, so that each script keeps only its own study.

- :mod:`harness.env`: the machine and software facts every results file records (the one
  ``environment()``);
- :mod:`harness.crawl`: workers run in subprocesses on a snapshot of the package, and what
  they report;
- :mod:`harness.report`: tables, result files, docs fragments, figures, ratios and verdicts
  (the one report module);
- :mod:`harness.efficiency`: the crawl-efficiency metrics, checks and plots that
  ``efficiency_sim.py`` and ``efficiency_crawl.py`` share (rendered by :mod:`harness.report`).

The simulators that tests share with the benchmarks live in the package
(``scrapy_twolevel.testweb.sim``), so no test imports from here and nothing here imports
a test.

The paths are decided here, once: committed results go to ``benchmarks/results/`` and the
docs' tables and figures to ``docs/results/``, whichever script writes them.
"""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent
ROOT = BENCH.parent
RESULTS = BENCH / "results"
DOCS_RESULTS = ROOT / "docs" / "results"


def use_checkout() -> None:
    """Import ``scrapy_twolevel`` from this checkout and the benchmark modules from here,
    whatever is installed (for the scripts that run without an install)."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(BENCH))
