"""Regenerate every crawl-efficiency result: the simulation, then the real crawls.

Usage::

    python benchmarks/efficiency.py           # both harnesses at their defaults, ~14 min
    python benchmarks/efficiency.py --quick   # both, small; prints, writes nothing

Each harness writes its own section of ``benchmarks/results/efficiency.json`` and its
tables and figures under ``docs/results/`` (see ``harness/efficiency.py``). Each runs as a
process of its own, exactly as ``python benchmarks/efficiency_sim.py`` and ``python
benchmarks/efficiency_crawl.py`` would.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if set(args) - {"--quick"}:
        print(__doc__, file=sys.stderr)
        return 2
    for script in ("efficiency_sim.py", "efficiency_crawl.py"):
        code = subprocess.run([sys.executable, str(HERE / script), *args]).returncode
        if code:
            return code
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
