"""Signals of scrapy_twolevel.

``host_measured``: sent by :class:`~scrapy_twolevel.middleware.HostMetricsMiddleware` for
every response, with arguments ``host`` (the host key) and ``observation`` (a dict of
keyword arguments for :meth:`~scrapy_twolevel.frontier.estimates.HostEstimate.observe`:
``latency``, ``new_connection``, ``served_on_connection``, ``closed_by_server``,
``remaining_on_connection``). The scheduler listens to it to update host estimates.
"""

host_measured = object()

#: Sent by the middleware for every request that failed to download (timeout, refused or
#: reset connection, DNS error), with arguments ``host``, ``elapsed`` (seconds from sending
#: to the failure) and ``timeout`` (``True`` for a timeout). The scheduler folds it into
#: the host's estimates and failure streak.
host_failed = object()
