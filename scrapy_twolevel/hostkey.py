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


def _is_ip(hostname: str) -> bool:
    try:
        ipaddress.ip_address(hostname)
    except ValueError:
        return False
    return True


def make_host_key(mode: str, resolved: Mapping[str, str] | None = None) -> Callable[[str], str]:
    """Return a function mapping a (lower-case) hostname to its host key.

    ``resolved`` is a hostname -> IP cache consulted in ``ip`` mode (Scrapy's DNS cache);
    a name not resolved yet keeps its hostname as key.
    """
    if mode == "hostname":
        return lambda hostname: hostname
    if mode == "ip":
        cache = resolved if resolved is not None else {}

        def ip_key(hostname: str) -> str:
            if _is_ip(hostname):
                return hostname
            return cache.get(hostname, hostname)

        return ip_key
    if mode == "domain":
        import tldextract

        # The bundled public-suffix snapshot: no network access at run time.
        extract = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)

        @lru_cache(maxsize=65536)
        def domain_key(hostname: str) -> str:
            if _is_ip(hostname):
                return hostname
            return extract(hostname).top_domain_under_public_suffix or hostname

        return domain_key
    raise ValueError(f"unknown host key mode {mode!r}; use hostname, domain or ip")
