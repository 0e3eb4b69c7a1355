"""Regenerate every crawl-efficiency result: the simulation, then the real crawls.

Usage::

    python benchmarks/efficiency.py           # both harnesses at their defaults, ~14 min
    python benchmarks/efficiency.py --quick   # both, small; prints, writes nothing

Each harness writes its own section of ``benchmarks/results/efficiency.json`` and its
tables and figures under ``docs/results/`` (see ``reporting.py``).
"""

from __future__ import annotations

import sys

import efficiency_crawl
import efficiency_sim


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if set(args) - {"--quick"}:
        print(__doc__, file=sys.stderr)
        return 2
    return efficiency_sim.main(args) or efficiency_crawl.main(args)


if __name__ == "__main__":
    raise SystemExit(main())
