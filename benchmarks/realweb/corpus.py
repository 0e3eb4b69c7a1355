"""The real web's pages: 28 documentation sites from Debian packages, their links, quality.

``corpus.json`` lists the sites (chosen for a spread of sizes, 12 to 1,936 pages, and of
generators: Sphinx, DocBook, texinfo, gtk-doc, hand-made HTML). Each is served by nginx
from its package's HTML folder, unchanged. The link graph is read from the files the way
:mod:`realweb.spider` follows links on the served pages (``a`` and ``area`` hrefs, parsed
with lxml as Scrapy's selectors do, resolved against the page's URL, fragment and query
dropped, a path ending in ``/`` read as its ``index.html``, same site only, HTML pages
only), so every page the crawl can reach has a quality and nothing else does.

``corpus2.json`` is the second web's (``real_servers.py --web apache``): 28 other
documentation sites from Debian packages, 5 to 3,805 pages each (18,590 in all, 2.5 KB to
3.4 MB a page), from 14 generators (BoostBook, gi-docgen, pydoctor, Doxygen, ocamldoc,
LaTeX2HTML, javadoc, texinfo, pod2html, YARD, MkDocs, hand-made HTML...). Where a site's
``index.html`` builds its menu in JavaScript (Doxygen 1.9's), its start page is one that
links to the rest (``annotated.html``).

Quality is PageRank over the union of the sites' graphs (damping 0.85, uniform
teleport): a page's share of the whole web's importance, so a large site holds more of
the total than a small one, and the qualities of the reachable pages sum to 1.

Links that lead nowhere (Debian rewrote some cross-references to absolute file paths,
removed ``changelog.html``, or never shipped sqlite's ``matrix/`` pages) are left to the
crawl: it fetches them and gets 404, as a crawler of the real sites would.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlsplit

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus.json"
#: The second web's sites (served by Apache, :mod:`realweb.apache`).
CORPUS2 = HERE / "corpus2.json"
HTML_SUFFIXES = (".html", ".htm")
DAMPING = 0.85


@dataclass(frozen=True)
class Site:
    """One documentation site: its name, Debian package, served folder and start page."""

    name: str
    package: str
    root: str
    index: str


def load_sites(path: Path = CORPUS) -> list[Site]:
    rows = json.loads(path.read_text())
    return [Site(s["name"], s["package"], s["root"], s["index"]) for s in rows]


def packages(sites: list[Site]) -> list[str]:
    return sorted({s.package for s in sites})


def missing(sites: list[Site]) -> list[Site]:
    """The sites whose start page is not on this machine (their package not installed)."""
    return [s for s in sites if not Path(s.root, s.index).is_file()]


def canonical_path(url_path: str) -> str | None:
    """The site-relative path a crawler requests for a URL path, or ``None`` if the link is
    not to an HTML page (``dir/`` is ``dir/index.html``)."""
    path = posixpath.normpath("/" + unquote(url_path)) + ("/" if url_path.endswith("/") else "")
    if path.endswith("/"):
        path += "index.html"
    if not path.lower().endswith(HTML_SUFFIXES):
        return None
    return path.lstrip("/")


def page_links(data: bytes, page: str) -> list[str]:
    """Site-relative paths of the HTML pages ``page``'s body links to (same site only)."""
    import lxml.html

    try:
        doc = lxml.html.fromstring(data)
    except Exception:  # empty, or not HTML
        return []
    base = "http://site/" + page
    found = []
    for href in doc.xpath("//a/@href|//area/@href"):
        try:
            parts = urlsplit(urljoin(base, href.strip()))
        except ValueError:
            continue
        if parts.scheme == "http" and parts.netloc == "site":
            path = canonical_path(parts.path)
            if path is not None:
                found.append(path)
    return found


@dataclass
class SiteGraph:
    """A site's reachable pages (BFS from its start page), their links and sizes."""

    site: Site
    pages: list[str]
    links: dict[str, list[str]]
    sizes: dict[str, int]


def read_site(site: Site) -> SiteGraph:
    """BFS over the site's files from its start page, as the crawl will follow links."""
    root = Path(site.root)
    start = canonical_path(site.index) or site.index
    order, links, sizes = [start], {}, {}
    seen = {start}
    for page in order:
        file = root / page
        data = file.read_bytes()
        sizes[page] = len(data)
        targets = [t for t in page_links(data, page) if (root / t).is_file()]
        links[page] = sorted(set(targets))
        for target in links[page]:
            if target not in seen:
                seen.add(target)
                order.append(target)
    return SiteGraph(site, order, links, sizes)


def pagerank(graphs: list[SiteGraph], damping: float = DAMPING) -> dict[tuple[str, str], float]:
    """``(site, page) -> PageRank`` over the union of the graphs; the values sum to 1.

    Power iteration; a page without out-links spreads its rank uniformly (dangling
    nodes), as the teleport does.
    """
    import numpy as np

    nodes = [(g.site.name, p) for g in graphs for p in g.pages]
    index = {node: i for i, node in enumerate(nodes)}
    n = len(nodes)
    src, dst = [], []
    for g in graphs:
        for page, targets in g.links.items():
            for t in targets:
                src.append(index[(g.site.name, page)])
                dst.append(index[(g.site.name, t)])
    src_a, dst_a = np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)
    out_degree = np.bincount(src_a, minlength=n).astype(float)
    dangling = out_degree == 0
    rank = np.full(n, 1.0 / n)
    for _ in range(200):
        share = np.where(dangling, 0.0, rank / np.maximum(out_degree, 1.0))
        new = np.bincount(dst_a, weights=share[src_a], minlength=n) * damping
        new += (1.0 - damping + damping * rank[dangling].sum()) / n
        if np.abs(new - rank).sum() < 1e-12:
            rank = new
            break
        rank = new
    return {node: float(rank[i]) for node, i in index.items()}


def build(workdir: Path, sites: list[Site]) -> dict[str, Any]:
    """The corpus's graph and qualities, cached in ``workdir`` (reading 220 MB of HTML
    takes a minute): ``{"sites": {name: {"pages": {path: [quality, size, [links]]}}}}``."""
    key = hashlib.sha256(json.dumps([s.__dict__ for s in sites]).encode()).hexdigest()[:12]
    cache = workdir / f"corpus-{key}.json"
    if cache.exists():
        return json.loads(cache.read_text())
    graphs = [read_site(s) for s in sites]
    ranks = pagerank(graphs)
    data = {
        "sites": {
            g.site.name: {
                "index": g.pages[0],
                "pages": {p: [ranks[(g.site.name, p)], g.sizes[p], g.links[p]] for p in g.pages},
            }
            for g in graphs
        }
    }
    workdir.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(data))
    return data
