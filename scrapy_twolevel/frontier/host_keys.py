"""Which host a URL belongs to, for ranking and politeness.

The scheduler must group requests the way the downloader groups them into slots, or
politeness and ranking disagree: ``hostname`` is the downloader's default slot key, and
``domain`` (the registered domain, ``a.b.example.co.uk`` -> ``example.co.uk``) is
stricter. There is no ``ip`` key: a URL's lane is chosen as it is queued, before anything
resolved its name, so names sharing an address could never be merged (with
``CONCURRENT_REQUESTS_PER_IP`` Scrapy's downloader still keeps them apart per address).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from functools import lru_cache

#: The ways of keying hosts (``TWOLEVEL_HOST_KEY``), see the module docstring.
HOST_KEY_MODES = ("hostname", "domain")


def is_ip(hostname: str) -> bool:
    """Whether ``hostname`` is an IPv4 or IPv6 address."""
    try:
        ipaddress.ip_address(hostname)
    except ValueError:
        return False
    return True


def make_host_key(mode: str) -> Callable[[str], str]:
    """Return a function mapping a (lower-case) hostname to its host key."""
    if mode == "hostname":
        return lambda hostname: hostname
    if mode == "domain":
        import tldextract

        # The bundled public-suffix snapshot: no network access at run time.
        extract = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)

        @lru_cache(maxsize=65536)
        def domain_key(hostname: str) -> str:
            if is_ip(hostname):
                return hostname
            return extract(hostname).top_domain_under_public_suffix or hostname

        return domain_key
    raise ValueError(f"unknown host key mode {mode!r}; use hostname or domain")
