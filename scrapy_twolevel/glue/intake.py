"""How a request enters the frontier: its lane (host key), its quality, its queue.

:func:`make_request_host` and :func:`make_quality` are shared by the scheduler and the
middleware so both see the same host for a request; :class:`Intake` is what every mode's
admission (:mod:`~scrapy_twolevel.glue.admission`) calls to place a request, with the
fallbacks that keep a request the dupefilter has already recorded from being lost.

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
from typing import TYPE_CHECKING

from scrapy.utils.misc import load_object

from .. import meta as meta_keys
from .._engine import peek_meta
from ..errors import SettingsError
from ..frontier import PLAIN_LANE
from ..frontier.host_keys import make_host_key

if TYPE_CHECKING:
    from scrapy import Request

    from .reporting import Reporter
    from .topic_tracker import TopicTracker

#: Distinct integer priorities whose float quality is kept and shared (RAM: one float per
#: value instead of one per pending request).
_SHARED_QUALITIES = 65_536
#: Schemes whose requests go to a network host and so take a host lane.
NETWORK_SCHEMES = frozenset({"http", "https", "ftp", "s3"})


# scheme "://" [userinfo "@"] host, where host is "[...]" or runs to ":", "/", "?" or "#".
_AUTHORITY = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*)://(?:[^/?#]*@)?(\[[^/?#\]]*\]?|[^/?#:]*)")


def split_host(url: str) -> tuple[str, str]:
    """``(scheme, hostname)`` of a URL, lower-case, without a trailing dot (the port is not
    part of it: one server name, one lane); hostname ``""`` when there is none.

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
    elif host[-1:] == "." and len(host) > 1:
        host = host[:-1]  # "example.com." is the server "example.com": one lane, not two
    return match[1].lower(), host.lower()


def make_request_host(mode: str) -> Callable[[Request], str]:
    """Return ``request -> lane``, :data:`PLAIN_LANE` for requests with no network host.

    The lane is the ``download_slot`` the user chose, or the key of the URL's hostname. A
    stale ``download_slot`` (see the module docstring) is removed from the request's meta
    on the way. Raises ``ValueError`` for a URL that cannot be parsed. Nothing is cached
    per URL: parsing costs about a microsecond, a cache entry ~100 bytes.
    """
    key_of = make_host_key(mode)

    def host_of(request: Request) -> str:
        meta = peek_meta(request)
        if meta:
            slot = meta.get(meta_keys.DOWNLOAD_SLOT)
            if slot is not None:
                if meta_keys.HOST not in meta or meta.get(meta_keys.USER_SLOT):
                    return str(slot)  # the user's choice
                del request.meta[meta_keys.DOWNLOAD_SLOT]  # stale: the copied request's slot
        scheme, hostname = split_host(request.url)
        return key_of(hostname) if hostname and scheme in NETWORK_SCHEMES else PLAIN_LANE

    return host_of


def drop_inherited_keys(request: Request) -> None:
    """Drop the per-request meta keys ``request`` got from another request
    (``meta=response.meta``; see :data:`scrapy_twolevel.meta.OWNER`). Peeks first: most
    requests have no meta, and ``request.meta`` would create one."""
    if peek_meta(request).get(meta_keys.OWNER) is not None:
        meta_keys.drop_inherited(request.meta, request.url)


def mark_host(request: Request, host: str) -> None:
    """Record the host key the scheduler gave ``request`` (and whether it is the user's
    slot), so the middleware measures the same host."""
    meta = request.meta
    meta[meta_keys.HOST] = host
    if meta_keys.DOWNLOAD_SLOT in meta:
        # Stale slots were removed at enqueue, so a slot still here is the user's.
        meta[meta_keys.USER_SLOT] = True
    else:
        meta.pop(meta_keys.USER_SLOT, None)


#: Quality taken off a request per time it was sent back from a backed-off host: more than
#: any quality in use (Scrapy priorities are small integers; the test web's reach 10**6).
REQUEUED_PENALTY = 1e15


def make_quality(spec: str) -> Callable[[Request], float]:
    """Return ``request -> quality`` for a validated ``TWOLEVEL_QUALITY`` value.

    Raises :class:`~scrapy_twolevel.errors.SettingsError` naming the setting if an
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


class Intake:
    """Works out a request's host, lane and quality, each with a fallback.

    Nothing a request goes through may lose it once the dupefilter has seen it, so every
    step after the dupefilter has a fallback instead of an exception: the plain lane for a
    host that cannot be worked out (:meth:`lane`), quality 0 (:meth:`quality`), and, in
    the ``JOBDIR`` store, a memory queue when the disk fails
    (:meth:`~scrapy_twolevel.glue.jobdir.JobdirStore.queue`). That lets the dupefilter go
    first, which saves a crawl of documentation pages (95% of links already seen) most of
    the work.
    """

    def __init__(
        self,
        *,
        host_of: Callable[[Request], str],
        quality_of: Callable[[Request], float],
        reporter: Reporter,
        topics: TopicTracker | None = None,
    ) -> None:
        """``topics``: with topics, a request's lane is its host's lane in its topic."""
        self.host_of = host_of
        self.quality_of = quality_of
        self._reporter = reporter
        self._topics = topics

    def place(self, request: Request) -> tuple[str, str, float]:
        """``(host, lane, quality)`` of a request about to be queued; never raises."""
        host = self.lane(request)
        lane = host if self._topics is None else self._topics.lane(request, host)
        return host, lane, self.quality(request)

    def lane(self, request: Request) -> str:
        """``request``'s host key, :data:`PLAIN_LANE` when it cannot be worked out."""
        try:
            return self.host_of(request)
        except Exception:
            self._reporter.count_once(
                "malformed_url",
                "Cannot work out the host of %(request)s; it takes "
                "the plain lane and the downloader will report it.",
                request,
            )
            return PLAIN_LANE

    def quality(self, request: Request) -> float:
        """``TWOLEVEL_QUALITY`` of ``request``; 0 when it gives no finite number.

        A request sent back after failing at a backed-off host (``twolevel_requeued``) is
        ranked below every ordinary one (``REQUEUED_PENALTY`` per time): a host's probe
        must try its other URLs before a URL that may be broken.
        """
        try:
            quality = self.quality_of(request)
        except Exception:  # user code (TWOLEVEL_QUALITY) can raise anything
            quality = float("nan")
        if quality != quality or quality in (float("inf"), float("-inf")):
            self._reporter.count_once(
                "invalid_quality",
                "TWOLEVEL_QUALITY gave no finite number for %(request)s; using 0.",
                request,
            )
            quality = 0.0
        requeued = peek_meta(request).get(meta_keys.REQUEUED)
        if requeued:
            quality -= REQUEUED_PENALTY * requeued
        return quality
