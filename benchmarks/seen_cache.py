"""Seen cache benchmark: SeenCacheDupeFilter against Scrapy's RFPDupeFilter, same run.

Measures, per filter and size (N distinct URLs plus repeats): µs per ``request_seen`` call
(Scrapy's fingerprinting included), RAM per URL (total, and marginal over the last two
thirds of the run), and wrong verdicts checked against the exact truth of the workload.

Filters, each run in a fresh subprocess (RSS):

- ``rfp``: stock ``scrapy.dupefilters.RFPDupeFilter`` (a Python set of 20-byte SHA1s);
- ``exact-builtin``: ``SeenCacheDupeFilter``, exact mode, ``TWOLEVEL_SEEN_BLOOM="builtin"``;
- ``exact-pybloom``: the same with ``TWOLEVEL_SEEN_BLOOM="pybloom-live"``;
- ``bloom-only``: ``TWOLEVEL_SEEN_MODE="bloom-only"`` (builtin filter, no store);
- ``fp-only`` (control, not a filter): only ``crawler.request_fingerprinter.fingerprint``,
  always "new": the fingerprinting floor and the harness's own RSS drift.

Exact mode keeps its store in the default place (no JOBDIR, no TWOLEVEL_SEEN_PATH): a
temporary SQLite file, whose size is read just before ``close()`` removes it.

Workload (deterministic, seeded; see :class:`Workload`): a stream of ``Request`` objects
over many hosts in which a third of the calls introduce a new URL and two thirds repeat
an earlier one, so every URL is tested 3 times on average. Repeats are clustered: most
point at URLs introduced moments ago (the same site's links), some at a few very popular
URLs (Zipf), some at any earlier URL (old links, which miss every cache). The generator
knows which calls are first occurrences, so wrong verdicts are counted without a
reference set in the measured process. A new ``Request`` is built for every call (Scrapy
caches fingerprints per ``Request`` object), in batches, outside the timed region.

Filters run in pairs, two processes at a time on this 2-core machine: each filter is paired
with a stock RFPDupeFilter run of the same size started at the same moment, and its
"x RFP" ratios are to that run, so both saw the same machine load.

Usage::

    python benchmarks/seen_cache.py                  # full: 1M (every filter) and 10M
    python benchmarks/seen_cache.py --quick          # smoke run: 100k, writes *_quick files
    python benchmarks/seen_cache.py --sizes 1000000
    python benchmarks/seen_cache.py --sizes 10000000 --no-layers --name seen_cache_10m
    python benchmarks/seen_cache.py --profile exact-builtin --n 200000
    python benchmarks/seen_cache.py --rerender benchmarks/results/seen_cache.json
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import DOCS_RESULTS, RESULTS, ROOT, report
from harness.crawl import Snapshot, pythonpath, snapshot_package, worker_result
from harness.env import environment

NAME = "seen_cache"

SEED = 20240611
#: Calls per batch of Requests built outside the timed region. Small, so the batch alive
#: between two RSS readings (about 1.5 MB of Requests) hardly moves them.
BATCH = 1_000
#: Average number of times each distinct URL is tested: 1 / P(a call introduces a new URL).
TESTS_PER_URL = 3.0
#: How repeats pick the earlier URL they repeat (fractions of the repeats).
REPEAT_MIX = (("recent", 0.60), ("popular", 0.25), ("old", 0.15))
#: "recent": the URL introduced d calls-to-new-URLs ago, d geometric with this mean.
RECENT_MEAN = 500
#: "popular": rank r ~ Zipf(ZIPF_A) over URLs by age (the earliest, seeds and navigation,
#: are linked most).
ZIPF_A = 1.2
#: New URLs are introduced in runs of this many on one host (one page's worth of links).
HOST_RUN = 32
#: Distinct URLs per host on average (hosts = N / this); host sizes are Zipf-like.
URLS_PER_HOST = 200
#: Sizes at and above which only the stock / builtin-exact pair runs (``--all-configs``).
BIG = 5_000_000
#: RSS curve points kept per run in the JSON.
CURVE_POINTS = 300

FULL_SIZES = (1_000_000, 10_000_000)
QUICK_SIZES = (100_000,)

RFP = "scrapy.dupefilters.RFPDupeFilter"
OURS = "scrapy_twolevel.dupefilter.SeenCacheDupeFilter"

# Targets from the issue.
TARGET_TIME_X = 1.0
TARGET_MARGINAL = 4.0
TARGET_TOTAL_10M = 4.0


@dataclass(frozen=True)
class Config:
    key: str
    label: str
    settings: dict[str, Any]
    exact: bool  # a SeenCacheDupeFilter in exact mode: the targets apply


CONFIGS: dict[str, Config] = {
    c.key: c
    for c in (
        Config("rfp", "stock RFPDupeFilter", {"DUPEFILTER_CLASS": RFP}, False),
        Config(
            "exact-builtin",
            "SeenCache exact, builtin Bloom",
            {"DUPEFILTER_CLASS": OURS, "TWOLEVEL_SEEN_BLOOM": "builtin"},
            True,
        ),
        Config(
            "exact-pybloom",
            "SeenCache exact, pybloom-live",
            {"DUPEFILTER_CLASS": OURS, "TWOLEVEL_SEEN_BLOOM": "pybloom-live"},
            True,
        ),
        Config(
            "bloom-only",
            "SeenCache bloom-only (builtin)",
            {"DUPEFILTER_CLASS": OURS, "TWOLEVEL_SEEN_MODE": "bloom-only"},
            False,
        ),
        Config("fp-only", "control: fingerprint only", {}, False),
    )
}
COLORS = {
    "rfp": "tab:gray",
    "exact-builtin": "tab:green",
    "exact-pybloom": "tab:orange",
    "bloom-only": "tab:blue",
    "fp-only": "tab:purple",
}
BASE_SETTINGS: dict[str, Any] = {"LOG_LEVEL": "WARNING", "TELNETCONSOLE_ENABLED": False}


def plan(sizes: tuple[int, ...], all_configs: bool) -> list[tuple[int, list[str]]]:
    """``(size, [jobs run together])`` in order: every filter next to a stock run.

    A job is a config key, or ``layers`` (every filter without fingerprinting, one process).
    """
    out: list[tuple[int, list[str]]] = []
    for n in sizes:
        if n >= BIG and not all_configs:
            out += [(n, ["rfp", "exact-builtin"]), (n, [LAYERS_BIG])]
            continue
        out += [
            (n, ["rfp", "exact-builtin"]),
            (n, ["rfp", "exact-pybloom"]),
            (n, ["rfp", "bloom-only"]),
            (n, ["rfp", "exact-builtin"]),  # the main pair again: how stable the ratio is
            (n, ["layers", "fp-only"]),
        ]
    return out


# -- the workload -------------------------------------------------------------------------

SECTIONS = (
    "news", "world", "sport", "tech", "science", "culture", "travel", "food",
    "money", "health", "style", "opinion", "video", "books", "music", "local",
)  # fmt: skip
WORDS = (
    "river", "market", "garden", "winter", "summer", "city", "coast", "north",
    "south", "energy", "school", "health", "music", "festival", "review", "guide",
    "election", "budget", "team", "match", "season", "recipe", "travel", "hotel",
    "museum", "science", "space", "ocean", "forest", "mountain", "history", "future",
    "design", "house", "family", "market", "police", "court", "report", "study",
    "phone", "camera", "laptop", "game", "movie", "series", "album", "concert",
    "coffee", "bread", "wine", "cheese", "bike", "train", "airport", "bridge",
    "storm", "rain", "heat", "snow", "island", "valley", "lake", "desert",
)  # fmt: skip
SIZES = ("s", "m", "l", "xl")

_K1 = 0x9E3779B97F4A7C15
_K2 = 0xC2B2AE3D27D4EB4F


@dataclass
class Workload:
    """The stream of ``request_seen`` calls; the same for every filter (same seed).

    URL ``i`` (the ``i``-th distinct URL to appear) is a deterministic, injective function of
    ``i``: its host comes from its run of :data:`HOST_RUN` new URLs (host ``floor(H**u)``,
    ``u`` uniform: log-uniform, so host sizes are Zipf-like), its path from one of five
    templates (20% with a query string, which ``canonicalize_url`` sorts), and every
    template ends in ``i``. Each call is new with probability ``1/TESTS_PER_URL`` (the
    run ends at the N-th new URL); a repeat picks an earlier URL per :data:`REPEAT_MIX`.
    """

    n: int
    seed: int = SEED
    batch: int = BATCH
    introduced: int = 0
    calls: int = 0

    def __post_init__(self) -> None:
        import numpy as np

        self.hosts = max(100, self.n // URLS_PER_HOST)
        self._rng = np.random.default_rng(self.seed)

    def ids(self) -> Iterator[tuple[Any, Any]]:
        """``(url ids, is-first-occurrence mask)`` per batch (numpy arrays)."""
        import numpy as np

        rng = self._rng
        cuts = np.cumsum([share for _, share in REPEAT_MIX])
        while self.introduced < self.n:
            new = rng.random(self.batch) < 1.0 / TESTS_PER_URL
            if self.introduced == 0:
                new[0] = True
            cum = np.cumsum(new)
            left = self.n - self.introduced
            if cum[-1] >= left:  # end the run at the N-th new URL
                stop = int(np.searchsorted(cum, left)) + 1
                new, cum = new[:stop], cum[:stop]
            before = self.introduced + cum - new  # URLs introduced before each call
            ids = before.copy()
            rep = ~new
            m = before[rep]
            kind = rng.random(len(m))
            recent = m - rng.geometric(1.0 / RECENT_MEAN, len(m))
            popular = rng.zipf(ZIPF_A, len(m)) - 1
            old = (rng.random(len(m)) * m).astype(np.int64)
            ids[rep] = np.where(
                kind < cuts[0],
                np.mod(recent, m),
                np.where(kind < cuts[1], np.mod(popular, m), old),
            )
            self.introduced += int(cum[-1])
            self.calls += len(ids)
            yield ids, new

    def urls(self, ids: Any) -> list[str]:
        import numpy as np

        with np.errstate(over="ignore"):
            u = ids.astype(np.uint64)
            h = (u * np.uint64(_K1)) >> np.uint64(20)
            block = (u // np.uint64(HOST_RUN)) * np.uint64(_K2)
        frac = (block >> np.uint64(11)).astype(np.float64) / float(1 << 53)
        host = (np.power(float(self.hosts), frac) - 1).astype(np.int64)
        tpl = (h % np.uint64(100)).astype(np.int64)
        w1 = ((h >> np.uint64(8)) % np.uint64(len(WORDS))).astype(np.int64)
        w2 = ((h >> np.uint64(16)) % np.uint64(len(WORDS))).astype(np.int64)
        sec = ((h >> np.uint64(24)) % np.uint64(len(SECTIONS))).astype(np.int64)
        out = []
        append = out.append
        for i, t, a, b, s, hs in zip(
            ids.tolist(),
            tpl.tolist(),
            w1.tolist(),
            w2.tolist(),
            sec.tolist(),
            host.tolist(),
            strict=True,
        ):
            base = f"http://h{hs}.example"
            if t < 50:
                append(
                    f"{base}/{SECTIONS[s]}/{2010 + i % 15}/{1 + i % 12:02d}/"
                    f"{WORDS[a]}-{WORDS[b]}-{i}.html"
                )
            elif t < 70:
                append(f"{base}/{SECTIONS[s]}/{WORDS[a]}-{WORDS[b]}-{i}/")
            elif t < 80:
                append(f"{base}/tag/{WORDS[a]}/page/{i}")
            elif t < 90:
                append(f"{base}/products/{i}?color={WORDS[a]}&size={SIZES[b % 4]}")
            else:
                append(f"{base}/search?q={WORDS[a]}+{WORDS[b]}&page={1 + i % 50}&id={i}")
        return out

    def batches(self) -> Iterator[tuple[list[Any], Any]]:
        """``([Request, ...], first-occurrence mask)``: a new Request for every call."""
        from scrapy import Request

        for ids, new in self.ids():
            yield [Request(url) for url in self.urls(ids)], new


def workload_notes() -> list[str]:
    mix = ", ".join(f"{share:.0%} {kind}" for kind, share in REPEAT_MIX)
    return [
        f"Each call introduces a new URL with probability 1/{TESTS_PER_URL:g}, so every "
        f"distinct URL is tested {TESTS_PER_URL:g} times on average (a duplicate rate of "
        f"{1 - 1 / TESTS_PER_URL:.0%} of the calls); the run ends at the N-th distinct URL.",
        f"Repeats: {mix}. recent: a URL introduced d new-URLs ago, d geometric with mean "
        f"{RECENT_MEAN} (the same site's links, moments later); popular: rank ~ Zipf("
        f"{ZIPF_A}) over URLs by age (seeds and navigation pages); old: uniform over every "
        "earlier URL (old links: they miss any cache and reach the Bloom filter and the store).",
        f"Hosts: N/{URLS_PER_HOST}, Zipf-like sizes; new URLs arrive in runs of {HOST_RUN} on "
        "one host. URLs look like http://h12.example/news/2017/03/river-bridge-123.html, "
        ".../tag/storm/page/123, and 20% carry a query string (/products/123?color=..&size=.., "
        "/search?q=..+..&page=..&id=123), which canonicalize_url sorts.",
        f"A new scrapy.Request is built for every call (repeats included), {BATCH:,} at a "
        "time outside the timed region; the generator knows which calls are first "
        "occurrences, so the exact reference costs no RAM in the measured process.",
    ]


# -- worker side: one filter in this process --------------------------------------------


def _rss(proc: Any, collect: bool = True) -> int:
    if collect:
        gc.collect()
    return int(proc.memory_info().rss)


def _file_bytes(path: Path | None) -> dict[str, int] | None:
    if path is None:
        return None
    out = {"apparent": 0, "allocated": 0, "wal_apparent": 0}
    for suffix in ("", "-wal", "-shm"):
        p = Path(f"{path}{suffix}")
        if p.exists():
            st = p.stat()
            out["apparent"] += st.st_size
            out["allocated"] += st.st_blocks * 512
            if suffix == "-wal":
                out["wal_apparent"] = st.st_size
    return out


def build(config: Config, crawler: Any) -> tuple[Any, Any]:
    """``(filter or None, request_seen)``."""
    from scrapy.utils.misc import build_from_crawler, load_object

    if config.key == "fp-only":
        fingerprint = crawler.request_fingerprinter.fingerprint

        def control(request: Any) -> bool:
            fingerprint(request)
            return False

        return None, control
    df = build_from_crawler(load_object(config.settings["DUPEFILTER_CLASS"]), crawler)
    df.open()
    return df, df.request_seen


def make_crawler(config: Config) -> Any:
    from scrapy import Spider
    from scrapy.utils.test import get_crawler

    crawler = get_crawler(Spider, {**BASE_SETTINGS, **config.settings})
    crawler.spider = Spider("bench")
    return crawler


def _preload() -> None:
    """Import everything any configuration imports, before the baseline RSS."""
    import sqlite3  # noqa: F401

    import numpy  # noqa: F401
    import psutil  # noqa: F401
    import pybloom_live  # noqa: F401
    from scrapy.dupefilters import RFPDupeFilter  # noqa: F401

    from scrapy_twolevel.dupefilter import SeenCacheDupeFilter  # noqa: F401


def _seen_stats(crawler: Any) -> dict[str, Any]:
    return {
        k.removeprefix("twolevel/seen/"): v
        for k, v in crawler.stats.get_stats().items()
        if k.startswith("twolevel/seen/")
    }


WARMUP_URLS = 20_000


class _FullCollections:
    """Counts Python's full (generation 2) collections and their CPU time, timed or not.

    A full collection visits every element of every container, so a filter that keeps
    its fingerprints in a Python set pays for them at every full collection.
    """

    def __init__(self) -> None:
        self.count = self.timed_count = 0
        self.cpu = self.timed_cpu = 0.0
        self.timing = False  # set by the caller around the timed calls
        self._start = 0.0
        gc.callbacks.append(self)

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._start = time.process_time()
        else:
            spent = time.process_time() - self._start
            self.count += 1
            self.cpu += spent
            if self.timing:
                self.timed_count += 1
                self.timed_cpu += spent

    def stop(self) -> None:
        gc.callbacks.remove(self)


def run_config(key: str, n: int, seed: int, progress: bool = True) -> dict[str, Any]:
    """One filter, end to end: real Requests, Scrapy's fingerprinter, RSS."""
    import resource

    import numpy as np
    import psutil

    import scrapy_twolevel

    _preload()
    config = CONFIGS[key]
    proc = psutil.Process()
    crawler = make_crawler(config)
    fingerprint = crawler.request_fingerprinter.fingerprint
    # Warm-up: another stream through the same loop (a fingerprint-only "filter"), so the
    # allocator, Scrapy's and w3lib's caches and numpy are at their working size.
    warm = Workload(WARMUP_URLS, seed=seed + 1)
    for batch, new in warm.batches():
        verdicts = [fingerprint(r) is None for r in batch]
        del batch
        v = np.fromiter(verdicts, dtype=bool, count=len(verdicts))
        int(np.count_nonzero(v & new))
        _rss(proc, collect=False)
    del warm, verdicts, v, new
    points = np.zeros((CURVE_POINTS + 3, 2), dtype=np.int64)  # RSS curve, preallocated
    rss_base = _rss(proc)
    full_gc = _FullCollections()
    df, seen = build(config, crawler)
    rss_open = _rss(proc)

    work = Workload(n, seed=seed)
    third = n / 3
    cpu = wall = 0.0
    false_seen = false_new = verdict_seen = expected_seen = 0
    points[0] = (0, rss_open - rss_base)
    npoints = 1
    step = max(1, n // CURVE_POINTS)
    next_point = step
    rss_third = urls_third = None
    next_report = 0.1
    started = time.perf_counter()
    for batch, new in work.batches():
        full_gc.timing = True
        c0, w0 = time.process_time(), time.perf_counter()
        verdicts = list(map(seen, batch))
        cpu += time.process_time() - c0
        wall += time.perf_counter() - w0
        full_gc.timing = False
        del batch
        v = np.fromiter(verdicts, dtype=bool, count=len(verdicts))
        false_seen += int(np.count_nonzero(v & new))
        false_new += int(np.count_nonzero(~v & ~new))
        verdict_seen += int(np.count_nonzero(v))
        expected_seen += int(np.count_nonzero(~new))
        if rss_third is None and work.introduced >= third:
            rss_third, urls_third = _rss(proc), work.introduced
            if npoints < len(points) - 1:
                points[npoints] = (work.introduced, rss_third - rss_base)
                npoints += 1
        elif work.introduced >= next_point and npoints < len(points) - 1:
            points[npoints] = (work.introduced, _rss(proc, collect=False) - rss_base)
            npoints += 1
            next_point += step
        if progress and work.introduced >= next_report * n:
            print(
                f"{key} N={n:,}: {work.introduced / n:.0%} ({work.calls:,} calls, "
                f"{cpu / work.calls * 1e6:.1f} µs/call, {time.perf_counter() - started:.0f}s)",
                file=sys.stderr,
                flush=True,
            )
            next_report += 0.1
    del verdicts, v
    rss_end = _rss(proc)
    points[npoints] = (work.introduced, rss_end - rss_base)
    npoints += 1
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert work.introduced == n, (work.introduced, n)
    assert rss_third is not None and urls_third is not None
    store_disk = None
    if df is not None and getattr(df, "_temp_path", None) is not None:
        store_disk = _file_bytes(df._temp_path)
    full_gc.stop()
    c0 = time.process_time()
    if df is not None:
        df.close("finished")
    close_cpu = time.process_time() - c0
    calls = work.calls
    return {
        "mode": "e2e",
        "config": key,
        "n": n,
        "seed": seed,
        "hosts": work.hosts,
        "calls": calls,
        "distinct": work.introduced,
        "tests_per_url": calls / n,
        "cpu_s": cpu,
        "wall_s": wall,
        "us_per_call": cpu / calls * 1e6,
        "wall_us_per_call": wall / calls * 1e6,
        "rss_baseline": rss_base,
        "rss_open": rss_open,
        "rss_third": rss_third,
        "urls_third": urls_third,
        "rss_end": rss_end,
        "peak_rss": peak,
        "peak_above_baseline": peak - rss_base,
        "open_bytes": rss_open - rss_base,
        "ram_bytes_per_url": (rss_end - rss_base) / n,
        "marginal_bytes_per_url": (rss_end - rss_third) / (n - urls_third),
        "false_seen": false_seen,
        "false_new": false_new,
        "verdicts_seen": verdict_seen,
        "expected_seen": expected_seen,
        "close_cpu_s": close_cpu,
        "full_gc_collections": full_gc.count,
        "full_gc_cpu_s": full_gc.cpu,
        "full_gc_collections_timed": full_gc.timed_count,
        "full_gc_cpu_s_timed": full_gc.timed_cpu,
        "store_disk": store_disk,
        "store_disk_bytes_per_url": (store_disk["allocated"] / n) if store_disk else None,
        "stats": _seen_stats(crawler),
        "samples": points[:npoints].tolist(),
        "scrapy_twolevel_from": str(Path(scrapy_twolevel.__file__).parent),
    }


class _Digest:
    """A stand-in Request whose fingerprint is already known (see :func:`run_layers`)."""

    __slots__ = ("fp",)
    dont_filter = False

    def __init__(self, fp: bytes) -> None:
        self.fp = fp


class _KnownFingerprint:
    def fingerprint(self, request: _Digest) -> bytes:
        return request.fp


LAYER_CONFIGS = ("rfp", "exact-builtin", "exact-pybloom", "bloom-only")
#: The layers job at sizes >= BIG: bloom-only is left out there to save time.
LAYERS_BIG = "layers:rfp,exact-builtin,exact-pybloom"


def run_layers(n: int, seed: int, keys: tuple[str, ...] = LAYER_CONFIGS) -> dict[str, Any]:
    """The filters without fingerprinting, side by side in one process.

    Every filter gets the same calls, batch by batch, in an order that rotates: the
    machine's load is the same for all. Fingerprints are SHA1 digests of the URL ids, made
    outside the timed region, one fresh ``bytes`` per call and filter (so no filter finds
    a hash another already computed); a stub fingerprinter hands them to the filter's own
    ``request_seen``. The SeenCache filters are built as ``from_crawler`` builds them, but
    with that stub (keys are then the digests' first 16 bytes, as with Scrapy's
    fingerprinter). RAM is not measured here.
    """
    import hashlib

    import numpy as np
    from scrapy.dupefilters import RFPDupeFilter

    import scrapy_twolevel
    from scrapy_twolevel.config import SeenConfig
    from scrapy_twolevel.dupefilter import SeenCacheDupeFilter

    stub = _KnownFingerprint()
    filters: dict[str, Any] = {}
    crawlers: dict[str, Any] = {}
    for key in keys:
        crawler = crawlers[key] = make_crawler(CONFIGS[key])
        if key == "rfp":
            filters[key] = RFPDupeFilter(fingerprinter=stub)
        else:
            filters[key] = SeenCacheDupeFilter(
                config=SeenConfig.from_settings(crawler.settings),
                fingerprinter=stub,
                uniform_fingerprints=True,
                stats=crawler.stats,
            )
        filters[key].open()
    cpu = dict.fromkeys(keys, 0.0)
    wrong = {key: [0, 0] for key in keys}
    work = Workload(n, seed=seed)
    sha1 = hashlib.sha1
    started = time.perf_counter()
    next_report = 0.1
    for i, (ids, new) in enumerate(work.ids()):
        blob = b"".join([sha1(x.to_bytes(8, "little")).digest() for x in ids.tolist()])
        order = keys[i % len(keys) :] + keys[: i % len(keys)]
        for key in order:
            calls = [_Digest(blob[j : j + 20]) for j in range(0, len(blob), 20)]
            seen = filters[key].request_seen
            c0 = time.process_time()
            verdicts = list(map(seen, calls))
            cpu[key] += time.process_time() - c0
            v = np.fromiter(verdicts, dtype=bool, count=len(verdicts))
            wrong[key][0] += int(np.count_nonzero(v & new))
            wrong[key][1] += int(np.count_nonzero(~v & ~new))
        if work.introduced >= next_report * n:
            print(
                f"layers N={n:,}: {work.introduced / n:.0%} ({time.perf_counter() - started:.0f}s)",
                file=sys.stderr,
                flush=True,
            )
            next_report += 0.1
    out: dict[str, Any] = {}
    for key in keys:
        filters[key].close("finished")
        out[key] = {
            "us_per_call": cpu[key] / work.calls * 1e6,
            "cpu_s": cpu[key],
            "false_seen": wrong[key][0],
            "false_new": wrong[key][1],
            "stats": _seen_stats(crawlers[key]),
        }
    return {
        "mode": "layers",
        "config": "layers",
        "n": n,
        "seed": seed,
        "calls": work.calls,
        "filters": out,
        "us_per_call": None,
        "scrapy_twolevel_from": str(Path(scrapy_twolevel.__file__).parent),
    }


def profile_config(key: str, n: int, seed: int, out: Path | None) -> str:
    """cProfile the timed calls of one configuration (request building excluded).

    Prints and optionally writes the top functions by own and by cumulative CPU time.
    """
    import cProfile
    import io
    import pstats

    import scrapy_twolevel

    config = CONFIGS[key]
    crawler = make_crawler(config)
    df, seen = build(config, crawler)
    prof = cProfile.Profile(time.process_time)  # CPU time: a loaded machine's waits excluded
    work = Workload(n, seed=seed)
    for batch, _ in work.batches():
        prof.enable()
        for request in batch:
            seen(request)
        prof.disable()
    if df is not None:
        df.close("finished")
    text = io.StringIO()
    text.write(
        f"# {key}, N={n:,} distinct, {work.calls:,} calls; scrapy_twolevel from "
        f"{Path(scrapy_twolevel.__file__).parent}\n"
    )
    for order in ("tottime", "cumulative"):
        text.write(f"## sorted by {order}\n")
        pstats.Stats(prof, stream=text).sort_stats(order).print_stats(25)
    if out is not None:
        out.write_text(text.getvalue(), encoding="utf-8")
    return text.getvalue()


# -- parent side: pairs of subprocesses, then the report ----------------------------------


def run_group(
    n: int, keys: list[str], seed: int, snapshot: Path | None, jobs: int, logdir: Path
) -> list[dict[str, Any]]:
    """Run ``keys`` at size ``n``, ``jobs`` processes at a time; their results in order."""
    env = pythonpath(snapshot)
    results: list[dict[str, Any]] = []
    pending = list(keys)
    while pending:
        chunk, pending = pending[:jobs], pending[jobs:]
        procs = []
        for key in chunk:
            cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", key]
            cmd += ["--n", str(n), "--seed", str(seed)]
            log = logdir / f"{key}-{n}-{time.monotonic_ns()}.log"
            fh = log.open("w")
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=fh, text=True, env=env)
            procs.append((key, proc, fh, log, time.perf_counter()))
        for key, proc, fh, log, t0 in procs:
            stdout, _ = proc.communicate()
            wall = time.perf_counter() - t0
            fh.close()
            tail = log.read_text(encoding="utf-8", errors="replace")
            result = worker_result(proc.returncode, stdout, tail, config=key, n=n)
            result["process_wall_s"] = wall
            results.append(result)
    return results


def _ok(run: dict[str, Any]) -> bool:
    """An end-to-end run that completed."""
    return run.get("mode") == "e2e" and "us_per_call" in run


def _progress(run: dict[str, Any]) -> str:
    if _layers_ok(run):
        layers = ", ".join(f"{k} {f['us_per_call']:.2f} µs" for k, f in run["filters"].items())
        return f"    layers (no fingerprinting): {layers} [{run['process_wall_s']:.0f}s]"
    return report.progress(
        f"    {run['config']}: ",
        run,
        _ok(run),
        lambda: (
            f"{run['us_per_call']:.2f} µs/call CPU ({run['wall_us_per_call']:.2f} wall)",
            f"{run['ram_bytes_per_url']:.2f} B/URL total",
            f"{run['marginal_bytes_per_url']:.2f} marginal",
            f"false seen {run['false_seen']}",
            f"false new {run['false_new']}",
        ),
    )


def _layers_ok(run: dict[str, Any]) -> bool:
    return run.get("mode") == "layers" and "filters" in run


def add_ratios(runs: list[dict[str, Any]]) -> None:
    """x RFP: to the stock run of the same pair (same size, started at the same moment)."""
    for run in runs:
        if not _ok(run):
            continue
        ref = next(
            (r for r in runs if r["pair"] == run["pair"] and r["config"] == "rfp" and _ok(r)),
            None,
        )
        if ref is None:
            continue
        run["x_rfp_time"] = run["us_per_call"] / ref["us_per_call"]
        run["x_rfp_wall"] = run["wall_us_per_call"] / ref["wall_us_per_call"]
        run["x_rfp_ram"] = run["ram_bytes_per_url"] / ref["ram_bytes_per_url"]


def summarize(runs: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{config: {size: {...}}}``: means over the end-to-end runs of that filter and size,
    plus the filter's cost without fingerprinting from the ``layers`` run of that size."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    layers = {r["n"]: r["filters"] for r in runs if _layers_ok(r)}
    for key in CONFIGS:
        for n in sorted({r["n"] for r in runs}):
            group = [r for r in runs if r["config"] == key and r["n"] == n and _ok(r)]
            if not group:
                failed = [r for r in runs if r["config"] == key and r["n"] == n]
                if failed:
                    out.setdefault(key, {})[str(n)] = {"error": failed[0].get("error")}
                continue

            def mean(field: str, group: list[dict[str, Any]] = group) -> float | None:
                vals = [r[field] for r in group if r.get(field) is not None]
                return sum(vals) / len(vals) if vals else None

            first = group[0]
            stats = first.get("stats", {})
            layer = layers.get(n, {}).get(key)
            out.setdefault(key, {})[str(n)] = {
                "label": CONFIGS[key].label,
                "runs": len(group),
                "us_per_call": mean("us_per_call"),
                "us_per_call_runs": [r["us_per_call"] for r in group],
                "wall_us_per_call": mean("wall_us_per_call"),
                "x_rfp_time": mean("x_rfp_time"),
                "x_rfp_time_runs": [r.get("x_rfp_time") for r in group],
                "us_per_call_without_fingerprinting": layer["us_per_call"] if layer else None,
                "ram_bytes_per_url": mean("ram_bytes_per_url"),
                "marginal_bytes_per_url": mean("marginal_bytes_per_url"),
                "x_rfp_ram": mean("x_rfp_ram"),
                "false_seen": sum(r["false_seen"] for r in group),
                "false_new": sum(r["false_new"] for r in group),
                "calls": first["calls"],
                "peak_above_baseline": max(r["peak_above_baseline"] for r in group),
                "store_disk_bytes": (first["store_disk"] or {}).get("allocated"),
                "store_disk_bytes_per_url": first["store_disk_bytes_per_url"],
                "cache_hit_rate": stats.get("cache_hit_rate"),
                "bloom": {
                    k: stats[k]
                    for k in (
                        "bloom_bytes",
                        "bloom_rebuilds",
                        "bloom_maybe",
                        "bloom_maybe_rate",
                        "bloom_false_positives",
                        "bloom_false_positive_rate",
                        "store_lookups",
                    )
                    if k in stats
                },
            }
    return out


def verdicts(summary: dict[str, dict[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """The issue's targets, for every exact-mode filter and size measured."""
    out = []
    for key, sizes in summary.items():
        if not CONFIGS[key].exact:
            continue
        for size, s in sizes.items():
            if "error" in s:
                continue
            n = int(size)
            row: dict[str, Any] = {"config": key, "n": n}
            x = s["x_rfp_time"]
            runs = [f"{r:.2f}x" for r in s["x_rfp_time_runs"] if r is not None]
            row["time"] = {
                "target": f"<= {TARGET_TIME_X:.1f}x RFP",
                "measured": (f"{x:.2f}x" if x is not None else "n/a")
                + (f" (runs: {', '.join(runs)})" if len(runs) > 1 else ""),
                "met": x is not None
                and all(r <= TARGET_TIME_X for r in s["x_rfp_time_runs"] if r is not None),
            }
            m = s["marginal_bytes_per_url"]
            row["marginal"] = {
                "target": f"<= {TARGET_MARGINAL:g} B/URL",
                "measured": f"{m:.2f} B/URL",
                "met": m <= TARGET_MARGINAL,
            }
            if n >= 10_000_000:
                t = s["ram_bytes_per_url"]
                row["total"] = {
                    "target": f"<= {TARGET_TOTAL_10M:g} B/URL at 10M",
                    "measured": f"{t:.2f} B/URL",
                    "met": t <= TARGET_TOTAL_10M,
                }
            row["false_seen"] = {
                "target": "0 (and 0 false new)",
                "measured": f"{s['false_seen']} false seen, {s['false_new']} false new",
                "met": s["false_seen"] == 0 and s["false_new"] == 0,
            }
            out.append(row)
    return out


def _pick(builtin: float, pybloom: float) -> str:
    return "builtin" if builtin <= pybloom else "pybloom-live"


def backend_choice(
    summary: dict[str, dict[str, dict[str, Any]]], runs: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """builtin vs pybloom-live in exact mode: end to end at the largest size both ran, and
    without fingerprinting (same process, interleaved) at every size the layers ran."""
    both = [
        size
        for size, s in summary.get("exact-builtin", {}).items()
        if "error" not in s
        and "error" not in summary.get("exact-pybloom", {}).get(size, {"error": 1})
    ]
    layers = {
        r["n"]: {
            k: r["filters"][k]["us_per_call"]
            for k in ("exact-builtin", "exact-pybloom", "rfp")
            if k in r["filters"]
        }
        for r in runs
        if _layers_ok(r)
    }
    if not both and not layers:
        return None
    fields = ("us_per_call", "x_rfp_time", "ram_bytes_per_url", "marginal_bytes_per_url", "bloom")
    out: dict[str, Any] = {"layers_us_per_call": {str(n): v for n, v in sorted(layers.items())}}
    if both:
        size = max(both, key=int)
        b, p = summary["exact-builtin"][size], summary["exact-pybloom"][size]
        out.update(
            n=int(size),
            builtin={k: b[k] for k in fields},
            pybloom_live={k: p[k] for k in fields},
            faster_end_to_end=_pick(b["us_per_call"], p["us_per_call"]),
            less_ram=_pick(b["ram_bytes_per_url"], p["ram_bytes_per_url"]),
        )
    faster = {
        n: _pick(v["exact-builtin"], v["exact-pybloom"])
        for n, v in layers.items()
        if "exact-builtin" in v and "exact-pybloom" in v
    }
    out["faster_without_fingerprinting"] = {str(n): v for n, v in sorted(faster.items())}
    return out


def _f(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _x(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}x"


def _failed(head: list[str], r: dict[str, Any], *cells: str) -> list[str]:
    """The row of a failed run: its size, ``cells``, its error, then dashes."""
    row = [f"{r['n']:,}", *cells, "failed: " + r.get("error", "?")]
    return row + ["-"] * (len(head) - len(row))


def _cache_hit_rate(stats: dict[str, Any]) -> str:
    return _f(stats.get("cache_hit_rate"), 3) if "cache_hit_rate" in stats else "-"


def _bloom_mib(stats: dict[str, Any]) -> str:
    bloom = stats.get("bloom_bytes")
    return _f(bloom / 2**20, 1) if bloom is not None else "-"


def results_table(runs: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    head = report.columns(
        "URLs | filter | pair | µs/call (CPU) | x RFP | µs/call (wall) | total B/URL | "
        "x RFP RAM | marginal B/URL | false seen | false new | cache hit rate | Bloom MiB | "
        "store disk B/URL | peak RSS MiB"
    )
    rows = []
    for r in runs:
        if r.get("mode") == "layers" or r["config"].startswith("layers"):
            continue
        label = CONFIGS[r["config"]].label
        if not _ok(r):
            rows.append(_failed(head, r, label, str(r.get("pair", ""))))
            continue
        stats = r.get("stats", {})
        control = r["config"] == "fp-only"
        rows.append(
            [
                f"{r['n']:,}",
                label,
                str(r["pair"]),
                _f(r["us_per_call"]),
                _x(r.get("x_rfp_time")),
                _f(r["wall_us_per_call"]),
                _f(r["ram_bytes_per_url"]),
                _x(r.get("x_rfp_ram"), 3),
                _f(r["marginal_bytes_per_url"]),
                "-" if control else f"{r['false_seen']:,}",
                "-" if control else f"{r['false_new']:,}",
                _cache_hit_rate(stats),
                _bloom_mib(stats),
                _f(r.get("store_disk_bytes_per_url"), 1),
                f"{max(0, r['peak_above_baseline']) / 2**20:.0f}",
            ]
        )
    return head, rows


def layers_table(runs: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    head = report.columns(
        "URLs | filter | µs/call without fingerprinting | x RFP | false seen | false new | "
        "cache hit rate | store lookups / call | Bloom false-positive rate | Bloom MiB | "
        "Bloom rebuilds"
    )
    return head, [row for r in runs for row in _layer_rows(head, r)]


def _layer_rows(head: list[str], r: dict[str, Any]) -> Iterator[list[str]]:
    """A run without fingerprinting: a row per filter (none for a run of another kind)."""
    if not _layers_ok(r):
        if r["config"].startswith("layers"):
            yield _failed(head, r, "(layers)")
        return
    ref = r["filters"].get("rfp", {}).get("us_per_call")
    for key, f in r["filters"].items():
        stats = f["stats"]
        lookups = stats.get("store_lookups")
        yield [
            f"{r['n']:,}",
            CONFIGS[key].label,
            _f(f["us_per_call"]),
            _x(f["us_per_call"] / ref if ref else None, 1),
            f"{f['false_seen']:,}",
            f"{f['false_new']:,}",
            _cache_hit_rate(stats),
            _f(lookups / r["calls"], 3) if lookups is not None and key != "bloom-only" else "-",
            str(stats.get("bloom_false_positive_rate", "-")),
            _bloom_mib(stats),
            str(stats.get("bloom_rebuilds", "-")),
        ]


def targets_table(items: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    head = ["URLs", "filter", "target", "measured", "met"]
    rows = []
    for item in items:
        for name in ("time", "marginal", "total", "false_seen"):
            if name in item:
                t = item[name]
                rows.append(
                    [
                        f"{item['n']:,}",
                        CONFIGS[item["config"]].label,
                        t["target"],
                        t["measured"],
                        "yes" if t["met"] else "**no**",
                    ]
                )
    return head, rows


#: Bottom of the RSS plot's log axis (MiB); smaller growth is drawn there.
FLOOR_MIB = 0.1


def plot_rss(runs: list[dict[str, Any]], path: Path) -> None:
    """RSS above the idle baseline vs distinct URLs seen, one panel per size (log y)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted({r["n"] for r in runs if _ok(r)})
    fig, axes = plt.subplots(1, len(sizes), figsize=(7 * len(sizes), 4.8), squeeze=False)
    for ax, n in zip(axes[0], sizes, strict=True):
        drawn: set[str] = set()
        for r in runs:
            if r["n"] != n or not _ok(r):
                continue
            again = r["config"] in drawn
            drawn.add(r["config"])
            xs = [p[0] for p in r["samples"]]
            ys = [max(p[1] / 2**20, FLOOR_MIB) for p in r["samples"]]
            label = (
                None
                if again
                else (
                    f"{CONFIGS[r['config']].label}: {r['ram_bytes_per_url']:.1f} B/URL total, "
                    f"{r['marginal_bytes_per_url']:.1f} marginal"
                )
            )
            ax.plot(
                xs,
                ys,
                color=COLORS[r["config"]],
                linewidth=1.0 if again else 1.8,
                alpha=0.45 if again else 1.0,
                label=label,
            )
        ax.axvline(n / 3, color="#bbbbbb", linewidth=0.8, zorder=0)
        ax.set_yscale("log")
        ax.set_ylim(bottom=FLOOR_MIB)
        ax.set_xlabel("distinct URLs seen")
        ax.set_ylabel("RSS above the idle baseline (MiB, log)")
        ax.set_title(f"{n:,} distinct URLs, ~{TESTS_PER_URL:g} tests each", fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7.5, loc="lower right")
    fig.suptitle(
        "Dupefilter RSS vs URLs seen (grey line: 1/3 of the run; marginal = growth after it)",
        fontsize=10,
    )
    report.save_figure(fig, path, dpi=90)


def method_notes(jobs: int) -> list[str]:
    return [
        "Each filter runs in a fresh subprocess importing a copy of scrapy_twolevel taken at "
        "the start of the run.",
        f"Runs go in pairs, {jobs} process(es) at a time: each filter next to a stock "
        "RFPDupeFilter run of the same size; x RFP is to that run. The machine has "
        f"{os.cpu_count()} cores and other work on it.",
        "µs/call: CPU time (time.process_time, user + system, so SQLite's writes to the OS "
        "count) of the timed request_seen calls / calls; Scrapy's default "
        "REQUEST_FINGERPRINTER is inside every call. µs/call (wall) is perf_counter over "
        "the same calls.",
        "Total B/URL: RSS (psutil, after gc.collect()) after the last call, minus the RSS of "
        "the idle process before the filter is built (modules imported, one batch of "
        "Requests built, fingerprinted and dropped first so the allocator is warm), / N. "
        "Marginal B/URL: RSS growth from the first batch boundary at or after N/3 distinct "
        "URLs to the end, / the URLs added in that span (fixed-size caches excluded).",
        "false seen: 'seen' verdicts for calls that were the URL's first occurrence; false "
        "new: 'new' verdicts for repeats. Both counted against the generator's exact truth.",
        "Store disk: the exact store's temporary SQLite file plus its WAL, allocated bytes, "
        "read just before close() (which removes it), / N.",
        "Cache hit rate and Bloom figures are the filter's own twolevel/seen/* stats, set "
        "at close.",
        "Python's cyclic GC stays enabled, as in a crawl.",
    ]


def _docutils_check(text: str) -> list[str]:
    """Warnings docutils reports on the fragment parsed standalone."""
    try:
        import docutils.core
        import docutils.utils
    except ImportError:
        return ["docutils not installed: fragment not validated"]
    messages: list[str] = []

    class Collect:
        def write(self, data: str) -> None:
            if data.strip():
                messages.append(data.strip())

    docutils.core.publish_doctree(
        text,
        settings_overrides={"report_level": 2, "halt_level": 5, "warning_stream": Collect()},
    )
    return messages


def write_reports(data: dict[str, Any], out_dir: Path, name: str) -> str:
    runs = data["runs"]
    add_ratios(runs)
    summary = summarize(runs)
    checks = verdicts(summary)
    backend = backend_choice(summary, runs)
    data.update(results=summary, verdicts=checks, backend=backend)
    canonical = out_dir.resolve() == RESULTS.resolve() and name == NAME
    png = (DOCS_RESULTS if canonical else out_dir) / f"{name}_rss.png"
    plot_rss(runs, png)
    data["plot"] = os.path.relpath(png, ROOT)
    (out_dir / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")

    env, code = data["environment"], data["environment"].get("code", {})
    main_t, layers_t, targets_t = results_table(runs), layers_table(runs), targets_table(checks)
    skipped = data.get("skipped_note")
    header = (
        f"Command: `{data['command']}`; {env['date']}; Python {env['python']}, Scrapy "
        f"{env['scrapy']}, pybloom-live {env.get('pybloom_live')}, SQLite {env['sqlite']}; "
        f"{env['cpu_count']} CPUs, {env['memory_gib']} GiB; whole run "
        f"{data['elapsed_s'] / 60:.1f} min; scrapy_twolevel at commit "
        f"{code.get('commit') or '?'}"
        + (" plus uncommitted changes" if code.get("worktree_differs_from_commit") else "")
        + f" (sources sha256 {str(code.get('package_sha256'))[:12]})."
    )
    main_note = (
        "End to end (real Requests, Scrapy's fingerprinter inside every call). x RFP: to "
        "the stock RFPDupeFilter run of the same pair (same size, run at the same time); "
        "rows are runs, the main pair ran twice at the smaller size. Peak RSS is above the "
        "idle baseline."
    )
    layers_note = (
        "Without fingerprinting: every filter in one process, fed the same calls batch by "
        "batch in rotating order, with precomputed SHA1 digests as fingerprints; this is "
        "the filters' own work, measured under identical load."
    )
    backend_text = _backend_text(backend)
    sections: list[tuple[str, str, tuple[list[str], list[list[str]]]]] = [
        ("Measurements", main_note, main_t),
        ("Filter cost without fingerprinting", layers_note, layers_t),
        ("Targets (exact mode)", "", targets_t),
    ]
    md = ["# Seen cache: SeenCacheDupeFilter vs RFPDupeFilter", "", header, ""]
    md += [skipped, ""] if skipped else []
    md += [f"![RSS vs URLs]({os.path.relpath(png, out_dir)})", ""]
    for title, note, table in sections:
        md += [f"## {title}", ""] + ([note, ""] if note else []) + [report.markdown(table)]
    md += ["## Bloom backend", "", backend_text, "", "## Workload", ""]
    md += [f"- {note}" for note in data["workload"]] + ["", "## Method", ""]
    md += [f"- {note}" for note in data["method"]] + [""]
    (out_dir / f"{name}.md").write_text("\n".join(md), encoding="utf-8")
    if canonical:
        inc = [header.replace("`", "``"), ""]
        inc += [skipped, ""] if skipped else []
        inc += [f".. image:: results/{png.name}", "   :width: 100%", ""]
        for title, note, table in sections:
            inc += [f"**{title}.**" + (f" {note}" if note else ""), "", report.rst(table)]
        inc += ["**Bloom backend.** " + backend_text, "", "**Workload.**", ""]
        inc += [f"- {note}" for note in data["workload"]] + ["", "**Method.**", ""]
        inc += [f"- {note}" for note in data["method"]] + [""]
        problems = _docutils_check("\n".join(inc))
        if problems:
            print("docutils on the docs fragment:\n" + "\n".join(problems), file=sys.stderr)
        else:
            print("docs fragment: docutils reports no warnings")
        report.write_docs_fragment(name, inc)
    return "\n".join(
        [
            report.markdown(main_t),
            report.markdown(layers_t),
            report.markdown(targets_t),
            backend_text,
        ]
    )


def _backend_text(backend: dict[str, Any] | None) -> str:
    if backend is None:
        return "Not compared in this run (pybloom-live exact mode did not run)."
    parts = []
    for n, v in backend.get("layers_us_per_call", {}).items():
        if "exact-builtin" in v and "exact-pybloom" in v:
            parts.append(
                f"without fingerprinting at {int(n):,} URLs, builtin "
                f"{v['exact-builtin']:.2f} µs/call vs pybloom-live {v['exact-pybloom']:.2f} "
                f"({v['exact-pybloom'] / v['exact-builtin']:.2f}x)"
            )
    if "n" in backend:
        b, p = backend["builtin"], backend["pybloom_live"]

        def side(name: str, s: dict[str, Any]) -> str:
            bloom = s["bloom"]
            return (
                f"{name} {s['us_per_call']:.2f} µs/call ({_x(s['x_rfp_time'])} RFP), "
                f"{s['ram_bytes_per_url']:.2f} B/URL total, {s['marginal_bytes_per_url']:.2f} "
                f"marginal, Bloom {bloom.get('bloom_bytes', 0) / 2**20:.2f} MiB with an "
                f"observed false-positive rate of {bloom.get('bloom_false_positive_rate')}"
            )

        parts.append(
            f"end to end at {backend['n']:,} URLs, {side('builtin', b)}; {side('pybloom-live', p)}"
        )
    text = "Exact mode, " + "; ".join(parts) + "."
    if "n" in backend:
        text += (
            f" Faster end to end: {backend['faster_end_to_end']}; less RAM: {backend['less_ram']}."
        )
    return text


def main(argv: list[str] | None = None) -> int:
    parser = report.arg_parser(__doc__, quick="100k URLs only, *_quick files")
    parser.add_argument(
        "--sizes", default=None, help="comma-separated distinct-URL counts (default 1M,10M)"
    )
    parser.add_argument(
        "--all-configs",
        action="store_true",
        help=f"run every filter at sizes >= {BIG:,} too (default: stock and builtin exact)",
    )
    parser.add_argument("--jobs", type=int, default=2, help="processes at a time (default 2)")
    parser.add_argument(
        "--no-layers", action="store_true", help="skip the runs without fingerprinting"
    )
    parser.add_argument("--seed", type=int, default=SEED)
    report.output_options(parser, code="worktree", name=NAME)
    parser.add_argument("--rerender", type=Path, metavar="JSON", help="rewrite reports only")
    parser.add_argument("--worker", metavar="JOB", help=argparse.SUPPRESS)
    parser.add_argument("--profile", metavar="CONFIG", choices=list(CONFIGS))
    parser.add_argument("--profile-out", type=Path, default=None)
    parser.add_argument("--n", type=int, default=200_000, help="with --profile/--worker")
    args = parser.parse_args(argv)

    if args.worker and args.worker.startswith("layers"):
        _, _, only = args.worker.partition(":")
        keys = tuple(only.split(",")) if only else LAYER_CONFIGS
        print(json.dumps(run_layers(args.n, args.seed, keys)))
        return 0
    if args.worker:
        print(json.dumps(run_config(args.worker, args.n, args.seed)))
        return 0
    if args.profile:
        print(profile_config(args.profile, args.n, args.seed, args.profile_out))
        return 0
    if args.rerender:
        data = json.loads(args.rerender.read_text(encoding="utf-8"))
        print(write_reports(data, args.rerender.parent, args.rerender.stem))
        return 0

    sizes = QUICK_SIZES if args.quick else FULL_SIZES
    if args.sizes:
        sizes = tuple(int(s.replace("_", "")) for s in args.sizes.split(","))
    groups = plan(sizes, args.all_configs)
    if args.no_layers:
        groups = [(n, keys) for n, keys in groups if not any(k.startswith("layers") for k in keys)]
    name = args.name or (f"{NAME}_quick" if args.quick else NAME)
    command = report.command_line(__file__, sys.argv[1:])

    args.out_dir.mkdir(parents=True, exist_ok=True)
    env = environment(
        "scrapy", "w3lib", "pybloom_live", "sqlite", detailed=True,
        load_average_at_start=os.getloadavg(),
    )  # fmt: skip
    snapshot = Snapshot("twolevel-seen-src-", lambda copy: snapshot_package(copy, args.code))
    logdir = Path(tempfile.mkdtemp(prefix="twolevel-seen-logs-"))
    env["code"] = snapshot.code
    skipped = None
    big = [n for n in sizes if n >= BIG]
    if big and not args.all_configs:
        skipped = (
            f"At {', '.join(f'{n:,}' for n in big)} URLs only the stock RFPDupeFilter and "
            "SeenCache exact (builtin Bloom) ran: every filter at that size would take the "
            "whole run well past 35 minutes (--all-configs runs them)."
        )
        print(skipped)
    started = time.perf_counter()
    runs: list[dict[str, Any]] = []
    for pair, (n, keys) in enumerate(groups, 1):
        print(
            f"[{time.perf_counter() - started:7.1f}s] pair {pair}/{len(groups)}: N={n:,} "
            f"{' + '.join(keys)} ...",
            flush=True,
        )
        for run in run_group(n, keys, args.seed, snapshot.dir, args.jobs, logdir):
            run["pair"] = pair
            snapshot.check(run)
            runs.append(run)
            print(_progress(run), flush=True)
    elapsed = time.perf_counter() - started
    snapshot.remove()
    shutil.rmtree(logdir, ignore_errors=True)
    data: dict[str, Any] = {
        "command": command,
        "environment": env,
        "elapsed_s": elapsed,
        "jobs": args.jobs,
        "sizes": list(sizes),
        "skipped_note": skipped,
        "workload": workload_notes(),
        "method": method_notes(args.jobs),
        "targets": {
            "time_x_rfp_max": TARGET_TIME_X,
            "marginal_bytes_per_url_max": TARGET_MARGINAL,
            "total_bytes_per_url_max_at_10m": TARGET_TOTAL_10M,
            "false_seen": 0,
        },
        "runs": runs,
    }
    text = write_reports(data, args.out_dir, name)
    return report.finish(text, elapsed, f"{args.out_dir}/{name}.*")


if __name__ == "__main__":
    raise SystemExit(main())
