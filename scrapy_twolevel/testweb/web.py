"""The shape of a fake multi-host web: hosts, pages, links and qualities.

Pure data and a deterministic generator; it imports neither Scrapy nor Twisted so that
benchmarks, tests and the server can share one description of the web (and pass it to a
subprocess as JSON).

Each host gets its own loopback address (``127.0.{1 + i // 250}.{1 + i % 250}``), so Scrapy
sees distinct hostnames and therefore distinct download slots, while ``127.0.0.1`` stays free
for the server's control endpoint. The server tells hosts apart by the address a connection
arrived on, so a host may also be addressed by names (``h3.testweb.test`` and aliases, see
:func:`host_name`) that :mod:`.resolver` maps to its address inside a crawl.

Besides plain pages, a web can hold hosts that fail (:data:`FAILURES`), hosts that refuse
requests that come too fast (429 or 503 with ``Retry-After``), hosts that go down for a
while in the middle of a crawl, and pages that redirect to another host (``/r/{k}``), so a
scheduler can be tested against each.
"""

from __future__ import annotations

import json
import math
import random
import re
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from typing import Any

from ..frontier.host_keys import is_ip

__all__ = [
    "BROKEN_PATH",
    "CONTROL_ADDRESS",
    "FAILURES",
    "SLOW_BODY_PATH",
    "SLOW_BODY_SECONDS",
    "UNAVAILABLE_PATH",
    "HostProfile",
    "HostSpec",
    "PageSpec",
    "WebSpec",
    "generate_web",
    "host_address",
    "host_name",
    "page_path",
]

#: The address of the control endpoint (``/_stats``); never used by a host.
CONTROL_ADDRESS = "127.0.0.1"
#: A path on any host whose request the server aborts (TCP RST): one broken URL on a host
#: that serves its other pages.
BROKEN_PATH = "/_broken"
#: A path on any host whose response headers come at once and its body
#: ``SLOW_BODY_SECONDS`` later (a large page over a slow link, as a client sees it).
SLOW_BODY_PATH = "/_slow_body"
SLOW_BODY_SECONDS = 1.5
#: A path on any host that always answers 503 without ``Retry-After``: an error page that
#: looks like a rate limit's refusal.
UNAVAILABLE_PATH = "/_unavailable"
#: Paths on any host under this prefix are files (``/_files/<name>``): 200, a few bytes of
#: ``application/octet-stream`` (a 2x2 PNG for a name ending ``.png``), no links; what a
#: Files or Images pipeline downloads.
FILES_PREFIX = "/_files/"
#: A path on any host: a sitemap (sitemaps.org XML) listing every page of the host.
SITEMAP_PATH = "/sitemap.xml"
#: What a host's robots.txt may answer (``HostLimits.robots_status``).
ROBOTS_STATUSES = (200, 404, 429, 500, 503)

#: How a host can fail, as the server simulates it:
#:
#: * ``"hang"``: accepts connections and reads requests but never answers; a connection
#:   stays open until the client gives up or the server stops (no idle timeout);
#: * ``"refuse"``: nothing listens on the host's address (the server holds the address and
#:   port bound but not listening), so every connection is refused at once and the server
#:   sees nothing;
#: * ``"reset"``: accepts, then aborts the connection (TCP RST) as soon as a request arrives.
FAILURES = ("hang", "refuse", "reset")

#: Suffix of generated host names; ``.test`` is reserved (RFC 2606), so a name that escaped
#: the test resolver could never reach a real host.
_NAME_SUFFIX = ".testweb.test"

_MAX_HOSTS = 250 * 254  # third octet 1..254, fourth octet 1..250
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$")


#: The statuses a rate-limited host refuses with.
REFUSAL_STATUSES = (429, 503)


@dataclass(frozen=True, slots=True, kw_only=True)
class HostLimits:
    """What a host tells a crawler beyond its pages: a rate it enforces by refusing, an
    outage, a robots.txt ``Crawl-delay``. Shared by :class:`HostProfile` and
    :class:`HostSpec` (keyword-only, after their own fields)."""

    #: Seconds the host wants between two requests it accepts; a request that comes sooner
    #: gets ``refusal_status`` (429 or 503), with ``Retry-After`` (whole seconds until it
    #: would be accepted, at least 1) if ``retry_after``. 0: no limit.
    min_interval: float = 0.0
    refusal_status: int = 429
    retry_after: bool = True
    #: The host goes down ``outage_start`` seconds after its first request, for
    #: ``outage_length`` seconds: it resets every connection as a request arrives.
    outage_start: float = 0.0
    outage_length: float = 0.0
    #: ``Crawl-delay`` in the host's robots.txt (0: none).
    crawl_delay: float = 0.0
    #: The status robots.txt answers (one of ``ROBOTS_STATUSES``); with
    #: ``robots_retry_after`` > 0, only its first request gets it, with that
    #: ``Retry-After`` in seconds, and later ones the robots.txt (a server busy for a while).
    robots_status: int = 200
    robots_retry_after: int = 0

    def check_limits(self, what: str) -> None:
        if min(self.min_interval, self.outage_start, self.outage_length, self.crawl_delay) < 0:
            raise ValueError(f"{what}: min_interval, the outage and crawl_delay must be >= 0")
        if self.refusal_status not in REFUSAL_STATUSES:
            raise ValueError(f"{what}: refusal_status must be one of {REFUSAL_STATUSES}")
        if self.robots_status not in ROBOTS_STATUSES:
            raise ValueError(f"{what}: robots_status must be one of {ROBOTS_STATUSES}")
        if self.robots_retry_after < 0:
            raise ValueError(f"{what}: robots_retry_after must be >= 0")

    def limits(self) -> dict[str, Any]:
        """These fields, to copy from a profile to a spec."""
        return {f.name: getattr(self, f.name) for f in fields(HostLimits)}


def _check_failure(failure: str | None, what: str) -> None:
    if failure is not None and failure not in FAILURES:
        raise ValueError(f"{what}: failure must be None or one of {FAILURES}, got {failure!r}")


def host_address(index: int) -> str:
    """Loopback address of host ``index``; one address per host so each is its own slot."""
    if not 0 <= index < _MAX_HOSTS:
        raise ValueError(f"host index {index} out of range 0..{_MAX_HOSTS - 1}")
    return f"127.0.{1 + index // 250}.{1 + index % 250}"


def host_name(index: int, alias: int = 0) -> str:
    """Name of host ``index`` in a web generated with ``hostnames=True``.

    ``alias=0`` is the host's own name (``h3.testweb.test``); ``alias=j`` its ``j``-th alias
    (``h3-a1.testweb.test``), another name for the same address.
    """
    if index < 0 or alias < 0:
        raise ValueError(f"index and alias must be >= 0, got {index}, {alias}")
    return f"h{index}{f'-a{alias}' if alias else ''}{_NAME_SUFFIX}"


def page_path(k: int) -> str:
    """Path of the ``k``-th page of a host: ``/`` for the home page, ``/p/{k}`` otherwise."""
    return "/" if k == 0 else f"/p/{k}"


@dataclass(frozen=True, slots=True)
class HostProfile(HostLimits):
    """How a host behaves, given to :func:`generate_web` to make a test's answer certain.

    Page quality on the host is ``quality_scale * u`` with ``u`` uniform in [0.5, 1], so two
    hosts whose scales differ by more than a factor of two have disjoint quality ranges.
    ``failure`` (one of :data:`FAILURES`) makes the host fail; the other fields then only
    matter for what a crawler sees before the failure.
    """

    connect_delay: float = 0.01
    response_delay: float = 0.01
    max_requests_per_connection: int = 100
    http10: bool = False
    quality_scale: float = 1.0
    failure: str | None = None

    def __post_init__(self) -> None:
        _check_failure(self.failure, "HostProfile")
        self.check_limits("HostProfile")
        if self.connect_delay < 0 or self.response_delay < 0:
            raise ValueError(f"delays must be >= 0, got {self!r}")
        if self.max_requests_per_connection < 1:
            raise ValueError(
                f"max_requests_per_connection must be >= 1, got {self.max_requests_per_connection}"
            )
        if self.http10 and self.max_requests_per_connection != 1:
            raise ValueError("http10=True implies max_requests_per_connection=1")
        if not 0 < self.quality_scale <= 1:
            raise ValueError(f"quality_scale must be in (0, 1], got {self.quality_scale}")


@dataclass(frozen=True, slots=True)
class HostSpec(HostLimits):
    """One host of the test web and the network behaviour the server simulates for it."""

    index: int
    address: str
    #: Extra seconds before the first response on each new connection (TCP/TLS set-up cost).
    connect_delay: float
    #: Seconds before every response.
    response_delay: float
    #: The server closes the connection after this many responses; 1 is HTTP/1.0 style.
    max_requests_per_connection: int
    #: Answer with an ``HTTP/1.0`` status line and close after every response.
    http10: bool
    #: None for a working host, else how it fails (one of :data:`FAILURES`).
    failure: str | None = None
    #: The name URLs use for this host instead of its address (None: the address itself);
    #: a crawl needs :class:`~scrapy_twolevel.testweb.resolver.TestWebResolver` to resolve it.
    hostname: str | None = None
    #: More names for the same address (needs ``hostname``): one server host that a crawler
    #: keying hosts by name sees as several, and by IP as one.
    aliases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.http10 and self.max_requests_per_connection != 1:
            raise ValueError(f"host {self.index}: http10 implies max_requests_per_connection=1")
        if self.max_requests_per_connection < 1:
            raise ValueError(f"host {self.index}: max_requests_per_connection must be >= 1")
        _check_failure(self.failure, f"host {self.index}")
        self.check_limits(f"host {self.index}")
        if self.aliases and self.hostname is None:
            raise ValueError(f"host {self.index}: aliases need a hostname")
        for name in self.names if self.hostname is not None else ():
            if not _NAME.match(name) or is_ip(name):
                raise ValueError(
                    f"host {self.index}: {name!r} is not a lower-case DNS name (IPs go in address)"
                )

    @property
    def names(self) -> tuple[str, ...]:
        """Every name URLs may use for this host: hostname and aliases, else the address."""
        return (self.hostname, *self.aliases) if self.hostname is not None else (self.address,)

    @property
    def fetchable(self) -> bool:
        """Whether the host answers at all (it has no :data:`FAILURES` kind)."""
        return self.failure is None


@dataclass(frozen=True, slots=True)
class PageSpec:
    """One page: where it lives, how good it is, and which pages (by id) it links to.

    A page with ``redirect_to`` set answers ``301 Moved Permanently`` with the absolute URL of
    that page in ``Location`` (and has no links of its own); its ``quality`` is what a link
    to it announces, normally the quality of the page it leads to.
    """

    id: int
    host: int
    path: str
    quality: float
    links: tuple[int, ...]
    redirect_to: int | None = None


@dataclass(frozen=True)
class WebSpec:
    """A whole test web. Page ids are indexes into ``pages``; ``seeds`` are page ids."""

    hosts: tuple[HostSpec, ...]
    pages: tuple[PageSpec, ...]
    seeds: tuple[int, ...]
    _by_address_path: dict[tuple[str, str], PageSpec] = field(init=False, repr=False, compare=False)
    _by_address: dict[str, HostSpec] = field(init=False, repr=False, compare=False)
    _by_name: dict[str, HostSpec] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for i, host in enumerate(self.hosts):
            if host.index != i:
                raise ValueError(f"hosts[{i}].index is {host.index}, expected {i}")
        for i, page in enumerate(self.pages):
            if page.id != i:
                raise ValueError(f"pages[{i}].id is {page.id}, expected {i}")
            if not 0 <= page.host < len(self.hosts):
                raise ValueError(f"page {i} is on unknown host {page.host}")
            if any(not 0 <= link < len(self.pages) for link in page.links):
                raise ValueError(f"page {i} links to an unknown page")
            if page.redirect_to is not None:
                if not 0 <= page.redirect_to < len(self.pages):
                    raise ValueError(f"page {i} redirects to an unknown page")
                if page.links:
                    raise ValueError(f"page {i} redirects, so it cannot have links")
        if any(not 0 <= s < len(self.pages) for s in self.seeds):
            raise ValueError("a seed is not a page id")
        by_address = {h.address: h for h in self.hosts}
        if len(by_address) != len(self.hosts) or CONTROL_ADDRESS in by_address:
            raise ValueError(f"host addresses must be unique and differ from {CONTROL_ADDRESS}")
        by_path = {(self.hosts[p.host].address, p.path): p for p in self.pages}
        if len(by_path) != len(self.pages):
            raise ValueError("two pages share a host and a path")
        by_name = {n: h for h in self.hosts if h.hostname is not None for n in h.names}
        if len(by_name) != sum(len(h.names) for h in self.hosts if h.hostname is not None):
            raise ValueError("two hosts share a name")
        object.__setattr__(self, "_by_address", by_address)
        object.__setattr__(self, "_by_address_path", by_path)
        object.__setattr__(self, "_by_name", by_name)

    def url(self, page_id: int, port: int) -> str:
        """Absolute URL of a page when the server listens on ``port``.

        A host with aliases spreads its pages over its names: page ``i`` uses
        ``names[i % len(names)]``, so each page still has exactly one URL.
        """
        page = self.pages[page_id]
        names = self.hosts[page.host].names
        return f"http://{names[page_id % len(names)]}:{port}{page.path}"

    def _walk(self, *, include_failing: bool) -> set[int]:
        seen: set[int] = set()
        todo: deque[int] = deque()

        def visit(page_id: int) -> None:
            if page_id in seen:
                return
            fetchable = self.hosts[self.pages[page_id].host].fetchable
            if fetchable or include_failing:
                seen.add(page_id)
            if fetchable:  # a failing host's page is never fetched: nothing to follow
                todo.append(page_id)

        for s in self.seeds:
            visit(s)
        while todo:
            page = self.pages[todo.popleft()]
            for target in page.links if page.redirect_to is None else (page.redirect_to,):
                visit(target)
        return seen

    def reachable(self) -> set[int]:
        """Page ids a full crawl fetches: what the server answers, reached from the seeds.

        It follows links, and redirects as Scrapy's RedirectMiddleware does (the redirecting
        page and its target are both in). Pages on failing hosts are left out and their links
        are not followed: nobody can read them. Without failures, every linked page is in.
        """
        return self._walk(include_failing=False)

    def linked(self) -> set[int]:
        """Page ids a full crawl requests: :meth:`reachable` plus the pages on failing hosts
        that reachable pages link or redirect to (each is tried, and fails)."""
        return self._walk(include_failing=True)

    @property
    def uses_hostnames(self) -> bool:
        """Whether some URL names a host instead of its address (a crawl needs a resolver)."""
        return bool(self._by_name)

    def hosts_map(self) -> dict[str, str]:
        """Every host name and alias -> its address: what the test resolver answers."""
        return {name: host.address for name, host in self._by_name.items()}

    def host_by_name(self, name: str) -> HostSpec | None:
        """The host a URL's hostname (a name, an alias or an address) designates, or None."""
        return self._by_name.get(name) or self._by_address.get(name)

    def host_by_address(self, address: str) -> HostSpec | None:
        """The host listening on ``address``, or None (e.g. for the control address)."""
        return self._by_address.get(address)

    def page_by_address_path(self, address: str, path: str) -> PageSpec | None:
        """The page served at ``path`` on the host with ``address``, or None (a 404)."""
        return self._by_address_path.get((address, path))

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-able dict (lists instead of tuples).

        Fields left at their default (no failure, no name, no redirect) are omitted, so a
        web that uses none of them has the same JSON as before they existed.
        """
        return {
            "hosts": [_asdict_without_defaults(h) for h in self.hosts],
            "pages": [_asdict_without_defaults(p) for p in self.pages],
            "seeds": list(self.seeds),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WebSpec:
        """Inverse of :meth:`to_dict`."""
        return cls(
            hosts=tuple(
                HostSpec(**{**h, "aliases": tuple(h.get("aliases", ()))}) for h in data["hosts"]
            ),
            pages=tuple(
                PageSpec(
                    id=p["id"],
                    host=p["host"],
                    path=p["path"],
                    quality=p["quality"],
                    links=tuple(p["links"]),
                    redirect_to=p.get("redirect_to"),
                )
                for p in data["pages"]
            ),
            seeds=tuple(data["seeds"]),
        )

    def to_json(self) -> str:
        """JSON text, so a web can be handed to a server or crawl in another process."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> WebSpec:
        """Inverse of :meth:`to_json`."""
        return cls.from_dict(json.loads(text))


def _asdict_without_defaults(spec: HostSpec | PageSpec) -> dict[str, Any]:
    data = asdict(spec)
    for f in fields(spec):
        if f.default is not MISSING and data[f.name] == f.default:
            del data[f.name]
        elif isinstance(data[f.name], tuple):
            data[f.name] = list(data[f.name])
    return data


def _default_profile(rng: random.Random) -> HostProfile:
    """A realistic mix, kept fast: a 20x30 web crawls in seconds.

    ~60% fast hosts (5-20 ms per response), the rest slow (50-200 ms); about a quarter
    HTTP/1.0 style (one request per connection), the others keep-alive with 5..100 requests
    per connection; connection set-up 5-100 ms.
    """
    fast = rng.random() < 0.6
    response_delay = rng.uniform(0.005, 0.02) if fast else rng.uniform(0.05, 0.2)
    connect_delay = rng.uniform(0.005, 0.1)
    http10 = rng.random() < 0.25
    max_requests = 1 if http10 else rng.randint(5, 100)
    quality_scale = rng.uniform(0.2, 1.0)
    return HostProfile(
        connect_delay=round(connect_delay, 4),
        response_delay=round(response_delay, 4),
        max_requests_per_connection=max_requests,
        http10=http10,
        quality_scale=round(quality_scale, 4),
    )


def generate_web(
    n_hosts: int = 20,
    pages_per_host: int = 30,
    *,
    seed: int = 0,
    same_host_links: float = 0.9,
    links_per_page: int = 5,
    n_seeds: int | None = None,
    host_profiles: Sequence[HostProfile] | Mapping[int, HostProfile] | None = None,
    failures: Mapping[int, str] | None = None,
    redirects: int = 0,
    redirect_hops: int = 1,
    hostnames: bool = False,
    aliases: Mapping[int, int] | None = None,
) -> WebSpec:
    """Build a deterministic random web (same ``seed``, same web).

    Reachability is guaranteed by construction, not by luck:

    * within a host, page ``k`` links to page ``k + 1`` (a chain from ``/``);
    * seeds are the home pages of the first ``n_seeds`` hosts in a random host order
      (default: a quarter of the hosts, at least one);
    * every later host in that order gets one link to its home page from a random page of
      a host earlier in the order, so each host's home page, and with it the whole chain,
      is reachable.

    The remaining link slots are filled so that, over the whole web, the fraction of
    same-host links is as close to ``same_host_links`` as the forced links allow.

    ``host_profiles`` sets every host's behaviour (a sequence of ``n_hosts`` profiles) or
    overrides some hosts (a mapping index -> profile); the others get random default
    profiles. Overriding profiles does not change the link structure for a given seed.

    ``failures`` (index -> one of :data:`FAILURES`) makes those hosts fail, keeping the rest
    of their profile. Failures change no link either: a host entered only through a failing
    one becomes unreachable, and :meth:`WebSpec.reachable` says so.

    ``redirects=N`` adds N redirect pages at the end of ``pages`` (ids from
    ``n_hosts * pages_per_host``): redirect ``k`` lives at ``/r/{k}`` on a random working
    host, is linked from a random reachable page, and answers 301 to a random page of
    another working host. With ``redirect_hops=H`` it is a chain of H redirects (``/r/{k}``,
    then ``/r/{k}/1`` ... on hosts that differ hop to hop). Their randomness comes from a
    generator of their own, so ``redirects=0`` gives the same web as before they existed.

    ``hostnames=True`` addresses host ``i`` as :func:`host_name(i) <host_name>` in URLs;
    ``aliases`` (index -> count) gives those hosts that many more names for the same
    address, and their pages are spread over the names (see :meth:`WebSpec.url`).
    """
    if n_hosts < 1 or pages_per_host < 1:
        raise ValueError(
            f"need n_hosts >= 1 and pages_per_host >= 1, got {n_hosts}, {pages_per_host}"
        )
    if n_hosts > _MAX_HOSTS:
        raise ValueError(f"n_hosts must be <= {_MAX_HOSTS}, got {n_hosts}")
    if not 0 <= same_host_links <= 1:
        raise ValueError(f"same_host_links must be in [0, 1], got {same_host_links}")
    if links_per_page < 2:
        raise ValueError(f"links_per_page must be >= 2 (chain + entry link), got {links_per_page}")
    if n_seeds is None:
        n_seeds = max(1, math.ceil(n_hosts / 4))
    if not 1 <= n_seeds <= n_hosts:
        raise ValueError(f"n_seeds must be in 1..{n_hosts}, got {n_seeds}")
    if isinstance(host_profiles, Sequence) and len(host_profiles) != n_hosts:
        raise ValueError(f"host_profiles has {len(host_profiles)} entries, expected {n_hosts}")
    if redirects < 0 or redirect_hops < 1:
        raise ValueError(
            f"need redirects >= 0 and redirect_hops >= 1, got {redirects}, {redirect_hops}"
        )
    if aliases and not hostnames:
        raise ValueError("aliases need hostnames=True (an address has no aliases)")
    for what, mapping in (("failures", failures), ("aliases", aliases)):
        for index in mapping or {}:
            if not 0 <= index < n_hosts:
                raise ValueError(f"{what} key {index} out of range 0..{n_hosts - 1}")
    if any(count < 1 for count in (aliases or {}).values()):
        raise ValueError(f"aliases counts must be >= 1, got {dict(aliases or {})}")

    rng = random.Random(seed)
    # Draw every default profile even when overridden, so overrides leave links unchanged.
    profiles = [_default_profile(rng) for _ in range(n_hosts)]
    if isinstance(host_profiles, Mapping):
        for index, profile in host_profiles.items():
            if not 0 <= index < n_hosts:
                raise ValueError(f"host_profiles key {index} out of range 0..{n_hosts - 1}")
            profiles[index] = profile
    elif host_profiles is not None:
        profiles = list(host_profiles)
    for index, failure in (failures or {}).items():
        _check_failure(failure, f"failures[{index}]")
        profiles[index] = replace(profiles[index], failure=failure)

    hosts = tuple(
        HostSpec(
            index=i,
            address=host_address(i),
            connect_delay=p.connect_delay,
            response_delay=p.response_delay,
            max_requests_per_connection=p.max_requests_per_connection,
            http10=p.http10,
            failure=p.failure,
            **p.limits(),
            hostname=host_name(i) if hostnames else None,
            aliases=tuple(host_name(i, j) for j in range(1, (aliases or {}).get(i, 0) + 1)),
        )
        for i, p in enumerate(profiles)
    )

    def pid(host: int, k: int) -> int:
        return host * pages_per_host + k

    n_pages = n_hosts * pages_per_host
    links: list[list[int]] = [[] for _ in range(n_pages)]
    # Forced links: the chain inside each host ...
    for h in range(n_hosts):
        for k in range(pages_per_host - 1):
            links[pid(h, k)].append(pid(h, k + 1))
    forced_same = n_hosts * (pages_per_host - 1)
    # ... and one entry link into each non-seed host.
    order = list(range(n_hosts))
    rng.shuffle(order)
    seeds = tuple(sorted(pid(h, 0) for h in order[:n_seeds]))
    for j in range(n_seeds, n_hosts):
        for _ in range(100):  # find a page with a free slot; the chain leaves most pages one
            src = pid(rng.choice(order[:j]), rng.randrange(pages_per_host))
            if len(links[src]) < links_per_page:
                break
        links[src].append(pid(order[j], 0))

    # Free slots: choose exactly enough of them to be same-host to hit the target fraction.
    slots = [(p, s) for p in range(n_pages) for s in range(links_per_page - len(links[p]))]
    if n_pages == 1:
        slots = []  # a lone page has nothing to link to
    total = sum(len(x) for x in links) + len(slots)
    want_same = round(same_host_links * total) - forced_same
    if n_hosts == 1:
        want_same = len(slots)
    if pages_per_host == 1:
        want_same = 0
    want_same = min(max(want_same, 0), len(slots))
    same_slots = set(rng.sample(range(len(slots)), want_same))
    for i, (p, _) in enumerate(slots):
        h, k = divmod(p, pages_per_host)
        if i in same_slots:
            # any other page of the same host
            k2 = rng.randrange(pages_per_host - 1)
            target = pid(h, k2 if k2 < k else k2 + 1)
        else:
            h2 = rng.randrange(n_hosts - 1)
            target = pid(h2 if h2 < h else h2 + 1, rng.randrange(pages_per_host))
        links[p].append(target)

    pages = []
    for p in range(n_pages):
        h, k = divmod(p, pages_per_host)
        quality = max(round(profiles[h].quality_scale * rng.uniform(0.5, 1.0), 6), 1e-6)
        page_links = links[p]
        rng.shuffle(page_links)
        pages.append(
            PageSpec(id=p, host=h, path=page_path(k), quality=quality, links=tuple(page_links))
        )
    if redirects:
        _add_redirects(hosts, pages, seeds, pages_per_host, redirects, redirect_hops, seed)
    return WebSpec(hosts=hosts, pages=tuple(pages), seeds=seeds)


def _add_redirects(
    hosts: tuple[HostSpec, ...],
    pages: list[PageSpec],
    seeds: tuple[int, ...],
    pages_per_host: int,
    redirects: int,
    hops: int,
    seed: int,
) -> None:
    """Append ``redirects`` chains of ``hops`` redirect pages to ``pages``, each linked once.

    Draws only from its own generator (seeded from ``seed``), after the plain web is built.
    """
    rng = random.Random(f"scrapy_twolevel.testweb.web.redirects:{seed}")
    working = [h.index for h in hosts if h.failure is None]
    if len(working) < 2:
        raise ValueError(f"redirects need two working hosts (they cross hosts), got {len(working)}")
    n_plain = len(pages)
    # Linked from pages a crawl reaches anyway, so every redirect is reached too.
    sources = sorted(WebSpec(hosts, tuple(pages), seeds).reachable()) or list(range(n_plain))
    for k in range(redirects):
        chain = [rng.choice(working)]
        for _ in range(hops - 1):
            chain.append(rng.choice([h for h in working if h != chain[-1]]))
        target_host = rng.choice([h for h in working if h != chain[-1]])
        target = target_host * pages_per_host + rng.randrange(pages_per_host)
        first = len(pages)
        for j, host in enumerate(chain):
            pages.append(
                PageSpec(
                    id=first + j,
                    host=host,
                    path=f"/r/{k}" if j == 0 else f"/r/{k}/{j}",
                    quality=pages[target].quality,
                    links=(),
                    redirect_to=first + j + 1 if j + 1 < hops else target,
                )
            )
        linker = pages[rng.choice(sources)]
        links = list(linker.links)
        links.insert(rng.randrange(len(links) + 1), first)
        pages[linker.id] = replace(linker, links=tuple(links))


def quality_to_priority(quality: float) -> int:
    """Request priority for a page of ``quality`` in (0, 1].

    Scrapy priorities are integers and the scheduler's default page quality is
    ``request.priority``, so qualities are scaled by 10**6 (the generator rounds them to six
    decimals, so no two distinct qualities collide).
    """
    return round(quality * 1_000_000)
