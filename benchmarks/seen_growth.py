"""The longest single call while the seen filter grows to 20 million URLs: no stall.

Issue 21, item 10: the exact seen cache used to rebuild its Bloom filter from every
stored key in one call when the filter was full (40-80 s at 40M URLs, on the reactor: in
the distributed mode the node missed its heartbeats and was reaped). Now a larger filter
is filled a chunk at a time while keys keep coming (``scrapy_twolevel/seen/seen_set.py``).

Measured in one process per variant, on the same keys (16-byte keys from BLAKE2b of the
index: what the dupefilter derives from Scrapy's fingerprints), every call timed:

- ``twolevel``: :class:`SeenSet` over the SQLite seen store of a ``JOBDIR`` crawl (a
  :class:`SqliteStore` file, committed every 2,000 writes as in a crawl), cache off so
  every key reaches the filter;
- ``scrapy``: Scrapy's ``RFPDupeFilter`` (a Python set of hex fingerprints, which grows
  by rehashing the whole set), given a fingerprinter that returns the key, so only its
  set is measured;
- and, after the ``twolevel`` run, the one-go rebuild it replaced: a filter of the final
  capacity filled from the whole store in one call.

Usage::

    python benchmarks/seen_growth.py                 # 20,000,000 keys, about 5 minutes
    python benchmarks/seen_growth.py --urls 1000000  # a quick look; writes nothing

Writes ``benchmarks/results/seen_growth.json``, ``benchmarks/results/seen_growth.md`` and
``docs/results/seen_growth.inc``.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import report

FULL = 20_000_000
VARIANTS = ("twolevel", "scrapy")
STALL = 1.0  # seconds: the target's bound on any one call


def keys(n: int) -> Any:
    for i in range(n):
        yield hashlib.blake2b(i.to_bytes(8, "little"), digest_size=16).digest()


def timed(calls: Any, n: int) -> dict[str, Any]:
    """Call each of ``calls`` once, timing every call; the distribution of their times."""
    clock = time.perf_counter
    longest = 0.0
    over_10ms = over_100ms = over_1s = 0
    started = clock()
    for call in calls:
        t0 = clock()
        call()
        spent = clock() - t0
        if spent > 0.01:
            over_10ms += 1
            over_100ms += spent > 0.1
            over_1s += spent > STALL
            longest = max(longest, spent)
    total = clock() - started
    return {
        "keys": n,
        "total_s": round(total, 2),
        "us_per_key": round(total / n * 1e6, 3),
        "longest_call_s": round(longest, 4),
        "calls_over_10ms": over_10ms,
        "calls_over_100ms": over_100ms,
        "calls_over_1s": over_1s,
    }


def run_twolevel(n: int) -> dict[str, Any]:
    from scrapy_twolevel.seen.cache import make_cache
    from scrapy_twolevel.seen.seen_set import SeenSet
    from scrapy_twolevel.storage.sqlite import SqliteStore

    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "seen.sqlite3", cache_mb=64)
        seen_store = store.seen_store({"bench": "1"}, with_queue=False)
        seen = SeenSet(make_cache("lru", 0), seen_store, error_rate=0.01)
        out = timed((lambda k=k: seen.test_and_add(k) for k in keys(n)), n)
        out["growths"] = seen.counters.rebuilds
        out["capacity"] = seen.bloom.capacity
        out["false_positives"] = seen.counters.false_positives
        # The one-go rebuild the incremental growth replaced, at the final size.
        t0 = time.perf_counter()
        seen._capacity = seen.bloom.capacity
        seen._rebuild()
        out["one_go_rebuild_s"] = round(time.perf_counter() - t0, 2)
        store.close()
    return out


class KeyAsFingerprint:
    """A fingerprinter for RFPDupeFilter that returns the 'request' itself (the key)."""

    def fingerprint(self, request: bytes) -> bytes:
        return request


def run_scrapy(n: int) -> dict[str, Any]:
    from scrapy.dupefilters import RFPDupeFilter

    df = RFPDupeFilter(fingerprinter=KeyAsFingerprint())  # type: ignore[arg-type]
    return timed((lambda k=k: df.request_seen(k) for k in keys(n)), n)  # type: ignore[arg-type]


def main() -> int:
    parser = report.arg_parser(__doc__)
    parser.add_argument("--urls", type=int, default=FULL, help=f"keys (default {FULL:,})")
    parser.add_argument("--worker", choices=VARIANTS, help="internal: run one variant")
    args = parser.parse_args()
    if args.worker:
        result = (run_twolevel if args.worker == "twolevel" else run_scrapy)(args.urls)
        print(json.dumps(result))
        return 0
    started = time.monotonic()
    runs = {}
    for variant in VARIANTS:
        cmd = [sys.executable, __file__, "--worker", variant, "--urls", str(args.urls)]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
        runs[variant] = json.loads(proc.stdout.strip().splitlines()[-1])
        print(variant, runs[variant], flush=True)
    elapsed = time.monotonic() - started
    head = report.columns(
        "variant | keys | µs per key | longest call s | calls over 10 ms | over 100 ms | "
        f"over {STALL:g} s | filter growths | one-go rebuild at the end s"
    )
    rows = [
        [
            name,
            f"{r['keys']:,}",
            f"{r['us_per_key']:.2f}",
            f"{r['longest_call_s']:.3f}",
            str(r["calls_over_10ms"]),
            str(r["calls_over_100ms"]),
            str(r["calls_over_1s"]),
            str(r.get("growths", "-")),
            str(r.get("one_go_rebuild_s", "-")),
        ]
        for name, r in runs.items()
    ]
    longest = runs["twolevel"]["longest_call_s"]
    target = report.verdict(longest <= STALL, f"longest {longest:.3f} s")
    definitions = {
        "one-go rebuild": "what the filter's last growth would have cost as one call (the "
        "old way): a filter of the final capacity filled from the whole store",
    }
    title = "The seen filter growing to 20 million URLs"
    notes = [f"Target: no call over {STALL:g} s while the filter grows: {target}."]
    full = args.urls == FULL
    report.publish_runs(
        __file__,
        sys.argv[1:],
        "seen_growth",
        title,
        runs=runs,
        elapsed=elapsed,
        table=(head, rows),
        full=full,
        notes=notes,
        caption="Every call timed",
        definitions=definitions,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
