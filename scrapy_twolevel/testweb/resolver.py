"""A DNS resolver for crawls of a test web whose URLs name hosts (``h3.testweb.test``).

The test web's hosts live on loopback addresses; names let a test give one address several
names (aliases), as virtual hosting does. This resolver answers from a fixed map instead of
the system's DNS, so a crawl stays hermetic: a name outside the map fails at once rather
than leaking to real DNS.

Like Scrapy's own :class:`scrapy.resolver.CachingThreadedResolver`, it stores each answer
(a string) in :data:`scrapy.resolver.dnscache`, where the downloader's per-IP slots read
it.

:func:`~scrapy_twolevel.testweb.spider.run_crawl` installs it when the web uses names; in
other crawls set ``TWISTED_DNS_RESOLVER`` to this class and ``TWOLEVEL_TESTWEB_HOSTS_MAP`` to
:meth:`WebSpec.hosts_map() <scrapy_twolevel.testweb.web.WebSpec.hosts_map>`.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from scrapy.resolver import dnscache
from twisted.internet import defer
from twisted.internet.error import DNSLookupError
from twisted.internet.interfaces import IResolverSimple
from zope.interface import implementer

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from twisted.internet.defer import Deferred

__all__ = ["HOSTS_MAP_SETTING", "TestWebResolver"]

#: Setting holding the name -> IPv4 address map (a dict, or its JSON text on the command line).
HOSTS_MAP_SETTING = "TWOLEVEL_TESTWEB_HOSTS_MAP"


def _check_map(hosts: Mapping[str, str]) -> dict[str, str]:
    checked: dict[str, str] = {}
    for name, address in hosts.items():
        try:
            valid = isinstance(address, str) and ipaddress.ip_address(address).version == 4
        except ValueError:
            valid = False
        if not valid or not isinstance(name, str) or not name:
            raise ValueError(
                f"{HOSTS_MAP_SETTING}: {name!r} -> {address!r}; expected a host name mapped "
                "to an IPv4 address"
            )
        checked[name.lower()] = address
    return checked


@implementer(IResolverSimple)
class TestWebResolver:
    """Resolves names from a fixed map; IP literals resolve to themselves; others fail.

    ``cache_size`` is ``DNSCACHE_SIZE`` (0 when ``DNSCACHE_ENABLED`` is off), as for Scrapy's
    resolvers: with 0, answers are not stored in :data:`scrapy.resolver.dnscache`.
    """

    __test__ = False  # not a pytest test class, despite the name

    def __init__(self, reactor: Any, hosts: Mapping[str, str], cache_size: int) -> None:
        self.reactor = reactor
        self.hosts = _check_map(hosts)
        dnscache.limit = cache_size

    @classmethod
    def from_crawler(cls, crawler: Crawler, reactor: Any) -> Self:
        # Scrapy passes its CrawlerProcess here (only ``.settings`` is used), so the map must
        # be in the process settings, as run_crawl puts it.
        settings = crawler.settings
        cache_size = settings.getint("DNSCACHE_SIZE") if settings.getbool("DNSCACHE_ENABLED") else 0
        return cls(reactor, settings.getdict(HOSTS_MAP_SETTING), cache_size)

    def install_on_reactor(self) -> None:
        """Called by Scrapy once the reactor runs (see ``TWISTED_DNS_RESOLVER``)."""
        self.reactor.installResolver(self)

    def resolve(self, name: str) -> str | None:
        """The address for ``name`` (an IP literal is its own), or None when unknown."""
        key = name.lower()
        address = self.hosts.get(key)
        if address is None:
            try:
                ipaddress.ip_address(key)
            except ValueError:
                return None
            address = key
        return address

    def getHostByName(self, name: str, timeout: Sequence[int] = ()) -> Deferred[str]:
        """IResolverSimple: answer at once, from the cache or the map (no threads, no DNS)."""
        if name in dnscache:
            return defer.succeed(dnscache[name])
        address = self.resolve(name)
        if address is None:
            return defer.fail(DNSLookupError(f"{name!r} is not in {HOSTS_MAP_SETTING}"))
        if dnscache.limit:
            dnscache[name] = address
        return defer.succeed(address)
