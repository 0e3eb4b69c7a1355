"""Signals of scrapy_twolevel.

The host metrics middleware sends ``host_measured`` or ``host_failed`` for every request,
``host_refused`` and ``host_crawl_delay`` when a server asks for time: notifications for
extensions (the live view counts failures). The two-level scheduler does not listen: the
middleware reports each outcome to it first, through its view (:mod:`scrapy_twolevel.view`),
and reads its answer from that call.

``host_measured``: a response arrived. Arguments ``host`` (the host key), ``request``, and
``measurement``: a :class:`~scrapy_twolevel.frontier.Measurement` (what the response tells
about its host), or ``None`` when the request says nothing about the host (a cached
response, no measured latency, an ``IgnoreRequest``).

``host_failed``: the download failed (timeout, refused or reset connection, DNS error).
Arguments ``host``, ``request``, ``elapsed`` (seconds from sending to the failure),
``timeout`` (``True`` for a timeout), ``kind`` (``"down"``, ``"slow"`` or ``"broken"``, see
:mod:`scrapy_twolevel.glue.politeness`), ``repeat`` (the URL had failed before) and
``silent`` (a timeout within the shortened time of a host that never answered,
``TWOLEVEL_FIRST_ANSWER_TIMEOUT``). The scheduler folds it into the host's estimates and
failure streak (through the view).

``host_refused``: the server refused the request for now (``TWOLEVEL_REFUSAL_CODES``).
Arguments ``host``, ``request`` and ``retry_after`` (seconds, ``None`` when the server gave
none). The scheduler parks the host (through the view).

``host_crawl_delay``: a host's robots.txt asks for a ``Crawl-delay``. Arguments ``host``
and ``delay`` (seconds).
"""

host_measured = object()
host_failed = object()
host_refused = object()
host_crawl_delay = object()

#: Sent by :class:`~scrapy_twolevel.seeds.SeedMiddleware` for seed pages and the articles
#: found on them (see :mod:`scrapy_twolevel.seeds`); the scheduler's seed planner listens.
#: ``seed_page_received``: a seed's response reached the spider (argument ``request``).
seed_page_received = object()
#: ``seed_page_failed``: its callback or a spider middleware raised (``request``,
#: ``exception``): the fetch is not counted.
seed_page_failed = object()
#: ``article_fetched``: the response to a link found on a seed page (``request``,
#: ``response``): its publish time goes into the history.
article_fetched = object()
#: Sent by :class:`~scrapy_twolevel.topics.TopicMiddleware` when a callback marked its page
#: relevant (``response.meta["twolevel_relevant"]``); argument ``request``.
page_relevant = object()
