"""Signals of scrapy_twolevel.

``host_measured``: sent by :class:`~scrapy_twolevel.middleware.HostMetricsMiddleware` for
every response, with arguments ``host`` (the host key) and ``observation`` (a dict of
keyword arguments for :meth:`~scrapy_twolevel.frontier.estimates.HostEstimate.observe`:
``latency``, ``new_connection``, ``served_on_connection``, ``closed_by_server``,
``remaining_on_connection``). The scheduler listens to it to update host estimates.
"""

host_measured = object()
