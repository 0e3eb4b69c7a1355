"""Real webs for the scheduler: real servers serving real documentation sites on loopback.

- :mod:`realweb.corpus`: the 28 sites (Debian documentation packages, ``corpus.json``),
  and the second web's (``corpus2.json``),
  their link graph read from the files as a crawler would follow it, and page quality
  (PageRank of that graph);
- :mod:`realweb.servers`: per-host politeness (rate limit, keep-alive limit, bandwidth
  cap) drawn from a seeded distribution, written as an nginx configuration, and nginx
  started and stopped for each crawl;
- :mod:`realweb.apache`: the second web's server, Apache httpd (latency per request,
  bandwidth, keep-alive limits and timeouts, HTTPS on half the hosts);
- :mod:`realweb.crawl`: the spider and one crawl in a process of its own;
- :mod:`realweb.judge`: the crawl judged from the server's own access log;
- :mod:`realweb.clairvoyant`: the reference schedule that knows every quality, rate and
  size in advance.

``benchmarks/real_servers.py`` runs them.
"""
