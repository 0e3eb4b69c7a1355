"""A seeded generator of the reference study's web: ~500 servers, ~30,000 pages.

The two-level scheduling study this package follows (Cao, Jiang and Singh, *Scheduling Web
Crawl for Better Performance and Quality*, Princeton TR-682-03, 2003) crawled a university
domain. Its results depend on a few properties of that web, which this generator
reproduces (the shape, not the exact numbers):

* **Servers differ in how many requests they serve per connection**: 24% one (HTTP/1.0
  style, ``http10=True``), 66% a hundred (kept alive), the rest uniform in between. The
  shares are exact (``round(share * n_servers)`` servers each), assigned to servers at
  random.
* **Servers differ in speed, with heavy tails**: connection and response times are
  lognormal (defaults: medians 0.2 s, ``time_sigma`` 1.0, the two correlated with
  ``time_correlation`` 0.8 — a slow server is slow to connect too — clipped to
  [5 ms, 10 s]): about one server in four answers in under 100 ms, one in twenty takes
  over a second, a few take several seconds. With equal medians, HTTP/1.1 roughly doubles
  a server's throughput over HTTP/1.0 (one response time per page instead of a connection
  time plus a response time).
* **Servers differ in size, with a heavy tail**: every server has at least one page; the
  others are shared out in proportion to lognormal weights (``pages_sigma`` 1.0): the
  largest servers hold a few percent of the web each, the biggest tenth about 40%.
* **Big servers are the fast ones** (``size_speed_correlation`` 0.9: the correlation of
  the normal deviates of a server's size and of its speed). This is a calibration, not a
  measured fact: with one connection per server, a crawl can end no sooner than its
  slowest big server allows. With sizes and speeds independent (``0``), one server holding
  a few hundred pages at a second each sets the total time of *every* policy at several
  times the ideal (total work / K), and any two crawls hold ~99% of the quality by 30% of
  that time; the reference's results (policies differing at half of the crawl time)
  imply a web where the crawl stays bound by the K connections for most of its length,
  as it is when a domain's big servers are its well-provisioned ones.
* **Links**: every page but a home page gets one *tree* link from an older page of its
  server, chosen in proportion to that page's children + 1 (index pages become hubs);
  this makes every page reachable from its server's home page. Each page also gets a
  Poisson number of further out-links (mean ``links_per_page - 1``) to pages born before
  it, chosen by **preferential attachment** (in proportion to in-degree + 1), which gives
  a power-law in-degree. A share of them stays on the page's server, set so that over the
  whole web ``same_server_links`` (default 90%) of the links are same-server links.
  Pages are born in a random interleaving of the servers, each server's pages in order
  ``0, 1, 2, ...``, so a server's home page is its oldest page.
* **Seeds**: by default the home page of every server, as in a domain crawl started from a
  list of servers. With ``n_seeds`` the home pages of ``n_seeds`` random servers only;
  each other server's home page then gets a link from a page of a server earlier in a
  random order, so every page is still reachable.
* **Quality**: ``"pagerank"`` (:func:`pagerank` of the link graph, ``d = 0.85``) or
  ``"zipf"`` (``1 / rank**a`` with ranks assigned to pages at random, independent of
  servers and links), both normalized to sum to 1.

Stored qualities: :class:`~scrapy_twolevel.testweb.web.PageSpec` qualities must lie in
(0, 1], and the test web's spider turns a quality into a Scrapy priority with
``round(q * 1e6)``. Normalized PageRank values of 30,000 pages are ~3e-5 each, which would
round to priorities of ~30 with many ties, so the stored quality is ``q * quality_scale``:
with the default ``quality_scale="max"`` that is ``q / max(q)`` (the best page has quality
1). Ratios are kept, so metrics renormalize by dividing by the sum of the stored qualities.

Pure module: the standard library's :class:`random.Random` (stable across Python
versions) for every random draw, numpy only for the PageRank power iteration.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Literal

import numpy as np

from ..web import HostSpec, PageSpec, WebSpec, host_address, page_path

__all__ = ["QualityModel", "generate_paper_web", "pagerank", "web_stats"]

QualityModel = Literal["pagerank", "zipf"]

#: Bounds of the drawn connection and response times, in seconds.
MIN_TIME = 0.005
MAX_TIME = 10.0


def pagerank(
    links: Sequence[Sequence[int]],
    n: int | None = None,
    *,
    d: float = 0.85,
    tol: float = 1e-12,
    max_iter: int = 1000,
) -> list[float]:
    """PageRank of a directed graph by power iteration; the values sum to 1.

    ``links[i]`` lists the pages page ``i`` links to (a link listed twice counts twice);
    ``n`` is the number of pages (default ``len(links)``). One step is
    ``r' = (1 - d) / n + d * (sum over in-links of r[src] / outdeg[src] + dangling / n)``:
    the rank of pages without out-links (*dangling* pages) is spread uniformly, so the total
    stays 1. Iterates until the L1 change is below ``tol``; raises ``ValueError`` if that
    takes more than ``max_iter`` steps.
    """
    n = len(links) if n is None else n
    if n < 1:
        raise ValueError(f"pagerank needs n >= 1, got {n}")
    if len(links) > n:
        raise ValueError(f"links has {len(links)} entries but n is {n}")
    if not 0 <= d < 1:
        raise ValueError(f"damping d must be in [0, 1), got {d}")
    outdeg = np.zeros(n, dtype=np.int64)
    outdeg[: len(links)] = [len(targets) for targets in links]
    src = np.repeat(np.arange(n), outdeg)
    dst = np.fromiter((t for targets in links for t in targets), dtype=np.int64, count=len(src))
    if len(dst) and (dst.min() < 0 or dst.max() >= n):
        raise ValueError(f"a link points outside 0..{n - 1}")
    dangling = outdeg == 0
    share = np.zeros(n)
    share[~dangling] = 1.0 / outdeg[~dangling]
    edge_share = share[src]
    rank = np.full(n, 1.0 / n)
    for _ in range(max_iter):
        inflow = np.bincount(dst, weights=rank[src] * edge_share, minlength=n)
        new = (1.0 - d) / n + d * (inflow + rank[dangling].sum() / n)
        new /= new.sum()  # no drift from rounding over many steps
        change = float(np.abs(new - rank).sum())
        rank = new
        if change < tol:
            ranks: list[float] = rank.tolist()
            return ranks
    raise ValueError(f"pagerank did not converge to {tol} in {max_iter} iterations")


def _poisson(rng: random.Random, mean: float) -> int:
    """Knuth's multiplication method: fine for the small means used here."""
    limit = math.exp(-mean)
    k, p = 0, rng.random()
    while p > limit:
        k += 1
        p *= rng.random()
    return k


def _split_pages(size_z: Sequence[float], n_pages: int, sigma: float) -> list[int]:
    """Pages per server: at least 1 each, the rest in proportion to ``exp(sigma * z)``."""
    n_servers = len(size_z)
    weights = [math.exp(sigma * z) for z in size_z]
    total = math.fsum(weights)
    extra = n_pages - n_servers
    shares = [extra * w / total for w in weights]
    counts = [1 + math.floor(s) for s in shares]
    # Largest remainder, ties by server index: the counts sum to n_pages exactly.
    order = sorted(range(n_servers), key=lambda i: (math.floor(shares[i]) - shares[i], i))
    for i in order[: n_pages - sum(counts)]:
        counts[i] += 1
    return counts


def _server_mix(
    rng: random.Random, n_servers: int, http10_share: float, keepalive_share: float, top: int
) -> list[int]:
    """Requests per connection of every server: exact shares, random assignment."""
    n10 = round(http10_share * n_servers)
    n_top = min(round(keepalive_share * n_servers), n_servers - n10)
    middle = n_servers - n10 - n_top
    mix = [1] * n10 + [top] * n_top + [rng.randint(2, top - 1) for _ in range(middle)]
    rng.shuffle(mix)
    return mix


def _times(
    rng: random.Random,
    size_z: float,
    median_c: float,
    median_r: float,
    sigma: float,
    rho: float,
    size_rho: float,
) -> tuple[float, float]:
    """Connection and response time of one server: correlated lognormals.

    The response time's normal deviate has correlation ``-size_rho`` with the server's size
    deviate ``size_z`` (big servers faster when ``size_rho > 0``); the connection time's has
    correlation ``rho`` with the response time's.
    """
    z_resp = -size_rho * size_z + math.sqrt(1.0 - size_rho * size_rho) * rng.gauss(0.0, 1.0)
    z_conn = rho * z_resp + math.sqrt(1.0 - rho * rho) * rng.gauss(0.0, 1.0)

    def clip(x: float) -> float:
        return round(min(max(x, MIN_TIME), MAX_TIME), 4)

    return clip(median_c * math.exp(sigma * z_conn)), clip(median_r * math.exp(sigma * z_resp))


def generate_paper_web(
    n_servers: int = 500,
    n_pages: int = 30_000,
    *,
    seed: int = 0,
    quality: QualityModel = "pagerank",
    quality_scale: Literal["max"] | float = "max",
    same_server_links: float = 0.9,
    links_per_page: float = 8.0,
    pages_sigma: float = 1.0,
    http10_share: float = 0.24,
    keepalive_share: float = 0.66,
    keepalive_max: int = 100,
    connection_median: float = 0.2,
    response_median: float = 0.2,
    time_sigma: float = 1.0,
    time_correlation: float = 0.8,
    size_speed_correlation: float = 0.9,
    zipf_a: float = 1.0,
    damping: float = 0.85,
    n_seeds: int | None = None,
) -> WebSpec:
    """Build the reference study's web (same arguments and ``seed``, same web).

    See the module docstring for the model and what every parameter means. Raises
    ``ValueError`` naming the parameter when one is out of range.
    """
    if n_servers < 1 or n_pages < n_servers:
        raise ValueError(f"need 1 <= n_servers <= n_pages, got {n_servers}, {n_pages}")
    if not 0 <= same_server_links <= 1:
        raise ValueError(f"same_server_links must be in [0, 1], got {same_server_links}")
    if links_per_page < 1:
        raise ValueError(f"links_per_page must be >= 1, got {links_per_page}")
    if not (0 <= http10_share and 0 <= keepalive_share and http10_share + keepalive_share <= 1):
        raise ValueError(
            f"http10_share and keepalive_share must be >= 0 with a sum <= 1, "
            f"got {http10_share}, {keepalive_share}"
        )
    if keepalive_max < 3:
        raise ValueError(f"keepalive_max must be >= 3, got {keepalive_max}")
    if connection_median <= 0 or response_median <= 0 or time_sigma < 0:
        raise ValueError("connection_median and response_median must be > 0, time_sigma >= 0")
    for name, value in (
        ("time_correlation", time_correlation),
        ("size_speed_correlation", size_speed_correlation),
    ):
        if not -1 <= value <= 1:
            raise ValueError(f"{name} must be in [-1, 1], got {value}")
    if quality not in ("pagerank", "zipf"):
        raise ValueError(f"quality must be 'pagerank' or 'zipf', got {quality!r}")
    if n_seeds is not None and not 1 <= n_seeds <= n_servers:
        raise ValueError(f"n_seeds must be in 1..{n_servers} or None, got {n_seeds}")

    rng = random.Random(seed)
    size_z = [rng.gauss(0.0, 1.0) for _ in range(n_servers)]
    counts = _split_pages(size_z, n_pages, pages_sigma)
    mix = _server_mix(rng, n_servers, http10_share, keepalive_share, keepalive_max)
    hosts = []
    for i in range(n_servers):
        conn, resp = _times(
            rng,
            size_z[i],
            connection_median,
            response_median,
            time_sigma,
            time_correlation,
            size_speed_correlation,
        )
        hosts.append(
            HostSpec(
                index=i,
                address=host_address(i),
                connect_delay=conn,
                response_delay=resp,
                max_requests_per_connection=mix[i],
                http10=mix[i] == 1,
            )
        )

    first = [0] * n_servers  # page id of each server's home page (server-major ids)
    for i in range(1, n_servers):
        first[i] = first[i - 1] + counts[i - 1]
    links = _link_graph(rng, counts, first, same_server_links, links_per_page)

    if n_seeds is None:
        seeds = tuple(first)
    else:
        order = list(range(n_servers))
        rng.shuffle(order)
        seeds = tuple(sorted(first[s] for s in order[:n_seeds]))
        for j in range(n_seeds, n_servers):
            source_server = order[rng.randrange(j)]
            source = first[source_server] + rng.randrange(counts[source_server])
            if first[order[j]] not in links[source]:
                links[source].append(first[order[j]])

    if quality == "pagerank":
        values = pagerank(links, n_pages, d=damping)
    else:
        ranks = list(range(1, n_pages + 1))
        rng.shuffle(ranks)
        raw = [r**-zipf_a for r in ranks]
        total = math.fsum(raw)
        values = [v / total for v in raw]
    scale = 1.0 / max(values) if quality_scale == "max" else float(quality_scale)
    stored = [v * scale for v in values]
    if not all(0 < q <= 1 + 1e-12 for q in stored):
        raise ValueError(
            f"quality_scale={quality_scale!r} puts qualities outside (0, 1] "
            f"(range {min(stored):.3g}..{max(stored):.3g})"
        )

    pages = []
    for s in range(n_servers):
        for k in range(counts[s]):
            p = first[s] + k
            pages.append(
                PageSpec(
                    id=p,
                    host=s,
                    path=page_path(k),
                    quality=min(stored[p], 1.0),
                    links=tuple(links[p]),
                )
            )
    return WebSpec(hosts=tuple(hosts), pages=tuple(pages), seeds=seeds)


def _link_graph(
    rng: random.Random,
    counts: list[int],
    first: list[int],
    same_server_links: float,
    links_per_page: float,
) -> list[list[int]]:
    """Tree links plus preferential-attachment links; see the module docstring."""
    n_servers, n_pages = len(counts), sum(counts)
    # Share of the extra links that stays on the server, so the web-wide share is the target.
    tree = n_pages - n_servers
    extra_mean = links_per_page - 1.0
    extra_total = extra_mean * n_pages
    local_share = 1.0
    if extra_total > 0:
        local_share = min(
            max((same_server_links * (tree + extra_total) - tree) / extra_total, 0), 1
        )

    links: list[list[int]] = [[] for _ in range(n_pages)]
    targets: list[set[int]] = [set() for _ in range(n_pages)]
    parents: list[list[int]] = [[] for _ in range(n_servers)]  # urn: page once + once per child
    local_urn: list[list[int]] = [[] for _ in range(n_servers)]  # page once + once per in-link
    global_urn: list[int] = []
    server_of = [s for s in range(n_servers) for _ in range(counts[s])]

    def link(src: int, dst: int) -> None:
        links[src].append(dst)
        targets[src].add(dst)
        local_urn[server_of[dst]].append(dst)
        global_urn.append(dst)

    births = [s for s in range(n_servers) for _ in range(counts[s])]
    rng.shuffle(births)
    born = [0] * n_servers
    debt = 0  # local links that had to go to another server, made up by later ones
    for s in births:
        p = first[s] + born[s]
        born[s] += 1
        if p != first[s]:
            parent = rng.choice(parents[s])
            parents[s].append(parent)
            link(parent, p)
        parents[s].append(p)
        for _ in range(_poisson(rng, extra_mean)):
            local = rng.random() < local_share
            if local and not local_urn[s]:
                local = False  # a server's first page has no sibling yet: owe one local link
                debt += 1
            elif not local and debt and local_urn[s]:
                local = True
                debt -= 1
            urn = local_urn[s] if local else global_urn
            for _attempt in range(8):
                if not urn:
                    break
                target = urn[rng.randrange(len(urn))]
                if (server_of[target] == s) == local and target not in targets[p]:
                    link(p, target)
                    break
        local_urn[s].append(p)
        global_urn.append(p)
    for page_links in links:
        rng.shuffle(page_links)
    return links


def web_stats(web: WebSpec) -> dict[str, float | int]:
    """Summary statistics of a web (for tests, benchmarks and reports)."""
    n_hosts = len(web.hosts)
    per_conn = [h.max_requests_per_connection for h in web.hosts]
    top = max(per_conn)
    n_links = sum(len(p.links) for p in web.pages)
    same = sum(1 for p in web.pages for t in p.links if web.pages[t].host == p.host)
    indeg = [0] * len(web.pages)
    for p in web.pages:
        for t in p.links:
            indeg[t] += 1
    sizes = [0] * n_hosts
    for p in web.pages:
        sizes[p.host] += 1
    conn = sorted(h.connect_delay for h in web.hosts)
    resp = sorted(h.response_delay for h in web.hosts)
    return {
        "servers": n_hosts,
        "pages": len(web.pages),
        "links": n_links,
        "seeds": len(web.seeds),
        "same_server_link_share": same / n_links if n_links else 0.0,
        "http10_share": sum(h.http10 for h in web.hosts) / n_hosts,
        "keepalive_max_share": sum(1 for c in per_conn if c == top and c > 1) / n_hosts,
        "middle_share": sum(1 for c in per_conn if 1 < c < top) / n_hosts,
        "max_pages_per_server": max(sizes),
        "median_pages_per_server": sorted(sizes)[n_hosts // 2],
        "max_in_degree": max(indeg),
        "median_in_degree": sorted(indeg)[len(indeg) // 2],
        "median_connection_time": conn[n_hosts // 2],
        "median_response_time": resp[n_hosts // 2],
        "fast_server_share": sum(1 for r in resp if r < 0.1) / n_hosts,
        "slow_server_share": sum(1 for r in resp if r > 1.0) / n_hosts,
    }
