"""Signals of scrapy_twolevel, sent by the host metrics middleware for every request.

Together they report each request's outcome; the scheduler frees the request's host when
it hears one (see :mod:`scrapy_twolevel.scheduler`).

``host_measured``: a response arrived. Arguments ``host`` (the host key), ``request``, and
``observation``: a dict of keyword arguments for
:meth:`~scrapy_twolevel.frontier.estimates.HostEstimate.observe` (``latency``,
``new_connection``, ``served_on_connection``, ``closed_by_server``,
``remaining_on_connection``), or ``None`` when the request says nothing about the host (a
cached response, no measured latency, an ``IgnoreRequest``).

``host_failed``: the download failed (timeout, refused or reset connection, DNS error).
Arguments ``host``, ``request``, ``elapsed`` (seconds from sending to the failure) and
``timeout`` (``True`` for a timeout). The scheduler folds it into the host's estimates
and failure streak.
"""

host_measured = object()
host_failed = object()
