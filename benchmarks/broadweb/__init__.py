"""A fast generated web for broad crawls: many hosts on one loopback port.

- :mod:`broadweb.web`: the web, all of it computed from ``(hosts, pending, seed)``: Zipf
  host sizes, pages of a few KB with 15 links (30% to other hosts), the pre-loaded
  frontier;
- :mod:`broadweb.server`: one asyncio process serving every host ``h<i>.broad.test`` on one
  port (the host is read from the ``Host`` header), counting requests and politeness per
  host;
- :mod:`broadweb.crawl`: the spider, the wildcard resolver (every ``*.broad.test`` is
  127.0.0.1) and one crawl in a process of its own;
- :mod:`broadweb.measure`: what the driver reads about a running crawl (``/proc``, the
  ``JOBDIR``, py-spy profiles).

The server is the load, not the subject. ``benchmarks/broad_crawl.py`` runs them.
"""
