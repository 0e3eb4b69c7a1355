"""What the benchmark scripts share, so that each script keeps only its own study.

- :mod:`harness.env`: the machine and software facts every results file records;
- :mod:`harness.crawl`: crawls and workers run in subprocesses, and what they report;
- :mod:`harness.report`: tables, result files, docs fragments, figures, ratios and verdicts.

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
