"""Crawls of a test web on a virtual clock, for the tests and the benchmarks.

* :mod:`.webgen` generates the reference study's web (500 servers, 30,000 pages) as a
  :class:`~scrapy_twolevel.testweb.web.WebSpec`, so the same web can be served by the test
  web server for a real crawl,
* :mod:`.des` crawls a web on a virtual clock, driving the real two-level frontier or a
  model of Scrapy's stock scheduler and downloader; :mod:`.run` holds what a crawl did,
* :mod:`.nodes` simulates the distributed mode's nodes sharing the hosts of a crawl.

Imports neither Scrapy nor Twisted (numpy, a dependency of scikit-learn, for PageRank).
Not part of the public API: it serves ``tests/test_sim.py``, ``tests/test_distributed_sim.py``
and the benchmarks (``benchmarks/efficiency_sim.py``, ``efficiency_crawl.py``,
``distributed_sim.py``), which import it from here so that no test imports a benchmark.
"""

from .des import (
    STOCK_VARIANTS,
    TWOLEVEL_VARIANTS,
    VARIANTS,
    CrawlRun,
    Fetch,
    simulate,
    simulate_stock,
    simulate_twolevel,
)
from .webgen import generate_paper_web, pagerank, web_stats

__all__ = [
    "STOCK_VARIANTS",
    "TWOLEVEL_VARIANTS",
    "VARIANTS",
    "CrawlRun",
    "Fetch",
    "generate_paper_web",
    "pagerank",
    "simulate",
    "simulate_stock",
    "simulate_twolevel",
    "web_stats",
]
