"""Which host a URL belongs to, for ranking and politeness.

The scheduler must group requests the way the downloader groups them into slots, or
politeness and ranking disagree: ``hostname`` is the downloader's default slot key,
``ip`` matches ``CONCURRENT_REQUESTS_PER_IP``, and ``domain`` (the registered domain,
``a.b.example.co.uk`` -> ``example.co.uk``) is stricter than both.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

#: The ways of keying hosts (``TWOLEVEL_HOST_KEY``), see the module docstring.
HOST_KEY_MODES = ("hostname", "domain", "ip")


def is_ip(hostname: str) -> bool:
    """Whether ``hostname`` is an IPv4 or IPv6 address."""
    try:
        ipaddress.ip_address(hostname)
    except ValueError:
        return False
    return True


def cached_address(value: Any) -> str | None:
    """The IP address in a DNS cache entry, or ``None``.

    Scrapy's default resolver caches a string; ``CachingHostnameResolver`` caches a list of
    address objects (``.host``). Anything else is ignored rather than trusted.
    """
    if isinstance(value, (list, tuple)):
        value = value[0] if value else None
        value = value if isinstance(value, str) else getattr(value, "host", None)
    return value if isinstance(value, str) and is_ip(value) else None


def make_host_key(mode: str, resolved: Mapping[str, Any] | None = None) -> Callable[[str], str]:
    """Return a function mapping a (lower-case) hostname to its host key.

    ``resolved`` is a hostname -> address cache consulted in ``ip`` mode (Scrapy's DNS
    cache). A name's key is chosen when the name is first seen — its address if the cache
    has it then, else the name — and kept for the crawl (one entry per hostname).
    """
    if mode == "hostname":
        return lambda hostname: hostname
    if mode == "ip":
        cache = resolved if resolved is not None else {}
        chosen: dict[str, str] = {}

        def ip_key(hostname: str) -> str:
            key = chosen.get(hostname)
            if key is None:
                if is_ip(hostname):
                    key = hostname
                else:
                    key = cached_address(cache.get(hostname)) or hostname
                chosen[hostname] = key
            return key

        return ip_key
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
    raise ValueError(f"unknown host key mode {mode!r}; use hostname, domain or ip")
