"""A news-site simulator for the recrawl planner: sites, their seed pages, and crawls of them.

* :mod:`.sites` draws seeded sites whose seed pages publish as non-homogeneous Poisson
  processes (daily and weekly rhythms in each newsroom's time zone, bursts of breaking
  news, optional drift in volume), and the oracle that knows their true rates;
* :mod:`.crawl` fetches the seed pages on a virtual clock (fixed times, or a policy asked
  after every fetch), finds what each fetch discovers and what scrolled off, measures a
  crawl, and places the clairvoyant's fetches.

Pure (numpy and seeds, no I/O) and not installed with ``scrapy_twolevel``: it serves
``benchmarks/recrawl.py`` and lives beside it, like :mod:`realweb` beside ``real_servers.py``.
"""

from .crawl import (
    CrawlLog,
    clairvoyant_times,
    crawl_policy,
    crawl_times,
    discover,
    first_fetches,
    fixed_times,
    history_events,
    measure,
)
from .sites import EPOCH, Drift, Seed, TrueRate, World, generate

__all__ = [
    "EPOCH",
    "CrawlLog",
    "Drift",
    "Seed",
    "TrueRate",
    "World",
    "clairvoyant_times",
    "crawl_policy",
    "crawl_times",
    "discover",
    "first_fetches",
    "fixed_times",
    "generate",
    "history_events",
    "measure",
]
