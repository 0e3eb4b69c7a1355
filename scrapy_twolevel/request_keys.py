"""How a Scrapy request maps to the frontier's host key and page quality.

Shared by the scheduler and the middleware so both see the same host for a request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy.utils.misc import load_object

from .frontier import PLAIN_LANE
from .hostkey import make_host_key

if TYPE_CHECKING:
    from scrapy import Request

#: Meta key the scheduler sets on requests it hands out: their host key.
HOST_META_KEY = "twolevel_host"
_CACHE_SIZE = 100_000
#: Schemes whose requests go to a network host and so take a host lane.
NETWORK_SCHEMES = frozenset({"http", "https", "ftp", "s3"})


def _meta(request: Request) -> dict[str, Any]:
    # Request.meta creates an empty dict on first access; peeking at the private
    # attribute keeps millions of pending requests without one (see the RAM benchmark).
    meta = getattr(request, "_meta", None)
    if meta is None and not hasattr(request, "_meta"):
        return request.meta
    return meta or {}


def split_host(url: str) -> tuple[str, str]:
    """``(scheme, hostname)`` of a URL, lower-case; hostname ``""`` when there is none.

    A few string operations instead of ``urlparse_cached``, which would keep a parse
    result per pending request alive (RAM) and costs more CPU. Scrapy has already made
    the URL safe (``safe_url_string``), so the authority is plain ASCII.
    """
    sep = url.find("://")
    if sep <= 0:
        colon = url.find(":")
        return (url[:colon].lower() if colon > 0 else ""), ""
    scheme = url[:sep].lower()
    start = sep + 3
    end = len(url)
    for delim in "/?#":
        found = url.find(delim, start, end)
        if found != -1:
            end = found
    netloc = url[start:end]
    at = netloc.rfind("@")
    if at != -1:
        netloc = netloc[at + 1 :]
    if netloc.startswith("["):
        close = netloc.find("]")
        if close == -1:
            raise ValueError(f"unbalanced '[' in the host of {url!r}")
        return scheme, netloc[1:close].lower()
    colon = netloc.rfind(":")
    if colon != -1:
        netloc = netloc[:colon]
    return scheme, netloc.lower()


def make_request_host(mode: str, resolved: Any = None) -> Callable[[Request], str]:
    """Return ``request -> host key``, :data:`PLAIN_LANE` for requests with no network host.

    A ``download_slot`` set in meta wins, as it does in Scrapy's downloader. Raises
    ``ValueError`` for a URL that cannot be parsed.
    """
    key_of = make_host_key(mode, resolved)
    cache: dict[str, str] = {}  # "scheme://authority" -> host key

    def host_of(request: Request) -> str:
        slot = _meta(request).get("download_slot")
        if slot is not None:
            return str(slot)
        url = request.url
        end = url.find("/", url.find("://") + 3)
        origin = url if end == -1 else url[:end]
        key = cache.get(origin)
        if key is None:
            scheme, hostname = split_host(url)
            key = key_of(hostname) if scheme in NETWORK_SCHEMES and hostname else PLAIN_LANE
            if len(cache) >= _CACHE_SIZE or mode == "ip":  # ip keys change as DNS resolves
                cache.clear()
            if mode != "ip":
                cache[origin] = key
        return key

    return host_of


def make_quality(spec: str) -> Callable[[Request], float]:
    """Return ``request -> quality`` for a validated ``TWOLEVEL_QUALITY`` value.

    Raises ``ImportError``/``ValueError`` naming the setting if an import path is wrong.
    """
    if spec == "priority":
        return lambda request: float(request.priority)
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
