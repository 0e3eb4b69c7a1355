"""Every ``request.meta`` key scrapy_twolevel reads or writes, in one place.

Set by the user's spider:

- :data:`SEED` marks a seed page to refetch (``TWOLEVEL_RECRAWL``);
- :data:`TOPIC` names a request's topic (``TWOLEVEL_TOPICS``);
- :data:`RELEVANT` marks a page relevant to its topic (set on ``response.meta``).

Set by scrapy_twolevel (read them, do not set them): the rest.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

#: The lane (host key) the scheduler gave a request it handed out.
HOST = "twolevel_host"
#: ``True`` on handed-out requests whose lane is a ``download_slot`` the user chose, so
#: requests derived from them keep it.
USER_SLOT = "twolevel_user_slot"
#: Scrapy's own key for the downloader slot (not ours: read and cleaned up).
DOWNLOAD_SLOT = "download_slot"
#: When the request entered the host metrics middleware (its clock), to time failures.
SENT_AT = "twolevel_sent_at"
#: Seconds the crawler's event loop stalled between the request's start and its reply's
#: headers (see :mod:`scrapy_twolevel.frontier.lag`), noted at the headers and taken off
#: the request with its response.
HEADERS_LAG = "twolevel_headers_lag"
#: Set by the middleware on a request whose download failed; its retries carry it, so the
#: URL's repeated failures count once against its host.
FAILED_BEFORE = "twolevel_failed_before"
#: The download timeout a request had before the middleware shortened it for a host that
#: never answered (:class:`~scrapy_twolevel.frontier.failures.SilentHosts`): its retries
#: carry it, so they get the longer time back once the host answers.
FULL_TIMEOUT = "twolevel_full_timeout"
#: Times the request was refused (429/503) and sent again by the middleware.
REFUSALS = "twolevel_refusals"
#: Times the request failed at a backed-off host and was sent back to its queue: it then
#: queues behind the host's other requests, so the next probe tries another URL.
REQUEUED = "twolevel_requeued"
#: Set by the spider on seed requests: ``True`` (key from the URL) or the seed key.
SEED = "twolevel_seed"
#: Set by the scheduler on each fetch of a seed: ``[seed_key, fetch_id]``.
SEED_FETCH = "twolevel_seed_fetch"
#: Set by the seed middleware on links found on a seed page: ``[seed_key, fetch_id]``.
FOUND_ON_SEED = "twolevel_found_on_seed"
#: A request's topic; requests without one belong to the ``default`` topic.
TOPIC = "twolevel_topic"
#: Set by a callback on ``response.meta``: the page is relevant to its topic.
RELEVANT = "twolevel_relevant"
#: Set once a page was counted relevant, so it counts once.
RELEVANT_COUNTED = "twolevel_relevant_counted"
#: The URL the per-request keys (:data:`PER_REQUEST`) of a meta were written for. Scrapy's
#: ``meta=response.meta`` copies them into every child of a page, where they are not true:
#: a child of a page refused five times is not refused, nor is it its seed's fetch. A key
#: whose owner is another URL (and not the one this request was redirected from) is
#: dropped before anything reads it (:func:`drop_inherited`).
OWNER = "twolevel_owner"
PER_REQUEST = (FAILED_BEFORE, FULL_TIMEOUT, REFUSALS, REQUEUED, SEED_FETCH, FOUND_ON_SEED)


def drop_inherited(meta: MutableMapping[str, Any], url: str) -> bool:
    """Drop the per-request keys ``meta`` got from another request (see :data:`OWNER`);
    whether it had any. A request redirected from the owner takes them over, as do
    RetryMiddleware's copies (same URL). A seed flag that came with another page's seed
    fetch is that page's, and goes too: mark a new seed with a meta of its own."""
    owner = meta.get(OWNER)
    if owner is None or owner == url:
        return False
    redirects = meta.get("redirect_urls")
    if redirects and redirects[-1] == owner:
        meta[OWNER] = url
        return False
    if meta.get(SEED_FETCH) is not None:
        meta.pop(SEED, None)
    full = meta.get(FULL_TIMEOUT)
    if full is not None:
        meta["download_timeout"] = full  # the shortened time was the owner's host's
    for key in PER_REQUEST:
        meta.pop(key, None)
    del meta[OWNER]
    return True


def set_own(meta: MutableMapping[str, Any], url: str, key: str, value: Any) -> None:
    """Set the per-request ``key`` of the request for ``url`` (after dropping what its meta
    inherited, which would otherwise pass for this URL's own)."""
    drop_inherited(meta, url)
    meta[key] = value
    meta[OWNER] = url
