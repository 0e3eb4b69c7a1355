"""A pure simulation of crawls: the reference study's web and a discrete-event crawl.

* :mod:`.webgen` generates the reference study's web (500 servers, 30,000 pages) as a
  :class:`~scrapy_twolevel.testweb.web.WebSpec`, so the same web can be served by the test
  web server for a real crawl,
* :mod:`.des` crawls a web on a virtual clock, driving the real two-level frontier or a
  model of Scrapy's stock scheduler and downloader.

Imports neither Scrapy nor Twisted (numpy for PageRank). It serves the benchmarks and
``tests/test_sim.py`` only, so it lives here, beside them, and is not installed with
``scrapy_twolevel`` (which users install without numpy): run the benchmarks as
``python benchmarks/<script>.py``, which puts ``benchmarks/`` on ``sys.path``; pytest adds it
through ``pythonpath`` in ``pyproject.toml``.
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
