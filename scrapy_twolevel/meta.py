"""Every ``request.meta`` key scrapy_twolevel reads or writes, in one place.

Set by the user's spider:

- :data:`SEED` marks a seed page to refetch (``TWOLEVEL_RECRAWL``);
- :data:`TOPIC` names a request's topic (``TWOLEVEL_TOPICS``);
- :data:`RELEVANT` marks a page relevant to its topic (set on ``response.meta``).

Set by scrapy_twolevel (read them, do not set them): the rest.
"""

#: The lane (host key) the scheduler gave a request it handed out.
HOST = "twolevel_host"
#: ``True`` on handed-out requests whose lane is a ``download_slot`` the user chose, so
#: requests derived from them keep it.
USER_SLOT = "twolevel_user_slot"
#: Scrapy's own key for the downloader slot (not ours: read and cleaned up).
DOWNLOAD_SLOT = "download_slot"
#: When the request entered the host metrics middleware (its clock), to time failures.
SENT_AT = "twolevel_sent_at"
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
