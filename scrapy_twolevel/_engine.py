"""Every use of Scrapy internals, isolated here so a Scrapy change breaks in one place.

Scrapy has no public hook to (a) wake the engine when a scheduler that held requests back
has one ready again, (b) ask which requests are still inside the downloader or the
engine (for leases, :func:`requests_in_progress`), (c) read a request's meta without
creating an empty dict for it (millions of pending requests would each get one), (d) tell
whether a response's connection stayed open (:func:`pooled_connections`), (e) tell
whether a signal has receivers (:func:`has_receivers`), or (f) tell whether a
fingerprint depends on the URL alone (:func:`fingerprints_by_url_alone`, and
:func:`url_fingerprint_function`, which computes it from the URL with Scrapy's recipe). (a) and (b)
are checked inside a real crawl by ``test_scrapy_internals_we_rely_on_still_exist`` in
``tests/test_crawl.py``, (d) by
``test_reconnects_are_seen_though_twisted_hides_the_connection_header`` there, (c) by
``test_peek_meta_does_not_create_meta`` in ``tests/test_intake.py``, (e) by the
``request_dropped`` counts in ``tests/test_duplicate_links.py``, (f) by the URL memo
and URL fingerprint tests in ``tests/test_dupefilter.py``; they fail loudly if Scrapy changes them.

Each was checked on every Scrapy minor ``setup.cfg`` allows (2.13.4 to 2.19.0): ``_slot``
with ``nextcall``, ``inprogress`` and ``scheduler``, ``downloader.active``,
``Request._meta`` and ``RequestFingerprinter._fingerprint`` are the same on all of them;
where the public API differs (``call_later``, ``close_spider``, ``get_spider_loader``,
``engine.scheduler``, the connection pool's key) the function says which versions do what.
The test command runs the crawl tests on the lowest and the whole suite on the newest.
"""

from __future__ import annotations

import hashlib
import json
import re
import weakref
from collections.abc import Callable, Collection, Container, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from w3lib.url import canonicalize_url

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from scrapy.utils.request import RequestFingerprinterProtocol

_NO_META: Mapping[str, Any] = MappingProxyType({})


def _engine(crawler: Crawler) -> Any:
    try:
        return crawler.engine
    except (AttributeError, RuntimeError):  # Scrapy 2.14+: RuntimeError before the crawl
        return None


def wake_engine(crawler: Crawler) -> bool:
    """Ask the engine to call ``next_request`` soon, instead of on its 5-second heartbeat.

    Returns whether the engine could be reached (``False`` before open / after close).
    """
    slot = getattr(_engine(crawler), "_slot", None)
    nextcall = getattr(slot, "nextcall", None)
    if nextcall is None:
        return False
    nextcall.schedule()
    return True


def requests_in_downloader(crawler: Crawler) -> Collection[Any] | None:
    """Requests the downloader holds (its middlewares included), from fetch to response.

    A request the scheduler handed out that is no longer here was dropped before download
    (e.g. ``IgnoreRequest`` from a downloader middleware), so its host can be freed.
    ``None`` when the downloader cannot be inspected (no engine yet).
    """
    downloader = getattr(_engine(crawler), "downloader", None)
    return getattr(downloader, "active", None)


def scheduler_of(crawler: Crawler) -> Any:
    """The engine's scheduler (``None`` before the crawl opens or after it closed).

    ``engine.scheduler`` is public from Scrapy 2.19; before, it is the slot's."""
    engine = _engine(crawler)
    if isinstance(getattr(type(engine), "scheduler", None), property):  # 2.19's
        return engine.scheduler
    return getattr(getattr(engine, "_slot", None), "scheduler", None)


def requests_in_progress(crawler: Crawler) -> Container[Any] | None:
    """Requests the engine has taken from the scheduler and not finished with.

    The engine removes a request only after its downloader output is handled: the
    response's callback output processed (its requests queued), or the redirect or
    retry request a middleware returned queued. ``None`` when there is no engine.
    """
    slot = getattr(_engine(crawler), "_slot", None)
    return getattr(slot, "inprogress", None)


def has_receivers(crawler: Crawler, signal: object) -> bool:
    """Whether anything is connected to ``signal``: Scrapy's ``send_catch_log`` costs a
    receiver lookup and a call per send even with none, and has no public way to ask."""
    from pydispatch.dispatcher import getAllReceivers, liveReceivers

    return any(True for _ in liveReceivers(getAllReceivers(crawler.signals.sender, signal)))


def pooled_connections(crawler: Crawler, request: Request) -> int | None:
    """Idle connections Scrapy's HTTP/1.1 download handler keeps to ``request``'s server.

    Asked as the response reaches the downloader middlewares, when a connection the server
    kept open is back in the pool: 0 means the server closed the one the response came on.
    Scrapy tells middlewares nothing about connections, and Twisted keeps ``Connection``
    and ``Keep-Alive`` out of ``response.headers``, so this is where a reconnect shows.
    ``None`` when it cannot be known: a proxy, another download handler, no engine. The
    count is at least 1 whenever one is kept, which is all the middleware asks.
    """
    if peek_meta(request).get("proxy"):
        return None
    handlers = getattr(getattr(_engine(crawler), "downloader", None), "handlers", None)
    handler = getattr(handlers, "_handlers", {}).get(request.url.partition(":")[0])
    pool = getattr(handler, "_pool", None)
    connections = getattr(pool, "_connections", None)
    if not isinstance(connections, dict):
        return None
    bind = peek_meta(request).get("bindaddress") or getattr(handler, "_bindAddress", None)
    from scrapy.utils.httpobj import urlparse_cached

    parts = urlparse_cached(request)  # Scrapy's URLs have their host in lower case already
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    server = (parts.scheme.encode(), (parts.hostname or "").encode(), port)
    return idle_connections(pool, connections, server, bind)


#: Pools whose keys were found by their exact shape at least once: a miss there means no
#: idle connection, with no scan.
_EXACT_KEYS: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def idle_connections(
    pool: Any, connections: dict[Any, Any], server: tuple[bytes, bytes, int], bind: Any
) -> int:
    """Idle connections to ``server`` (``(scheme, host, port)``, as Twisted's ``URI`` has
    them) in Twisted's ``HTTPConnectionPool._connections``, found by the exact key Twisted
    and Scrapy build: the server plus Scrapy's bind address (2.19+: ``(host, port)``, a
    string given as ``(host, 0)``; before: none). One lookup per response: Twisted never
    deletes a key, so a scan cost a millisecond per response at 10,000 servers (on every
    response with ``DOWNLOAD_BIND_ADDRESS``). A pool whose keys never matched that shape
    (another Scrapy, a patched handler) is scanned by server until one does."""
    if isinstance(bind, str):
        bind = (bind, 0)
    idle = connections.get((*server, bind))
    if idle is None:
        idle = connections.get(server)
    if idle is not None:
        _EXACT_KEYS[pool] = True
        return len(idle)
    if pool in _EXACT_KEYS:
        return 0  # never pooled: the server closed every connection it served
    wanted = (server[0], server[1].lower(), server[2])
    return sum(len(idle) for key, idle in connections.items() if _server_of(key) == wanted)


def _server_of(key: Any) -> tuple[bytes, bytes, int] | None:
    if isinstance(key, tuple) and len(key) >= 3 and isinstance(key[1], bytes):
        return key[0], key[1].lower(), key[2]
    return None


def handlers_hiding_connections(crawler: Crawler) -> dict[str, str]:
    """``{scheme: handler path}`` of the HTTP(S) download handlers whose connections
    :func:`pooled_connections` cannot see: anything but Scrapy's HTTP/1.1 handler (or a
    subclass), whose Twisted connection pool it reads. A handler that cannot be imported
    is left to Scrapy to report."""
    from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
    from scrapy.utils.misc import load_object

    hidden = {}
    handlers = crawler.settings.getwithbase("DOWNLOAD_HANDLERS")
    for scheme in ("http", "https"):
        path = handlers.get(scheme)
        if path is None:
            continue
        try:
            cls = load_object(path) if isinstance(path, str) else path
        except Exception:
            continue
        if not (isinstance(cls, type) and issubclass(cls, HTTP11DownloadHandler)):
            hidden[scheme] = path if isinstance(path, str) else f"{cls.__module__}.{cls.__name__}"
    return hidden


def peek_meta(request: Request) -> Mapping[str, Any]:
    """``request.meta`` if the request has one, else an empty read-only mapping.

    ``Request.meta`` creates a dict on first access; ``Request._meta`` is ``None`` until
    then. Falls back to the public attribute if Scrapy renames the private one.
    """
    try:
        meta = request._meta
    except AttributeError:
        return request.meta
    return meta if meta is not None else _NO_META


def fingerprints_by_url_alone(fingerprinter: object) -> bool:
    """Whether ``fingerprinter``'s fingerprint of a GET without a body is a function of
    its URL alone: exactly Scrapy's ``RequestFingerprinter`` with Scrapy's default
    ``fingerprint`` function (no headers, no fragments). A subclass may put a header or a
    meta value into the fingerprint, so it never qualifies, even if it inherits the
    private ``_fingerprint`` attribute that is checked here."""
    from scrapy.utils.request import RequestFingerprinter, fingerprint

    return (
        type(fingerprinter) is RequestFingerprinter
        and getattr(fingerprinter, "_fingerprint", None) is fingerprint
    )


#: Scrapy's ``fingerprint()`` hashes ``json.dumps`` of these fields, ``sort_keys=True``;
#: for a GET without a body and without headers asked for, all but the URL are constant.
_GET_FINGERPRINT_HEAD = '{"body": "", "headers": {}, "method": "GET", "url": '
#: URLs on which :func:`url_fingerprint_function` checks its recipe against Scrapy's
#: (percent-escapes, a query to sort, a fragment, a port, non-ASCII host and path; the last
#: two are already canonical, see :func:`is_canonical`).
_FINGERPRINT_PROBES = (
    "http://Example.COM:8080/a%7eb/c d?z=1&a=%2F&a=0#fragment",
    "https://bücher.example/straße?q=größe",
    "http://h1.example.com/p/42",
    "https://h1.example.com:8443/a-b/c_d.e~f/",
)


#: URLs that ``canonicalize_url`` returns unchanged: http(s), a lower-case ASCII host name,
#: an optional port without leading zeros, a path of unreserved characters, no query and no
#: fragment. Most links of a broad crawl look like this, and the check costs a tenth of
#: ``canonicalize_url`` (~0.2 against ~2.8 µs), the biggest part of a new link's key.
_ALREADY_CANONICAL = re.compile(
    r"https?://[a-z0-9.\-]+(?::([1-9][0-9]{0,4}))?/[A-Za-z0-9\-._~/]*"
).fullmatch


def is_canonical(url: str) -> bool:
    """Whether ``canonicalize_url(url) == url`` is known without calling it (``False``
    means "ask it"). A path with a dot segment (``/./``, ``/../``) is asked, and so is a
    port above 65535."""
    match = _ALREADY_CANONICAL(url)
    if match is None or "/." in url:
        return False
    port = match[1]
    return port is None or len(port) < 5 or int(port) <= 65535


def _get_fingerprint(url: str) -> bytes:
    if is_canonical(url):  # nothing in it that JSON escapes either
        text = _GET_FINGERPRINT_HEAD + '"' + url + '"}'
    else:
        text = _GET_FINGERPRINT_HEAD + json.dumps(canonicalize_url(url)) + "}"
    return hashlib.sha1(text.encode()).digest()  # Scrapy's recipe


def url_fingerprint_function(
    fingerprinter: RequestFingerprinterProtocol,
) -> Callable[[str], bytes] | None:
    """``url -> fingerprint`` of a GET without a body, equal to ``fingerprinter``'s, or
    ``None`` when there is none: only for Scrapy's own fingerprinter
    (:func:`fingerprints_by_url_alone`), and only if Scrapy's recipe still gives the same
    bytes on a few probe URLs (a Scrapy that changed it gets ``None``, and its
    fingerprinter is called as before). Why: Scrapy's ``fingerprint()`` costs ~25 µs per
    new request, a third of it keeping a cache per request in a ``WeakKeyDictionary``
    and building the JSON document; the duplicate-links test asks it for every link a
    page yields that the URL memo has not met."""
    if not fingerprints_by_url_alone(fingerprinter):
        return None
    from scrapy import Request

    for url in _FINGERPRINT_PROBES:
        request = Request(url)
        if _get_fingerprint(request.url) != fingerprinter.fingerprint(request):
            return None
    return _get_fingerprint


def call_later(delay: float, func: Callable[[], None]) -> Any:
    """A cancellable timer on the crawl's event loop, or ``None`` when there is none.

    Unit tests drive the scheduler without a reactor; they lose only the timers.
    """
    scrapy_call_later: Callable[[float, Callable[[], None]], Any]
    try:
        from scrapy.utils.asyncio import call_later as scrapy_call_later
    except ImportError:  # Scrapy < 2.14: no scrapy.utils.asyncio
        scrapy_call_later = _reactor_call_later
    try:
        return scrapy_call_later(delay, func)
    except RuntimeError:
        return None


class _ReactorTimer:
    """Scrapy 2.13: a Twisted ``DelayedCall`` whose ``cancel`` is safe once it has run or
    been cancelled (as Scrapy 2.14+'s ``CallLaterResult.cancel`` is)."""

    __slots__ = ("_call",)

    def __init__(self, call: Any) -> None:
        self._call = call

    def cancel(self) -> None:
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None


def _reactor_call_later(delay: float, func: Callable[[], None]) -> _ReactorTimer:
    """Scrapy 2.13's event loop is always the reactor; ``RuntimeError`` without one, as
    Scrapy 2.14+'s ``call_later`` raises."""
    from scrapy.utils.reactor import is_reactor_installed

    if not is_reactor_installed():
        raise RuntimeError("no Twisted reactor installed")
    from twisted.internet import reactor

    return _ReactorTimer(reactor.callLater(delay, func))


def wait_for(deferred: Any) -> Any:
    """An awaitable for a Twisted ``Deferred`` inside a coroutine Scrapy runs (an asyncio
    future under the asyncio reactor)."""
    from scrapy.utils.defer import maybe_deferred_to_future

    return maybe_deferred_to_future(deferred)


def close_spider(crawler: Crawler, reason: str) -> None:
    """Close the crawl with ``reason``, as Scrapy's CloseSpider extension does."""
    engine = crawler.engine
    if engine is None:
        return
    close_async = getattr(engine, "close_spider_async", None)
    if close_async is None:  # Scrapy < 2.14: close_spider(spider, reason) -> Deferred
        engine.close_spider(crawler.spider, reason)  # type: ignore[arg-type]  # < 2.14: open
        return
    from scrapy.utils.defer import _schedule_coro

    _schedule_coro(close_async(reason=reason))


def get_spider_loader(settings: BaseSettings) -> Any:
    """The project's spider loader (``scrapy.spiderloader.get_spider_loader``, Scrapy 2.14+;
    before, the private ``CrawlerRunner._get_spider_loader``)."""
    try:
        from scrapy.spiderloader import get_spider_loader as scrapy_get_spider_loader
    except ImportError:  # Scrapy < 2.14
        from scrapy.crawler import CrawlerRunner

        scrapy_get_spider_loader = CrawlerRunner._get_spider_loader  # type: ignore[attr-defined]
    return scrapy_get_spider_loader(settings)
