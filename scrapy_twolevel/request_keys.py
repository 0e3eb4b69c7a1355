"""How a Scrapy request maps to the frontier's host key and page quality.

Shared by the scheduler and the middleware so both see the same host for a request.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy.utils.misc import load_object

from .frontier import PLAIN_LANE
from .hostkey import make_host_key

if TYPE_CHECKING:
    from scrapy import Request

#: Meta key the scheduler sets on requests it hands out: their host key.
HOST_META_KEY = "twolevel_host"
#: Distinct integer priorities whose float quality is kept and shared (RAM: one float per
#: value instead of one per pending request).
_SHARED_QUALITIES = 65_536
#: Schemes whose requests go to a network host and so take a host lane.
NETWORK_SCHEMES = frozenset({"http", "https", "ftp", "s3"})


def _meta(request: Request) -> dict[str, Any]:
    # Request.meta creates an empty dict on first access; peeking at the private
    # attribute keeps millions of pending requests without one (see the RAM benchmark).
    meta = getattr(request, "_meta", None)
    if meta is None and not hasattr(request, "_meta"):
        return request.meta
    return meta or {}


# scheme "://" [userinfo "@"] host, where host is "[...]" or runs to ":", "/", "?" or "#".
_AUTHORITY = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*)://(?:[^/?#]*@)?(\[[^/?#\]]*\]?|[^/?#:]*)")


def split_host(url: str) -> tuple[str, str]:
    """``(scheme, hostname)`` of a URL, lower-case; hostname ``""`` when there is none.

    One regular expression instead of ``urlparse_cached``, which would keep a parse
    result per pending request alive (RAM) and costs more CPU. Scrapy has already made
    the URL safe (``safe_url_string``), so the authority is plain ASCII.
    """
    match = _AUTHORITY.match(url)
    if match is None:  # no authority: "data:...", "mailto:..."
        colon = url.find(":")
        return (url[:colon].lower() if colon > 0 else ""), ""
    host = match[2]
    if host[:1] == "[":
        if host[-1:] != "]":
            raise ValueError(f"unbalanced '[' in the host of {url!r}")
        host = host[1:-1]
    return match[1].lower(), host.lower()


def make_request_host(mode: str, resolved: Any = None) -> Callable[[Request], str]:
    """Return ``request -> host key``, :data:`PLAIN_LANE` for requests with no network host.

    A ``download_slot`` set in meta wins, as it does in Scrapy's downloader. Raises
    ``ValueError`` for a URL that cannot be parsed. Nothing is cached per URL or origin:
    parsing costs about a microsecond, a cache entry ~100 bytes per host.
    """
    key_of = make_host_key(mode, resolved)

    def host_of(request: Request) -> str:
        slot = _meta(request).get("download_slot")
        if slot is not None:
            return str(slot)
        scheme, hostname = split_host(request.url)
        return key_of(hostname) if hostname and scheme in NETWORK_SCHEMES else PLAIN_LANE

    return host_of


def make_quality(spec: str) -> Callable[[Request], float]:
    """Return ``request -> quality`` for a validated ``TWOLEVEL_QUALITY`` value.

    Raises ``ImportError``/``ValueError`` naming the setting if an import path is wrong.
    """
    if spec == "priority":
        shared: dict[int, float] = {}

        def priority(request: Request) -> float:
            value = request.priority
            quality = shared.get(value)
            if quality is None:
                quality = float(value)
                if len(shared) < _SHARED_QUALITIES:
                    shared[value] = quality
            return quality

        return priority
    if spec.startswith("meta:"):
        key = spec[5:]
        return lambda request: float(_meta(request).get(key, 0.0))
    try:
        func = load_object(spec)
    except (ImportError, NameError, ValueError) as exc:
        raise ImportError(f"TWOLEVEL_QUALITY={spec!r} cannot be imported: {exc}") from exc
    if not callable(func):
        raise ValueError(f"TWOLEVEL_QUALITY={spec!r} is not callable")
    return lambda request: float(func(request))
