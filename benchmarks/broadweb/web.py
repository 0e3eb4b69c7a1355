"""The generated web: H hosts ``h<i>.broad.test``, their pages, their links, the pre-load.

Everything follows from ``(hosts, pending, seed)``; nothing is stored per page. Host ``i``
(0-based; host 0 the largest) has a Zipf weight ``w_i = 1 / (i + 1) ** ZIPF_S``:

- **Pre-loaded frontier**: ``k_i = 1 + floor((pending - hosts) * w_i / sum(w))`` start
  pages (pages ``0 .. k_i - 1``), plus one more for the first hosts until the total is
  exactly ``pending``: every host has at least one, and ``k`` never increases with ``i``.
  :func:`start_pages` yields them host-interleaved: page 0 of every host, then page 1 of
  every host that has two, and so on (a list of seeds, as a broad crawl is given), without
  building the list.
- **Host sizes**: ``n_i = PAGES_PER_START * k_i + PAGES_PER_START`` pages, so host sizes are
  Zipf-distributed like ``k`` and the crawl keeps discovering pages it was not given.
- **Links**: ``LINKS_PER_PAGE`` per page, each drawn from a BLAKE2b digest of
  ``(seed, host, page)``: with probability ``CROSS_HOST_SHARE`` to another host (chosen
  with the same Zipf weights, so popular hosts are linked to more), otherwise to the same
  host; the page is uniform over the target host's ``n`` pages, so every link exists.
  Links are absolute URLs (the spider needs no ``urljoin``).
- **Page body**: a few KB of HTML: a title, the links, and one of eight filler paragraphs
  (built once) chosen by the digest.

Pure: no I/O; the server (:mod:`broadweb.server`) and the spider (:mod:`broadweb.crawl`)
both build the same :class:`BroadWeb`.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field

DOMAIN = "broad.test"
#: Zipf exponent of host sizes and of cross-host link targets (Broder et al. and later
#: crawls measured host sizes with an exponent near 1).
ZIPF_S = 1.0
LINKS_PER_PAGE = 15
CROSS_HOST_SHARE = 0.30
#: Host size = this many pages per pre-loaded page, plus as many.
PAGES_PER_START = 4
FILLER_VARIANTS = 8
FILLER_WORDS = 420  # about 3 KB of text

_CROSS_CUT = int(CROSS_HOST_SHARE * 2**32)
_U32 = struct.Struct("<16I")


def host_name(i: int) -> str:
    return f"h{i}.{DOMAIN}"


def _fillers() -> list[bytes]:
    words = (
        "crawl frontier host queue politeness session budget seed link page quality rank "
        "server keep alive connection request response latency throughput scheduler"
    ).split()
    out = []
    for v in range(FILLER_VARIANTS):
        text = " ".join(words[(v * 7 + k * 3) % len(words)] for k in range(FILLER_WORDS))
        out.append(f"<p>{text}</p>\n".encode())
    return out


@dataclass(frozen=True)
class BroadWeb:
    """The web of ``hosts`` hosts with ``pending`` pre-loaded pages; see the module."""

    hosts: int
    pending: int
    seed: int = 0
    starts: list[int] = field(init=False, repr=False, compare=False)
    sizes: list[int] = field(init=False, repr=False, compare=False)
    offsets: list[int] = field(init=False, repr=False, compare=False)
    _cum: list[int] = field(init=False, repr=False, compare=False)
    _key: bytes = field(init=False, repr=False, compare=False)
    _fillers: list[bytes] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 1 <= self.hosts <= self.pending:
            raise ValueError(f"need 1 <= hosts <= pending, got {self.hosts} and {self.pending}")
        weights = [1.0 / (i + 1) ** ZIPF_S for i in range(self.hosts)]
        total = sum(weights)
        spread = self.pending - self.hosts
        starts = [1 + int(spread * w / total) for w in weights]
        for i in range(self.pending - sum(starts)):
            starts[i] += 1
        sizes = [PAGES_PER_START * (k + 1) for k in starts]
        # Cumulative weights scaled to 32 bits: a link's target host is a bisection.
        cum, acc = [], 0.0
        for w in weights:
            acc += w
            cum.append(int(acc / total * 2**32))
        cum[-1] = 2**32
        set_ = object.__setattr__
        set_(self, "starts", starts)
        set_(self, "sizes", sizes)
        set_(self, "offsets", list(itertools.accumulate(sizes, initial=0)))
        set_(self, "_cum", cum)
        set_(self, "_key", hashlib.blake2b(str(self.seed).encode(), digest_size=32).digest())
        set_(self, "_fillers", _fillers())

    @property
    def pages(self) -> int:
        """Pages in the whole web."""
        return self.offsets[-1]

    def index(self, host: int, page: int) -> int:
        """A page's position in ``0 .. pages - 1`` (the server's fetched map)."""
        return self.offsets[host] + page

    def exists(self, host: int, page: int) -> bool:
        return 0 <= host < self.hosts and 0 <= page < self.sizes[host]

    def links(self, host: int, page: int) -> list[tuple[int, int]]:
        """The ``(host, page)`` targets of a page's links."""
        digest = hashlib.blake2b(f"{host}/{page}".encode(), key=self._key).digest()
        draws = _U32.unpack(digest)
        pages = _U32.unpack(hashlib.blake2b(digest, digest_size=64).digest())
        out = []
        for k in range(LINKS_PER_PAGE):
            target = host
            if draws[k] < _CROSS_CUT:
                # The draw is uniform below the cut: rescale it to 32 bits for the host.
                target = bisect.bisect_right(self._cum, draws[k] * 2**32 // _CROSS_CUT)
                target = min(target, self.hosts - 1)
            out.append((target, pages[k] % self.sizes[target]))
        return out

    def body(self, host: int, page: int, port: int) -> bytes:
        """The page's HTML."""
        links = self.links(host, page)
        items = "".join(
            f'<li><a href="http://h{t}.{DOMAIN}:{port}/p/{p}">page {p} of h{t}</a></li>\n'
            for t, p in links
        )
        head = (
            f"<!DOCTYPE html>\n<html><head><title>h{host} page {page}</title></head>\n"
            f"<body><h1>Page {page} of {host_name(host)}</h1>\n<ul>\n{items}</ul>\n"
        )
        filler = self._fillers[(host * 31 + page) % FILLER_VARIANTS]
        return head.encode() + filler + b"</body></html>\n"

    def start_pages(self) -> Iterator[tuple[int, int]]:
        """The pre-loaded ``(host, page)`` pairs, host-interleaved (see the module)."""
        starts = self.starts
        width = self.hosts
        for page in range(starts[0]):
            while starts[width - 1] <= page:
                width -= 1
            for host in range(width):
                yield host, page

    def url(self, host: int, page: int, port: int) -> str:
        return f"http://h{host}.{DOMAIN}:{port}/p/{page}"
