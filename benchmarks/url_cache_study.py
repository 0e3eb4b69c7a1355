"""The URL-caching study, reproduced: which seen cache, and how large, in front of the seen set.

Broder, Najork and Wiener ("Efficient URL caching for World Wide Web crawling", 2003)
replayed the seen-tests of a 33-day crawl against random replacement, a static cache, LRU
and CLOCK, bounded by the clairvoyant MIN and an infinite cache. This script does the same
with ``scrapy_twolevel.seen.cache`` on two traces and picks ``TWOLEVEL_SEEN_CACHE_POLICY``
and ``TWOLEVEL_SEEN_CACHE_SIZE`` from the results.

- **Real trace.** A real crawl of the local test web, ``generate_web(60, 80, seed=1,
  links_per_page=25, same_host_links=0.9)`` (default host profiles and delays), with
  ``TwoLevelScheduler`` and ``HostMetricsMiddleware``, run as ``python -m
  scrapy_twolevel.testweb crawl`` in its own process. ``DUPEFILTER_CLASS`` is this file's
  :class:`RecordingDupeFilter`, a ``SeenCacheDupeFilter`` that first appends, for every
  ``request_seen`` call, the request's key (the first 16 bytes of
  ``crawler.request_fingerprinter.fingerprint(request)``, the dupefilter's own key), its
  ``Referer`` and its host to a file, then answers as the real filter. So the trace holds
  every request the spider yielded, seeds and duplicates included, in the order the
  scheduler saw them; replaying it through LRU at the default size must give the crawl's own
  ``twolevel/seen/cache_hits`` (checked). The test web's links are uniform within a host
  (no popular pages): it measures host locality, not popularity.
- **Synthetic trace.** A few million tests from :func:`synthetic_trace`, with Zipf-like
  popularity and host locality; its parameters and their reasons are in :data:`SYNTH`.
- **Policies.** LRU, CLOCK, random replacement, three static caches, MIN
  (:func:`~scrapy_twolevel.seen.cache.belady_hits`, with bypass) and an infinite cache;
  every miss inserts (:func:`~scrapy_twolevel.seen.cache.simulate`). Static caches:
  *static (oracle)* is preloaded with the most frequent keys of the whole trace, the
  study's a-priori popularity; *static (first 10%)* with the most frequent keys of the first
  10% of the trace (what a crawler could learn from its own start); *static (first come)*
  is the library's ``make_cache("static")``, which keeps the first keys inserted. All are
  scored over the whole trace. Sizes: powers of two, 2^6 to 2^20 (the real web has only a
  few thousand URLs, so its curve bends below 2^10). A preloaded key's first test is a
  miss all the same (a new URL must be reported new), so no static cache beats the
  infinite one.
- **Critical point.** On a hit-rate curve (LRU, CLOCK): the smallest size from which every
  further doubling gains less than a quarter of what the steepest doubling gained: where
  the steep part of the curve ends. Also reported: *flat from*, the smallest size from
  which every doubling gains less than 1 point (on a finite trace this is also where the
  cache nears the trace's distinct keys), and the smallest size within 2 points of the
  infinite cache.
- **Cost.** In the same run: microseconds per test (a lookup, plus an insert on a miss,
  through ``simulate()``'s loop; process CPU time, best and median of 7 interleaved runs)
  at 65,536 entries on the first 1,000,000 tests of the synthetic trace with 16-byte
  BLAKE2b keys, the shape of the dupefilter's keys; and RAM per entry with ``tracemalloc``
  (the larger of: the cache's own structures just filled, and after two capacities of new
  keys replaced its entries; the key objects are created before tracing starts and counted
  apart with ``sys.getsizeof``). For scale: Scrapy's fingerprint of a fresh request,
  CLOCK's slowest insert (a sweep of the whole cache), and a lookup of a present key in the
  SQLite seen store (OS cache warm), which is what a repeated key that misses the cache
  costs.
- **Sensitivity.** LRU on shorter synthetic traces with 4 to 256 hosts open at once.
- **Recommendation** (:func:`recommend`). Size: the largest LRU critical point over all the
  traces. Policy: among the policies within half a point of the best hit rate at that size
  on both traces, the lowest median CPU per test, unless others are within 10% of it; then
  the fewest bytes per entry.

Usage::

    python benchmarks/url_cache_study.py           # about 10 minutes on 2 busy CPUs
    python benchmarks/url_cache_study.py --quick   # a small web and trace; writes nothing

Writes ``benchmarks/results/url_cache_study.json`` (every hit count and parameter),
``benchmarks/results/url_cache_study.md``, ``docs/results/url_cache_study.inc`` and
``docs/results/url_cache_real.png``, ``docs/results/url_cache_synthetic.png``.
"""

from __future__ import annotations

import collections
import gc
import json
import os
import random
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Hashable, Sequence
from hashlib import blake2b
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import reporting
from harness import report
from harness.crawl import crawl_test_web
from scrapy_twolevel.config import DEFAULTS
from scrapy_twolevel.dupefilter import SeenCacheDupeFilter
from scrapy_twolevel.seen.cache import (
    ClockCache,
    LRUCache,
    RandomCache,
    SeenCache,
    StaticCache,
    belady_hits,
    infinite_hits,
    make_cache,
    simulate,
)

HERE = Path(__file__).resolve().parent
NAME = "url_cache_study"
RESULTS_JSON = reporting.RESULTS_DIR / f"{NAME}.json"
TRACE_SETTING = "URL_CACHE_STUDY_TRACE"
CRAWL_TIMEOUT = 600

#: The real crawl's web and settings (``--quick``: a 20 x 30 web).
REAL = {
    "n_hosts": 60,
    "pages_per_host": 80,
    "seed": 1,
    "links_per_page": 25,
    "same_host_links": 0.9,
}
REAL_QUICK = {**REAL, "n_hosts": 20, "pages_per_host": 30, "links_per_page": 15}
CRAWL_SETTINGS = {
    "SCHEDULER": "scrapy_twolevel.scheduler.TwoLevelScheduler",
    "DOWNLOADER_MIDDLEWARES": {"scrapy_twolevel.middleware.HostMetricsMiddleware": 950},
    "DUPEFILTER_CLASS": f"{NAME}.RecordingDupeFilter",
}

#: The synthetic trace's generator parameters, and why (see :func:`synthetic_trace`).
SYNTH: dict[str, Any] = {
    # A web of many small sites and a few huge ones: site sizes follow a discrete Pareto
    # law (tail exponent 1.1, at least 5 pages, at most 100,000), as measured web site
    # sizes do.
    "n_hosts": 50_000,
    "host_size_alpha": 1.1,
    "host_size_min": 5,
    "host_size_max": 100_000,
    # Pages crawled: with ~20 links a page, 200,000 pages give ~4 million tests.
    "pages": 200_000,
    # Hosts open at once: TWOLEVEL_MAX_OPEN_HOSTS defaults to CONCURRENT_REQUESTS (16),
    # one request in flight per host, so 16 hosts' pages are interleaved at any time.
    "open_hosts": 16,
    # A host's visit (its session) fetches its pages most popular first (home page, then
    # navigation pages: what a breadth-first walk of the site reaches first), up to this
    # many, then its slot goes to the next host.
    "host_budget": 1_000,
    # Links per page: 1 + Poisson(19), a mean of 20.
    "mean_links": 20,
    # Share of a page's links that stay on its host (links cluster by host).
    "same_host": 0.8,
    # Within a host, a link's target is the page of popularity rank k (0 = home page) with
    # probability ~ (k + 1) ** -1.4 (a power law over the host's pages, floored): the home
    # and navigation pages are linked from almost every page. 1.4 is the exponent that
    # makes ~30% of a page's links repeat another link of the same page, the study's share.
    "same_host_exponent": 1.4,
    # A cross-host link picks the target host with probability proportional to its size
    # (big sites attract more links), then a page with exponent 1.6: mostly home pages and
    # top-level sections.
    "cross_host_exponent": 1.6,
    "seed": 1,
}
SYNTH_QUICK = {**SYNTH, "n_hosts": 5_000, "pages": 10_000}
#: Open hosts for the sensitivity sweep (LRU only), on traces of this many pages.
SENSITIVITY = {"open_hosts": (4, 16, 64, 256), "pages": 100_000}
SENSITIVITY_QUICK = {"open_hosts": (4, 64), "pages": 5_000}

SIZES = [1 << e for e in range(6, 21)]
SIZES_QUICK = [1 << e for e in range(6, 15)]
TABLE_SIZES = [1 << e for e in range(10, 21, 2)]
STATIC_PREFIX = 0.1
#: Critical point: from there on, every doubling gains less than this share of the steepest.
CRITICAL_SHARE = 0.25
#: "Flat from": from there on, every doubling gains less than this (fraction of tests).
FLAT_GAIN = 0.01
#: "Near the infinite cache": within this many points of it.
NEAR_INFINITE = 0.02

TIMING = {"capacity": 1 << 16, "tests": 1_000_000, "repeats": 7}
#: Policies whose median CPU per test differ by less than this are a tie (machine noise).
CPU_TIE = 0.10
TIMING_QUICK = {"capacity": 1 << 12, "tests": 100_000, "repeats": 2}

POLICIES = (
    "lru",
    "clock",
    "random",
    "static-oracle",
    "static-prefix",
    "static-first",
    "min",
    "infinite",
)
PRACTICAL = ("lru", "clock", "random", "static-first")
LABELS = {
    "lru": "LRU",
    "clock": "CLOCK",
    "random": "random",
    "static-oracle": "static (oracle)",
    "static-prefix": "static (first 10%)",
    "static-first": "static (first come)",
    "min": "MIN (clairvoyant)",
    "infinite": "infinite",
}
COLORS = {
    "lru": "#1f77b4",
    "clock": "#ff7f0e",
    "random": "#2ca02c",
    "static-oracle": "#9467bd",
    "static-prefix": "#9467bd",
    "static-first": "#9467bd",
    "min": "#000000",
    "infinite": "#7f7f7f",
}
STYLES = {"static-prefix": "--", "static-first": ":", "min": "-.", "infinite": "--"}


# -- the real crawl ------------------------------------------------------------------------------


class RecordingDupeFilter(SeenCacheDupeFilter):
    """``SeenCacheDupeFilter`` that logs every test: key (hex), referer (or ``-``), host.

    Loaded inside the crawl's process from this file (``benchmarks/`` is on its
    ``PYTHONPATH``); the trace file is the ``URL_CACHE_STUDY_TRACE`` setting.
    """

    trace: Any = None

    @classmethod
    def from_crawler(cls, crawler: Any) -> RecordingDupeFilter:
        df = super().from_crawler(crawler)
        df.trace = open(crawler.settings[TRACE_SETTING], "w", encoding="utf-8")
        return df

    def request_seen(self, request: Any) -> bool:
        if not request.dont_filter:
            # self.fingerprinter is crawler.request_fingerprinter (Scrapy's: SHA1 digests).
            key = self.fingerprinter.fingerprint(request)[:16]
            referer = request.headers.get(b"Referer")
            referer = referer.decode() if referer else "-"
            self.trace.write(f"{key.hex()}\t{referer}\t{urlsplit(request.url).hostname}\n")
        return super().request_seen(request)

    def close(self, reason: str) -> None:
        if self.trace is not None:
            self.trace.close()
            self.trace = None
        return super().close(reason)


def record_real_trace(params: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """Crawl the test web once, recording the trace; return it with the crawl's facts."""
    from scrapy_twolevel.testweb import generate_web
    from scrapy_twolevel.testweb.spider import CrawlResult

    web = generate_web(
        params["n_hosts"],
        params["pages_per_host"],
        seed=params["seed"],
        links_per_page=params["links_per_page"],
        same_host_links=params["same_host_links"],
    )
    web_file, out, trace_file = tmp / "web.json", tmp / "result.json", tmp / "trace.tsv"
    web_file.write_text(web.to_json())
    settings = {**CRAWL_SETTINGS, TRACE_SETTING: str(trace_file)}
    t0 = time.monotonic()
    proc = crawl_test_web(web_file, out, settings, CRAWL_TIMEOUT)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"the crawl failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    result = CrawlResult.from_dict(json.loads(out.read_text()))
    keys: list[bytes] = []
    referers: list[str] = []
    targets: list[str] = []
    with trace_file.open(encoding="utf-8") as f:
        for line in f:
            key, referer, target = line.rstrip("\n").split("\t")
            keys.append(bytes.fromhex(key))
            referers.append(referer)
            targets.append(target)
    stats = result.crawl_stats
    return {
        "keys": keys,
        "referers": referers,
        "targets": targets,
        "wall_s": round(wall, 1),
        "pages_fetched": len(result.server.fetch_counts()),
        "crawl_stats": {
            k: v
            for k, v in stats.items()
            if k.startswith("twolevel/seen/")
            or k in ("elapsed_time_seconds", "downloader/response_count", "dupefilter/filtered")
        },
    }


def real_facts(rec: dict[str, Any]) -> dict[str, Any]:
    """Trace length, distinct keys, duplicate shares and locality of the recorded crawl."""
    keys, referers = rec["keys"], rec["referers"]
    by_page: dict[str, list[bytes]] = collections.defaultdict(list)
    for key, referer in zip(keys, referers, strict=True):
        if referer != "-":
            by_page[referer].append(key)
    links = sum(len(v) for v in by_page.values())
    distinct_in_page = sum(len(set(v)) for v in by_page.values())
    hosts = [urlsplit(r).hostname if r != "-" else None for r in referers]
    same = sum(1 for h, t in zip(hosts, rec["targets"], strict=True) if h is not None and h == t)
    return {
        **trace_facts(keys),
        "seed_tests": sum(1 for r in referers if r == "-"),
        "pages_with_links": len(by_page),
        "links_per_page": round(links / max(1, len(by_page)), 2),
        "within_page_duplicate_share": round(1 - distinct_in_page / max(1, links), 4),
        "same_host_link_share": round(same / max(1, links), 4),
        "source_hosts_per_1000_tests": window_hosts(hosts),
        "pages_fetched": rec["pages_fetched"],
        "crawl_wall_s": rec["wall_s"],
        "crawl_stats": rec["crawl_stats"],
    }


def trace_facts(keys: Sequence[Hashable]) -> dict[str, Any]:
    distinct = len(set(keys))
    return {
        "tests": len(keys),
        "distinct": distinct,
        "duplicate_share": round(1 - distinct / max(1, len(keys)), 4),
    }


def window_hosts(hosts: Sequence[Any], width: int = 1000) -> float:
    """Median number of distinct source hosts in consecutive windows of ``width`` tests."""
    counts = sorted(
        len({h for h in hosts[i : i + width] if h is not None})
        for i in range(0, len(hosts) - width + 1, width)
    )
    return float(counts[len(counts) // 2]) if counts else float("nan")


# -- the synthetic trace -------------------------------------------------------------------------


def _power_law_ranks(rng: Any, sizes: Any, exponent: float) -> Any:
    """Ranks in ``0..size-1`` with P(k) ~ (k + 1) ** -exponent: the inverse CDF of a power
    law bounded to [1, size + 1), floored (a continuous stand-in for a discrete Zipf law)."""
    import numpy as np

    u = rng.random(len(sizes))
    s = sizes.astype(float)
    if abs(exponent - 1) < 1e-9:
        x = np.exp(u * np.log(s + 1))
    else:
        x = (u * ((s + 1) ** (1 - exponent) - 1) + 1) ** (1 / (1 - exponent))
    return np.minimum(np.floor(x).astype(np.int64) - 1, sizes - 1)


def synthetic_trace(p: dict[str, Any]) -> dict[str, Any]:
    """A crawl's seen-tests: pages fetched host by host, 16 hosts interleaved, links per page.

    1. Host sizes: ``floor(min * (1 - u) ** (-1 / alpha))``, capped; popularity ~ size.
    2. Host order: a popularity-weighted random permutation (popular hosts are found
       first), by Efraimidis-Spirakis keys ``log(u) / weight``.
    3. Fetches: ``open_hosts`` hosts are open; each fetch takes the next page (by
       popularity rank, home page first) of one open host chosen uniformly at random; a host
       leaves when it has had ``min(size, host_budget)`` pages, and the next host in the
       order takes its slot.
    4. Links of each fetched page, in order: ``1 + Poisson(mean_links - 1)`` of them; each
       stays on the host with probability ``same_host`` (target rank ~ power law
       ``same_host_exponent``), else goes to a host drawn by popularity (rank ~ power law
       ``cross_host_exponent``). A key is a page's global id.
    """
    import numpy as np

    rng = np.random.default_rng(p["seed"])
    n = p["n_hosts"]
    u = rng.random(n)
    sizes = np.minimum(
        (p["host_size_min"] * (1 - u) ** (-1 / p["host_size_alpha"])).astype(np.int64),
        p["host_size_max"],
    )
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    weight = sizes / sizes.sum()
    order = np.argsort(-(np.log(rng.random(n)) / weight)).tolist()
    budget = np.minimum(sizes, p["host_budget"]).tolist()
    pick = random.Random(p["seed"])
    page_host: list[int] = []
    page_rank: list[int] = []
    slots: list[list[int]] = []
    hosts_iter = iter(order)
    while len(page_host) < p["pages"]:
        while len(slots) < p["open_hosts"]:
            slots.append([next(hosts_iter), 0])
        i = pick.randrange(len(slots))
        host, rank = slots[i]
        page_host.append(host)
        page_rank.append(rank)
        if rank + 1 >= budget[host]:
            slots[i] = slots[-1]
            slots.pop()
        else:
            slots[i][1] = rank + 1
    ph = np.array(page_host, dtype=np.int64)
    n_links = 1 + rng.poisson(p["mean_links"] - 1, len(ph))
    source = np.repeat(ph, n_links)
    same = rng.random(len(source)) < p["same_host"]
    other = rng.choice(n, size=len(source), p=weight)
    target = np.where(same, source, other)
    ranks = np.where(
        same,
        _power_law_ranks(rng, sizes[target], p["same_host_exponent"]),
        _power_law_ranks(rng, sizes[target], p["cross_host_exponent"]),
    )
    keys = offsets[target] + ranks
    page_of = np.repeat(np.arange(len(ph)), n_links)
    pairs = np.unique(page_of * int(sizes.sum()) + keys).size
    distinct = int(np.unique(keys).size)
    facts = {
        "tests": len(keys),
        "distinct": distinct,
        "duplicate_share": round(1 - distinct / len(keys), 4),
        "pages_with_links": len(ph),
        "links_per_page": round(len(keys) / len(ph), 2),
        "within_page_duplicate_share": round(1 - pairs / len(keys), 4),
        "same_host_link_share": round(float(same.mean()), 4),
        "source_hosts_per_1000_tests": window_hosts(source.tolist()),
        "hosts_crawled": len(set(page_host)),
        "page_universe": int(sizes.sum()),
        "largest_host_pages": int(sizes.max()),
    }
    return {"keys": keys.tolist(), "facts": facts}


# -- simulation ----------------------------------------------------------------------------------


def popular_keys(keys: Sequence[Hashable], n: int) -> list[Hashable]:
    """The ``n`` most frequent keys, ties broken by first occurrence."""
    return [k for k, _ in collections.Counter(keys).most_common(n)]


def simulate_preloaded(cache: SeenCache, keys: Sequence[Hashable]) -> int:
    """Hits of a cache loaded before the trace: a key's first test is a miss all the same.

    A new URL must be reported new, so a preloaded key only answers "seen" once it was
    seen; without this, a static cache would beat the infinite one.
    """
    seen: set[Hashable] = set()
    hits = 0
    lookup, insert = cache.lookup, cache.insert
    for key in keys:
        if lookup(key):
            if key in seen:
                hits += 1
            else:
                seen.add(key)
        else:
            insert(key)
            seen.add(key)
    return hits


def curves(keys: Sequence[Hashable], sizes: Sequence[int], log: Callable[[str], None]) -> dict:
    """Hits of every policy at every size: ``{policy: {size: hits}}``."""
    out: dict[str, dict[int, int]] = {p: {} for p in POLICIES}
    prefix = keys[: max(1, int(len(keys) * STATIC_PREFIX))]
    ranked_all = popular_keys(keys, max(sizes))
    ranked_prefix = popular_keys(prefix, max(sizes))
    inf = infinite_hits(keys)
    distinct = len(set(keys))
    for size in sizes:
        t0 = time.monotonic()
        out["lru"][size] = simulate(LRUCache(size), keys)
        out["clock"][size] = simulate(ClockCache(size), keys)
        out["random"][size] = simulate(RandomCache(size, random.Random(0)), keys)
        out["static-oracle"][size] = simulate_preloaded(StaticCache(size, ranked_all), keys)
        out["static-prefix"][size] = simulate_preloaded(StaticCache(size, ranked_prefix), keys)
        out["static-first"][size] = simulate(make_cache("static", size), keys)
        # With room for every key, MIN never evicts: it is the infinite cache.
        out["min"][size] = inf if size >= distinct else belady_hits(keys, size)
        out["infinite"][size] = inf
        log(
            f"  2^{size.bit_length() - 1:<2} "
            + " ".join(f"{p} {out[p][size] / len(keys):.3f}" for p in POLICIES[:-1])
            + f"  ({time.monotonic() - t0:.1f} s)"
        )
    return out


def critical_points(rates: dict[int, float], infinite: float) -> dict[str, Any]:
    """Where one hit-rate curve stops paying (see the module docstring); None: not reached."""
    sizes = sorted(rates)
    gains = {s: rates[2 * s] - rates[s] for s in sizes if 2 * s in rates}
    steepest = max(gains, key=gains.__getitem__) if gains else None

    def first_size_after_which(limit: float) -> int | None:
        for s in gains:
            if all(g < limit for t, g in gains.items() if t >= s):
                return s
        return None

    critical = first_size_after_which(CRITICAL_SHARE * gains[steepest]) if steepest else None
    near = next((s for s in sizes if rates[s] >= infinite - NEAR_INFINITE), None)
    return {
        "critical": critical,
        "flat_from": first_size_after_which(FLAT_GAIN),
        "near_infinite": near,
        "steepest_doubling_from": steepest,
        "steepest_gain": round(gains[steepest], 4) if steepest else None,
        "gain_per_doubling": {str(s): round(g, 4) for s, g in gains.items()},
    }


# -- cost ----------------------------------------------------------------------------------------


class _NoopCache(SeenCache):
    """Never holds anything: what ``simulate()``'s loop and two method calls cost."""

    def lookup(self, key: Hashable) -> bool:
        return False

    def insert(self, key: Hashable) -> None:
        return None

    def __len__(self) -> int:
        return 0


def timing_keys(keys: Sequence[int], n: int) -> list[bytes]:
    """The first ``n`` tests with each key replaced by a 16-byte BLAKE2b digest of it."""
    digest = {k: blake2b(str(k).encode(), digest_size=16).digest() for k in set(keys[:n])}
    return [digest[k] for k in keys[:n]]


def cost_per_test(keys: list[bytes], capacity: int, repeats: int) -> dict[str, Any]:
    """Best-of-``repeats`` microseconds per test of each practical policy (and a no-op)."""
    makers: dict[str, Callable[[], SeenCache]] = {
        "lru": lambda: LRUCache(capacity),
        "clock": lambda: ClockCache(capacity),
        "random": lambda: RandomCache(capacity, random.Random(0)),
        "static-first": lambda: make_cache("static", capacity),
        "noop": lambda: _NoopCache(capacity),
    }
    runs: dict[str, list[float]] = {name: [] for name in makers}
    hits: dict[str, int] = {}
    load = os.getloadavg()[0]
    for r in range(repeats):
        names = list(makers) if r % 2 == 0 else list(reversed(makers))
        for name in names:
            cache = makers[name]()
            gc.collect()
            t0 = time.process_time()
            hits[name] = simulate(cache, keys)
            runs[name].append(time.process_time() - t0)
    best = {name: min(times) for name, times in runs.items()}
    return {
        name: {
            "us_per_test": round(1e6 * best[name] / len(keys), 3),
            "us_per_test_median": round(1e6 * statistics.median(runs[name]) / len(keys), 3),
            "us_per_test_net_of_noop": round(1e6 * (best[name] - best["noop"]) / len(keys), 3),
            "us_per_test_runs": [round(1e6 * t / len(keys), 3) for t in runs[name]],
            "hit_rate": round(hits[name] / len(keys), 4),
            "load_average_1min_before": round(load, 2),
        }
        for name in makers
    }


def memory_per_entry(capacity: int) -> dict[str, Any]:
    """``tracemalloc`` bytes per entry of each practical policy, keys excluded (see docstring)."""
    keys = [blake2b(i.to_bytes(8, "big"), digest_size=16).digest() for i in range(3 * capacity)]
    makers: dict[str, Callable[[], SeenCache]] = {
        "lru": lambda: LRUCache(capacity),
        "clock": lambda: ClockCache(capacity),
        "random": lambda: RandomCache(capacity, random.Random(0)),
        "static-first": lambda: make_cache("static", capacity),
    }
    out = {}
    for name, make in makers.items():
        gc.collect()
        tracemalloc.start()
        cache = make()
        simulate(cache, keys[:capacity])
        filled = tracemalloc.get_traced_memory()[0]
        simulate(cache, keys[capacity : 3 * capacity])  # churn: 2 capacities of new keys
        churned = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        assert len(cache) == capacity
        out[name] = {
            "bytes_per_entry_filled": round(filled / capacity, 1),
            "bytes_per_entry_after_churn": round(churned / capacity, 1),
        }
        del cache
    key_bytes = sys.getsizeof(keys[0])
    for v in out.values():
        v["bytes_per_entry"] = max(v["bytes_per_entry_filled"], v["bytes_per_entry_after_churn"])
        v["with_key_object"] = round(v["bytes_per_entry"] + key_bytes, 1)
    return {"capacity": capacity, "key_object_bytes": key_bytes, "policies": out}


def clock_worst_insert_ms(capacity: int, repeats: int = 5) -> float:
    """CLOCK's slowest insert: every bit set, so the hand sweeps the whole cache once."""
    keys = [blake2b(i.to_bytes(8, "big"), digest_size=16).digest() for i in range(capacity + 1)]
    times = []
    for _ in range(repeats):
        cache = ClockCache(capacity)
        simulate(cache, keys[:capacity])
        simulate(cache, keys[:capacity])  # all hits: every bit set
        t0 = time.perf_counter()
        cache.insert(keys[capacity])
        times.append(time.perf_counter() - t0)
    return round(1e3 * statistics.median(times), 2)


def context_costs(tmp: Path, capacity: int, n: int = 20_000) -> dict[str, Any]:
    """Scrapy's fingerprint of a fresh request, CLOCK's worst insert, and a hit in the SQLite
    seen store (OS cache warm)."""
    out: dict[str, Any] = {}
    from scrapy import Request
    from scrapy.utils.request import RequestFingerprinter

    fingerprinter = RequestFingerprinter()
    requests = [Request(f"http://h{i % 97}.example.com/p/{i}") for i in range(n)]
    t0 = time.process_time()
    for request in requests:
        fingerprinter.fingerprint(request)
    out["fingerprint_us"] = round(1e6 * (time.process_time() - t0) / n, 2)
    out["clock_worst_insert_ms"] = clock_worst_insert_ms(capacity)
    try:
        from scrapy_twolevel.storage.sqlite import SqliteStore

        store = SqliteStore(tmp / "seen.sqlite3")
        seen = store.seen_store({"format": "url_cache_study"})
        keys = [blake2b(i.to_bytes(8, "big"), digest_size=16).digest() for i in range(10 * n)]
        for key in keys:
            seen.add(key)
        store.commit()
        probe = random.Random(0).sample(keys, n)
        t0 = time.perf_counter()
        found = sum(1 for key in probe if key in seen)
        out["sqlite_hit_us"] = round(1e6 * (time.perf_counter() - t0) / n, 2)
        out["sqlite_keys"] = len(keys)
        store.close()
        assert found == n
    except Exception as exc:  # the store is being changed by others; report, do not fail
        out["sqlite_hit_us"] = None
        out["sqlite_error"] = repr(exc)
    return out


# -- report --------------------------------------------------------------------------------------


def _exp(size: int) -> str:
    return f"2^{size.bit_length() - 1}"


def rates_of(trace: dict[str, Any]) -> dict[str, dict[int, float]]:
    tests = trace["facts"]["tests"]
    return {p: {s: h / tests for s, h in by_size.items()} for p, by_size in trace["hits"].items()}


def hit_table(trace: dict[str, Any], sizes: Sequence[int]) -> reporting.Table:
    rates = rates_of(trace)
    head = ["policy", *[_exp(s) for s in sizes]]
    rows = [[LABELS[p], *[f"{100 * rates[p][s]:.1f}" for s in sizes]] for p in POLICIES]
    return head, rows


def facts_table(real: dict[str, Any], synth: dict[str, Any]) -> reporting.Table:
    rf, sf = real["facts"], synth["facts"]
    rows = [
        ["tests (requests the spider yielded)", f"{rf['tests']:,}", f"{sf['tests']:,}"],
        ["distinct keys", f"{rf['distinct']:,}", f"{sf['distinct']:,}"],
        [
            "duplicate share (1 - distinct / tests) = infinite cache's hit rate",
            f"{rf['duplicate_share']:.3f}",
            f"{sf['duplicate_share']:.3f}",
        ],
        [
            "duplicate links within a page",
            f"{rf['within_page_duplicate_share']:.3f}",
            f"{sf['within_page_duplicate_share']:.3f}",
        ],
        ["links per page", f"{rf['links_per_page']}", f"{sf['links_per_page']}"],
        [
            "pages whose links were tested",
            f"{rf['pages_with_links']:,}",
            f"{sf['pages_with_links']:,}",
        ],
        [
            "same-host links",
            f"{rf['same_host_link_share']:.3f}",
            f"{sf['same_host_link_share']:.3f}",
        ],
        [
            "source hosts per 1,000 consecutive tests (median)",
            f"{rf['source_hosts_per_1000_tests']:g}",
            f"{sf['source_hosts_per_1000_tests']:g}",
        ],
    ]
    return ["", "real crawl", "synthetic"], rows


def _size(size: int | None) -> str:
    return _exp(size) if size else "not reached"


def critical_table(traces: dict[str, dict[str, Any]]) -> reporting.Table:
    head = report.columns(
        "trace | policy | critical point | hit rate there | flat from | "
        "within 2 points of infinite from | steepest doubling | infinite"
    )
    rows = []
    for name, trace in traces.items():
        rates = rates_of(trace)
        for policy in ("lru", "clock"):
            cp = trace["critical"][policy]
            step = cp["steepest_doubling_from"]
            rows.append(
                [
                    name,
                    LABELS[policy],
                    _size(cp["critical"]),
                    f"{100 * rates[policy][cp['critical']]:.1f}" if cp["critical"] else "-",
                    _size(cp["flat_from"]),
                    _size(cp["near_infinite"]),
                    f"{_exp(step)} to {_exp(2 * step)}: +{100 * cp['steepest_gain']:.1f}"
                    if step
                    else "-",
                    f"{100 * trace['facts']['duplicate_share']:.1f}",
                ]
            )
    return head, rows


def modelled_cost(
    trace: dict[str, Any], cost: dict[str, Any], context: dict[str, Any], size: int
) -> dict[str, float] | None:
    """µs per test of each practical policy at ``size``, counting the store lookups of the
    repeated keys it misses (infinite - hit rate) at the SQLite hit cost; None unmeasured."""
    store = context.get("sqlite_hit_us")
    if not store:
        return None
    rates = rates_of(trace)
    inf = trace["facts"]["duplicate_share"]
    return {
        p: round(cost[p]["us_per_test_median"] + (inf - rates[p][size]) * store, 3)
        for p in PRACTICAL
    }


def cost_table(
    cost: dict[str, Any], memory: dict[str, Any], model: dict[str, float] | None, size: int
) -> reporting.Table:
    head = report.columns(
        "policy | µs per test (best) | µs per test (median) | µs net of the loop | "
        f"hit rate in the timing run | µs per test with store lookups, {_exp(size)} | "
        "B per entry (structures) | B per entry with the key object"
    )
    rows = []
    for p in PRACTICAL:
        c, m = cost[p], memory["policies"][p]
        rows.append(
            [
                LABELS[p],
                f"{c['us_per_test']:.3f}",
                f"{c['us_per_test_median']:.3f}",
                f"{c['us_per_test_net_of_noop']:.3f}",
                f"{100 * c['hit_rate']:.1f}",
                f"{model[p]:.2f}" if model else "-",
                f"{m['bytes_per_entry']:.0f}",
                f"{m['with_key_object']:.0f}",
            ]
        )
    noop = cost["noop"]
    rows.append(
        [
            "no-op cache (loop and calls)",
            f"{noop['us_per_test']:.3f}",
            f"{noop['us_per_test_median']:.3f}",
            "0",
            "0",
            "-",
            "-",
            "-",
        ]
    )
    return head, rows


def sensitivity_table(sens: dict[str, Any], sizes: Sequence[int]) -> reporting.Table:
    head = [
        "open hosts",
        "tests",
        "infinite",
        *[_exp(s) for s in sizes],
        "critical point",
        "flat from",
        "within 2 points",
    ]
    rows = []
    for k, s in sens.items():
        rates = {int(size): v["hit_rate"] for size, v in s["lru"].items()}
        cp = s["critical"]
        rows.append(
            [
                str(k),
                f"{s['facts']['tests']:,}",
                f"{100 * s['facts']['duplicate_share']:.1f}",
                *[f"{100 * rates[size]:.1f}" for size in sizes],
                _size(cp["critical"]),
                _size(cp["flat_from"]),
                _size(cp["near_infinite"]),
            ]
        )
    return head, rows


def plot(trace: dict[str, Any], title: str, path: Path, marks: dict[str, int]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = rates_of(trace)
    sizes = sorted(rates["lru"])
    fig, ax = plt.subplots(figsize=(9, 5.5))
    for p in POLICIES:
        ax.plot(
            sizes,
            [100 * rates[p][s] for s in sizes],
            color=COLORS[p],
            linestyle=STYLES.get(p, "-"),
            marker="" if p == "infinite" else "o",
            markersize=3,
            label=LABELS[p],
        )
    for label, size in marks.items():
        ax.axvline(size, color="#bbbbbb", linewidth=0.9, zorder=0)
        ax.annotate(label, (size, 2), rotation=90, fontsize=8, color="#666666", ha="right")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels([f"$2^{{{s.bit_length() - 1}}}$" for s in sizes], fontsize=8)
    ax.set_ylim(0, 100)
    ax.set_xlabel("cache size (entries)")
    ax.set_ylabel("hit rate (% of seen-tests)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    report.save_figure(fig, path)


def recommend(
    traces: dict[str, dict[str, Any]],
    cost: dict[str, Any],
    memory: dict[str, Any],
    context: dict[str, Any],
    sens: dict[str, Any],
) -> dict[str, Any]:
    """The default, by a rule written into the report.

    Size: the largest LRU critical point over every trace (the real crawl, the synthetic
    trace, and the sensitivity traces with 4 to 256 open hosts), so the default is past the
    steep part of the curve for all of them. Policy: the practical policies within half a
    point of the best practical hit rate at that size on both traces are the candidates; the
    one with the lowest median CPU per test wins if every other candidate costs at least
    ``CPU_TIE`` more, else the cheapest in RAM of those within ``CPU_TIE`` of it.
    """
    points = {name: t["critical"]["lru"]["critical"] for name, t in traces.items()}
    points |= {f"synthetic, {k} open hosts": s["critical"]["critical"] for k, s in sens.items()}
    size = max(v for v in points.values() if v)
    candidates = [
        p
        for p in PRACTICAL
        if all(
            rates_of(t)[p][size] >= max(rates_of(t)[q][size] for q in PRACTICAL) - 0.005
            for t in traces.values()
        )
    ]
    median = {p: cost[p]["us_per_test_median"] for p in candidates}
    cheapest = min(candidates, key=median.__getitem__)
    tied = [p for p in candidates if median[p] < (1 + CPU_TIE) * median[cheapest]]
    policy = min(tied, key=lambda p: memory["policies"][p]["bytes_per_entry"])
    model = modelled_cost(traces["synthetic"], cost, context, size)
    return {
        "policy": policy,
        "size": size,
        "ram_mb": round(size * memory["policies"][policy]["with_key_object"] / 2**20, 1),
        "critical_points_lru": {k: v for k, v in points.items()},
        "modelled_us_per_test": model,
        "candidates": candidates,
        "tied_on_cpu": tied,
        "hit_rates_at_size": {
            name: {p: round(rates_of(t)[p][size], 4) for p in POLICIES}
            for name, t in traces.items()
        },
    }


# -- main ----------------------------------------------------------------------------------------


def main() -> int:
    parser = report.arg_parser(__doc__, quick="small web and trace; writes nothing")
    args = parser.parse_args()
    quick = args.quick
    real_params = REAL_QUICK if quick else REAL
    synth_params = SYNTH_QUICK if quick else SYNTH
    sens_params = SENSITIVITY_QUICK if quick else SENSITIVITY
    sizes = SIZES_QUICK if quick else SIZES
    timing = TIMING_QUICK if quick else TIMING
    clock = report.Clock("[{:6.0f} s] {}")
    log = clock.log
    traces: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        log(f"real crawl of generate_web({real_params}) ...")
        rec = record_real_trace(real_params, tmp)
        facts = real_facts(rec)
        log(f"real trace: {json.dumps({k: v for k, v in facts.items() if k != 'crawl_stats'})}")
        real_keys = rec["keys"]
        hits = curves(real_keys, sizes, log)
        traces["real"] = {"facts": facts, "params": real_params, "hits": hits}
        default_size = DEFAULTS["TWOLEVEL_SEEN_CACHE_SIZE"]
        # The crawl's own cache (LRU at the default size) must agree with the replay.
        check = simulate(LRUCache(default_size), real_keys)
        crawl_hits = facts["crawl_stats"].get("twolevel/seen/cache_hits")
        facts["replay_check"] = {
            "lru_default_size_hits_replayed": check,
            "crawl_cache_hits": crawl_hits,
            "crawl_tests": facts["crawl_stats"].get("twolevel/seen/tests"),
            "match": check == crawl_hits
            and facts["crawl_stats"].get("twolevel/seen/tests") == len(real_keys),
        }
        log(f"replay check: {facts['replay_check']}")
        del rec

        log(f"synthetic trace {synth_params} ...")
        synth = synthetic_trace(synth_params)
        log(f"synthetic trace: {json.dumps(synth['facts'])}")
        synth_keys = synth["keys"]
        hits = curves(synth_keys, sizes, log)
        traces["synthetic"] = {"facts": synth["facts"], "params": synth_params, "hits": hits}

        for trace in traces.values():
            rates = rates_of(trace)
            inf = trace["facts"]["duplicate_share"]
            trace["critical"] = {p: critical_points(rates[p], inf) for p in ("lru", "clock")}

        log(f"cost per test at {timing['capacity']} entries ...")
        tkeys = timing_keys(synth_keys, timing["tests"])
        del synth_keys, synth
        cost = cost_per_test(tkeys, timing["capacity"], timing["repeats"])
        del tkeys
        log(f"cost: {json.dumps(cost)}")
        memory = memory_per_entry(timing["capacity"])
        log(f"memory: {json.dumps(memory)}")
        context = context_costs(tmp, timing["capacity"])
        log(f"context: {json.dumps(context)}")

        sens: dict[str, Any] = {}
        for k in sens_params["open_hosts"]:
            params = {**synth_params, "open_hosts": k, "pages": sens_params["pages"]}
            t = synthetic_trace(params)
            n = len(t["keys"])
            lru = {s: simulate(LRUCache(s), t["keys"]) for s in sizes}
            rates = {s: h / n for s, h in lru.items()}
            sens[str(k)] = {
                "facts": t["facts"],
                "lru": {
                    str(s): {"hits": h, "tests": n, "hit_rate": round(h / n, 4)}
                    for s, h in lru.items()
                },
                "critical": critical_points(rates, t["facts"]["duplicate_share"]),
            }
            log(
                f"sensitivity, {k} open hosts: "
                + " ".join(f"{_exp(s)} {r:.3f}" for s, r in rates.items())
            )

    run_time = clock.elapsed()
    rec_default = recommend(traces, cost, memory, context, sens)
    for name, trace in traces.items():
        print(f"## {name}\n")
        print(reporting.markdown(hit_table(trace, [s for s in TABLE_SIZES if s in sizes])))
    print(reporting.markdown(critical_table(traces)))
    model = rec_default["modelled_us_per_test"]
    print(reporting.markdown(cost_table(cost, memory, model, rec_default["size"])))
    print(f"recommended: {rec_default}")
    if quick:
        print(f"--quick: nothing written ({run_time:.0f} s)")
        return 0
    measured = {"traces": traces, "cost": cost, "memory": memory, "context": context, "sens": sens}
    write_outputs(measured, rec_default, sizes, run_time)
    return 0


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


#: What :func:`recommend` weighs, as :func:`findings` and :func:`write_outputs` take it.
MEASURED = ("traces", "cost", "memory", "context", "sens")


def findings(measured: dict[str, Any], rec: dict[str, Any]) -> list[str]:
    """What the numbers show, in sentences generated from them."""
    traces, cost, memory, context, sens = (measured[k] for k in MEASURED)
    out = []
    size = rec["size"]
    for name, trace in traces.items():
        rates = rates_of(trace)
        cp = trace["critical"]["lru"]
        step = cp["steepest_doubling_from"]
        facts = trace["facts"]
        inf = facts["duplicate_share"]
        crit = cp["critical"]
        text = (
            f"{name.capitalize()} trace: the infinite cache answers {_pct(inf)} of the tests. "
            f"LRU's steepest doubling is {_exp(step)} to {_exp(2 * step)} "
            f"(+{100 * cp['steepest_gain']:.1f} points); its critical point is "
            f"{_size(crit)}"
            + (f" ({_pct(rates['lru'][crit])})" if crit else "")
            + f"; it is within 2 points of the infinite cache from {_size(cp['near_infinite'])} "
            + "and flat (< 1 point per doubling) "
            + (f"from {_exp(cp['flat_from'])}. " if cp["flat_from"] else "nowhere simulated. ")
        )
        if cp["steepest_gain"] >= 0.15:
            hosts = facts["source_hosts_per_1000_tests"]
            pages = trace["params"].get("pages_per_host")
            text += (
                "The cliff is the working set of the hosts crawled at once: about "
                f"{hosts:g} hosts (measured per 1,000 tests) x {pages} pages = "
                f"{hosts * pages:,.0f} keys; below it LRU thrashes. "
                if pages
                else ""
            )
        else:
            text += (
                "There is no cliff: the gain per doubling falls slowly, and the curve only "
                f"flattens as the cache nears the trace's {facts['distinct']:,} distinct keys. "
            )
        gaps = {
            p: max(abs(rates["lru"][s] - rates[p][s]) for s in rates["lru"])
            for p in ("clock", "random")
        }
        text += (
            f"CLOCK stays within {100 * gaps['clock']:.1f} points of LRU at every size, random "
            f"replacement within {100 * gaps['random']:.1f}. At {_exp(size)}: "
            + ", ".join(f"{LABELS[p]} {_pct(rates[p][size])}" for p in POLICIES[:-1])
            + "."
        )
        out.append(text)
    synth = rates_of(traces["synthetic"])
    behind = [s for s in synth["lru"] if synth["static-oracle"][s] < synth["lru"][s] - 0.005]
    if behind:
        out.append(
            "Even the oracle static cache trails LRU on the synthetic trace up to "
            f"{_exp(max(behind))} ({_pct(synth['static-oracle'][max(behind)])} vs "
            f"{_pct(synth['lru'][max(behind)])}): its popularity is local in time (a host's "
            "navigation pages are hot while the host is crawled, then cold), and a crawl of "
            "many hosts has little lasting, global popularity to preload. The library's "
            "static cache (first come) is far behind at every size short of the whole trace."
        )
    crits = ", ".join(
        f"{k} open hosts {_size(s['critical']['critical'])} "
        f"({_pct(s['lru'][str(size)]['hit_rate'])} at {_exp(size)}, infinite "
        f"{_pct(s['facts']['duplicate_share'])})"
        for k, s in sens.items()
    )
    out.append(
        f"More hosts open at once move the critical point up (LRU, {SENSITIVITY['pages']:,}-"
        f"page synthetic traces): {crits}."
    )
    by_cost = sorted(PRACTICAL, key=lambda p: cost[p]["us_per_test_median"])
    text = (
        f"Cost at {memory['capacity']:,} entries, CPU per test (median of {TIMING['repeats']}): "
        + ", ".join(f"{LABELS[p]} {cost[p]['us_per_test_median']:.2f} µs" for p in by_cost)
        + "; RAM per entry with its 16-byte key: "
        + ", ".join(
            f"{LABELS[p]} {memory['policies'][p]['with_key_object']:.0f} B" for p in PRACTICAL
        )
        + f". For scale, Scrapy's fingerprint of a fresh request costs "
        f"{context['fingerprint_us']:.1f} µs"
    )
    if context.get("sqlite_hit_us"):
        text += (
            f", and each repeated key the cache misses costs a SQLite seen-store lookup "
            f"({context['sqlite_hit_us']:.1f} µs with the file in the OS cache, far more when "
            "the store outgrows RAM), so a point of hit rate is worth "
            f"{context['sqlite_hit_us'] / 100:.2f} µs per test at least."
        )
    else:
        text += "."
    out.append(text)
    text = (
        f"Recommended default: {LABELS[rec['policy']]}, {size:,} entries ({_exp(size)}, about "
        f"{rec['ram_mb']} MB with the keys). Rule: the size is the largest LRU critical point "
        "over all traces (the real crawl, the synthetic trace and the sensitivity traces); "
        "the candidates are the practical policies within half a point of the best hit rate "
        f"at that size on both traces ({', '.join(LABELS[p] for p in rec['candidates'])}); "
        f"the cheapest in median CPU per test wins unless another is within "
        f"{100 * CPU_TIE:g}% of it ("
        + ", ".join(
            f"{LABELS[p]} {cost[p]['us_per_test_median']:.2f} µs" for p in rec["candidates"]
        )
        + "), and a tie goes to the fewest bytes per entry."
    )
    out.append(text)
    return out


def params_table(p: dict[str, Any]) -> reporting.Table:
    why = {
        "n_hosts": "hosts in the web (most never reached by the trace)",
        "host_size_alpha": "site sizes: discrete Pareto tail exponent (many small sites, "
        "a few huge)",
        "host_size_min": "smallest site, pages",
        "host_size_max": "largest site, pages",
        "pages": "pages fetched (each emits its links as tests): ~20 x this many tests",
        "open_hosts": "hosts interleaved at once: TWOLEVEL_MAX_OPEN_HOSTS defaults to "
        "CONCURRENT_REQUESTS = 16",
        "host_budget": "pages fetched per host visit, most popular first (home page first)",
        "mean_links": "links per page: 1 + Poisson(mean - 1)",
        "same_host": "share of links to the page's own host (links cluster by host)",
        "same_host_exponent": "same-host target rank k ~ (k + 1)^-a: home and navigation "
        "pages linked from most pages; a = 1.4 gives ~30% duplicate links within a page",
        "cross_host_exponent": "cross-host target: host by popularity (~ size), then rank with "
        "this exponent: mostly home pages",
        "seed": "numpy and random seeds",
    }
    return ["parameter", "value", "meaning and why"], [[k, f"{v}", why[k]] for k, v in p.items()]


def write_outputs(
    measured: dict[str, Any], rec: dict[str, Any], sizes: Sequence[int], run_time: float
) -> None:
    import scrapy

    traces, cost, memory, context, sens = (measured[k] for k in MEASURED)
    command = report.command_line(__file__, sys.argv[1:])
    env = {**reporting.environment(), "scrapy": scrapy.__version__}
    definitions = {
        "test": "one request_seen call: one link the spider yielded (or a seed), duplicates "
        "included",
        "hit rate": "hits / tests; every miss inserts the key (simulate())",
        "infinite": "a cache that never evicts: every repeated key is a hit (= duplicate share)",
        "MIN": "Belady's clairvoyant optimum: evict the key used furthest ahead, or do not "
        "cache a key used later than all cached ones",
        "static (oracle)": "preloaded with the most frequent keys of the whole trace (the "
        "study's a-priori popularity), never changed; a key's first test is a miss all the "
        "same (a new URL must be reported new)",
        "static (first 10%)": "preloaded with the most frequent keys of the first 10% of the "
        "trace, never changed; scored over the whole trace",
        "static (first come)": "make_cache('static'): the first keys inserted, never changed",
        "critical point": "the smallest size from which every further doubling gains less "
        f"than {CRITICAL_SHARE:g} of what the curve's steepest doubling gained (the end of "
        "the steep part)",
        "flat from": "the smallest size from which every further doubling gains less than "
        f"{100 * FLAT_GAIN:g} point of hit rate",
        "within 2 points of infinite": "the smallest size whose hit rate is at least the "
        f"infinite cache's minus {100 * NEAR_INFINITE:g} points",
        "µs per test": "process CPU time of simulate() over the timing trace / its tests, "
        f"best and median of {TIMING['repeats']} interleaved runs: a lookup, plus an insert on "
        "a miss, and the loop",
        "µs net of the loop": "minus the same loop over a no-op cache (two method calls)",
        "µs per test with store lookups": "µs per test + (infinite - hit rate) x the SQLite "
        "seen-store hit time: each repeated key the cache misses is looked up in the store "
        "(its Bloom filter says maybe); synthetic trace, OS cache warm, so a lower bound",
        "B per entry": "tracemalloc bytes of the cache's structures / capacity, the larger of "
        "just filled and after replacing two capacities of keys; key objects excluded",
        "with the key object": f"plus sys.getsizeof of a 16-byte bytes key "
        f"({memory['key_object_bytes']} B), held by the cache",
        "source hosts per 1,000 tests": "median, over consecutive windows of 1,000 tests, of "
        "the number of distinct hosts of the pages the links were found on",
    }
    rp = traces["real"]["params"]
    intro = [
        f"Command: ``{command}``; {env['date']}, Python {env['python']}, Scrapy "
        f"{scrapy.__version__}, {env['cpus']} CPUs (shared); the whole run took "
        f"{run_time / 60:.1f} minutes.",
        "Real trace: one crawl of ``generate_web("
        f"{rp['n_hosts']}, {rp['pages_per_host']}, seed={rp['seed']}, "
        f"links_per_page={rp['links_per_page']}, same_host_links={rp['same_host_links']})`` "
        "(default host profiles and delays) with ``TwoLevelScheduler`` and "
        "``HostMetricsMiddleware`` (default policy and CONCURRENT_REQUESTS = 16), recording "
        "every request_seen call's key, the first 16 bytes of the request fingerprint. "
        "Synthetic trace: Zipf-like popularity with host locality (parameters below). "
        "Policies: LRU, CLOCK, random, three static caches, MIN and infinite, over sizes "
        f"{_exp(sizes[0])} to {_exp(sizes[-1])}; every miss inserts.",
    ]
    figures = {"real": "url_cache_real.png", "synthetic": "url_cache_synthetic.png"}
    sections: list[reporting.Section] = [
        (
            "What the numbers show",
            "\n\n".join(findings(measured, rec)),
            [],
        ),
        ("The traces", "", [("", facts_table(traces["real"], traces["synthetic"]))]),
    ]
    for name, title in (("real", "Real crawl of the test web"), ("synthetic", "Synthetic trace")):
        sections.append(
            (
                f"{title}: hit rate (%) by cache size",
                figures[name],
                [("", hit_table(traces[name], sizes))],
            )
        )
    sections += [
        (
            "Critical points",
            "Sizes are powers of two. Critical point: from there on every doubling gains "
            f"less than {CRITICAL_SHARE:g} of the steepest doubling's gain; flat from: less "
            f"than {100 * FLAT_GAIN:g} point. The real web's whole URL set is "
            f"{traces['real']['facts']['distinct']:,} keys, so its curves are flat from "
            f"{_exp(1 << (traces['real']['facts']['distinct'] - 1).bit_length())} on; on a "
            "finite trace, a curve is also flat once the cache nears its distinct keys.",
            [("", critical_table(traces))],
        ),
        (
            "Cost per test and RAM per entry",
            f"{TIMING['capacity']:,} entries; timing trace: the first {TIMING['tests']:,} "
            "tests of the synthetic trace with 16-byte BLAKE2b keys (the dupefilter's key "
            "shape); best and median of "
            f"{TIMING['repeats']} interleaved runs. CPython, one process, on a machine shared "
            f"with other work (1-minute load average {cost['lru']['load_average_1min_before']} "
            f"on {os.cpu_count()} CPUs): absolute figures vary by up to 2x between runs, the "
            "order less. CLOCK's slowest insert (every bit set: one sweep of the whole "
            f"cache) took {context['clock_worst_insert_ms']:.1f} ms; LRU's inserts are O(1). "
            "Scrapy's fingerprint of a fresh request: "
            f"{context['fingerprint_us']:.1f} µs; a hit in the SQLite seen store "
            + (
                f"({context['sqlite_keys']:,} keys, OS cache warm): "
                f"{context['sqlite_hit_us']:.1f} µs."
                if context.get("sqlite_hit_us")
                else f"could not be measured ({context.get('sqlite_error')})."
            ),
            [("", cost_table(cost, memory, rec["modelled_us_per_test"], rec["size"]))],
        ),
        (
            "Sensitivity to the number of open hosts",
            "LRU only, on synthetic traces of "
            f"{SENSITIVITY['pages']:,} pages with the parameters below but the number of "
            "hosts open at once.",
            [("", sensitivity_table(sens, [s for s in sizes if 1 << 10 <= s <= 1 << 18]))],
        ),
        ("Synthetic generator", "", [("", params_table(traces["synthetic"]["params"]))]),
    ]
    md, inc = reporting.render(
        "URL caching: the seen cache's policy and size", intro, sections, definitions
    )
    data = {
        "command": command,
        "environment": env,
        "run_time_s": round(run_time, 1),
        "sizes": list(sizes),
        "definitions": definitions,
        "crawl_settings": CRAWL_SETTINGS,
        "traces": {
            name: {
                "params": trace["params"],
                "facts": trace["facts"],
                "policies": {
                    p: {
                        str(s): {
                            "hits": h,
                            "tests": trace["facts"]["tests"],
                            "hit_rate": round(h / trace["facts"]["tests"], 5),
                        }
                        for s, h in by_size.items()
                    }
                    for p, by_size in trace["hits"].items()
                },
                "critical": trace["critical"],
            }
            for name, trace in traces.items()
        },
        "cost": {"timing": TIMING, "policies": cost},
        "memory": memory,
        "context": context,
        "sensitivity": {"pages": SENSITIVITY["pages"], "open_hosts": sens},
        "recommendation": rec,
        "findings": findings(measured, rec),
    }
    RESULTS_JSON.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    (reporting.RESULTS_DIR / f"{NAME}.md").write_text("\n".join(md), encoding="utf-8")
    reporting.write_docs_fragment(NAME, inc)
    for name, trace in traces.items():
        cp = trace["critical"]["lru"]
        marks = (
            {f"LRU critical point {_exp(cp['critical'])}": cp["critical"]} if cp["critical"] else {}
        )
        default = DEFAULTS["TWOLEVEL_SEEN_CACHE_SIZE"]
        if default != rec["size"]:
            marks[f"current default {_exp(default)}"] = default
        marks[f"recommended {_exp(rec['size'])}"] = rec["size"]
        facts = trace["facts"]
        plot(
            trace,
            f"{'Real crawl of the test web' if name == 'real' else 'Synthetic trace'}: "
            f"{facts['tests']:,} seen-tests, {facts['distinct']:,} distinct keys",
            reporting.DOCS_RESULTS / figures[name],
            marks,
        )
    print(f"Results: {RESULTS_JSON}, {reporting.RESULTS_DIR}/{NAME}.md, {reporting.DOCS_RESULTS}/")


if __name__ == "__main__":
    raise SystemExit(main())
