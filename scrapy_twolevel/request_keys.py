"""Which lane (host key) a Scrapy request takes, and its page quality.

Shared by the scheduler and the middleware so both see the same host for a request.

A request's lane comes from its own URL, in the chosen key mode. Scrapy's downloader
writes the slot it used into ``meta["download_slot"]``, and redirects, retries and
``meta=response.meta`` copy it into new requests, so a ``download_slot`` found in meta is
trusted only when the user set it: on a request that never passed through this scheduler
(no ``twolevel_host`` in its meta), or one derived from a request whose lane was the
user's slot (``twolevel_user_slot``). Any other ``download_slot`` is stale — the slot of
the request it was copied from — and the scheduler removes it, so the downloader, too,
files the request under its own host.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy.utils.misc import load_object

from ._engine import peek_meta
from .config import SettingsError
from .frontier import PLAIN_LANE
from .hostkey import make_host_key

if TYPE_CHECKING:
    from scrapy import Request

#: Meta key the scheduler sets on requests it hands out: their lane (host key).
HOST_META_KEY = "twolevel_host"
#: Meta key set (``True``) on handed-out requests whose lane is a ``download_slot`` the
#: user chose, so requests derived from them keep it.
USER_SLOT_META_KEY = "twolevel_user_slot"
#: Scrapy's meta key for the downloader slot.
SLOT_META_KEY = "download_slot"
#: Distinct integer priorities whose float quality is kept and shared (RAM: one float per
#: value instead of one per pending request).
_SHARED_QUALITIES = 65_536
#: Schemes whose requests go to a network host and so take a host lane.
NETWORK_SCHEMES = frozenset({"http", "https", "ftp", "s3"})


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
    """Return ``request -> lane``, :data:`PLAIN_LANE` for requests with no network host.

    The lane is the ``download_slot`` the user chose, or the key of the URL's hostname. A
    stale ``download_slot`` (see the module docstring) is removed from the request's meta
    on the way. Raises ``ValueError`` for a URL that cannot be parsed. Nothing is cached
    per URL: parsing costs about a microsecond, a cache entry ~100 bytes.
    """
    key_of = make_host_key(mode, resolved)

    def host_of(request: Request) -> str:
        meta = peek_meta(request)
        if meta:
            slot = meta.get(SLOT_META_KEY)
            if slot is not None:
                if HOST_META_KEY not in meta or meta.get(USER_SLOT_META_KEY):
                    return str(slot)  # the user's choice
                del request.meta[SLOT_META_KEY]  # stale: the copied request's slot
        scheme, hostname = split_host(request.url)
        return key_of(hostname) if hostname and scheme in NETWORK_SCHEMES else PLAIN_LANE

    return host_of


def mark_lane(request: Request, lane: str) -> None:
    """Record the lane the scheduler gave ``request`` (and whether it is the user's slot)."""
    meta = request.meta
    meta[HOST_META_KEY] = lane
    if SLOT_META_KEY in meta:
        # Stale slots were removed at enqueue, so a slot still here is the user's.
        meta[USER_SLOT_META_KEY] = True
    else:
        meta.pop(USER_SLOT_META_KEY, None)


def make_quality(spec: str) -> Callable[[Request], float]:
    """Return ``request -> quality`` for a validated ``TWOLEVEL_QUALITY`` value.

    Raises :class:`~scrapy_twolevel.config.SettingsError` naming the setting if an
    import path is wrong.
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
        return lambda request: float(peek_meta(request).get(key, 0.0))
    try:
        func = load_object(spec)
    except Exception as exc:  # user code runs on import: anything can come out
        raise SettingsError(f"TWOLEVEL_QUALITY={spec!r} cannot be imported: {exc}") from exc
    if not callable(func):
        raise SettingsError(f"TWOLEVEL_QUALITY={spec!r} is not callable")
    return lambda request: float(func(request))
