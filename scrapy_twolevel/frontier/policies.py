"""Host ranking policies.

A policy decides two things: whether a host's URLs are served in quality order or FIFO,
and how good an unopened host is (its *score*; higher is opened first, ties FIFO).
Scores are recomputed when a host's next session (its first P URLs, hence P, the best
quality and the head sum) or its estimates change, so a score must depend on nothing
else: a pure function of the session it is shown.

To plug in a fifth policy, subclass :class:`Policy` and name its import path in
``TWOLEVEL_POLICY``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from .estimates import CostParams, HostEstimate
    from .queues import HostQueue

#: Weight of each URL in crawl-capability's sum, so hosts whose URLs all have quality 0
#: still rank by throughput (P/T) instead of tying.
CAPABILITY_EPSILON = 1e-9


class Policy:
    """Base class: the interface the frontier calls."""

    #: Name used in ``TWOLEVEL_POLICY`` and in stats.
    name: ClassVar[str] = "custom"
    #: Serve a host's URLs best quality first (``True``) or first in, first out.
    orders_urls_by_quality: ClassVar[bool] = False
    #: Needs :class:`~scrapy_twolevel.middleware.HostMetricsMiddleware` to measure hosts.
    needs_host_metrics: ClassVar[bool] = False
    #: Scores use ``CostParams.cpu_price``, which the crawl measures and changes while it
    #: runs (:mod:`.binding`): every ranked host is scored again when it does.
    prices_cpu: ClassVar[bool] = False

    def score(self, queue: HostQueue, estimate: HostEstimate, params: CostParams) -> float:
        """Return how good opening this host now would be; higher is better."""
        raise NotImplementedError

    def session_length(self, queued: int, estimate: HostEstimate) -> int:
        """``P(s,i)``: requests a session serves before the host's place is offered again
        (the paper's ``min(RequestsPerConnection, TaskURLs)``)."""
        return estimate.batch_size(queued)


class BreadthFirst(Policy):
    """Hosts first in, first out; URLs first in, first out. The baseline."""

    name = "breadth-first"

    def score(self, queue: HostQueue, estimate: HostEstimate, params: CostParams) -> float:
        return 0.0


class PerformanceFirst(Policy):
    """``R(s,i) = S(s,i) * P(s,i) / T(s,i)``: responses per second of connection.

    ``S`` is the host's smoothed success rate, 1 until a request fails.
    """

    name = "performance-first"
    needs_host_metrics = True

    def score(self, queue: HostQueue, estimate: HostEstimate, params: CostParams) -> float:
        batch = estimate.batch_size(len(queue))
        return estimate.success_rate * batch / estimate.session_time(batch, params)


class QualityFirst(Policy):
    """Hosts ranked by the quality of their best URL; URLs best first."""

    name = "quality-first"
    orders_urls_by_quality = True

    def score(self, queue: HostQueue, estimate: HostEstimate, params: CostParams) -> float:
        return queue.best_quality()


class CrawlCapability(Policy):
    """``C(s,i) = S(s,i) * (sum of the qualities of the next P(s,i) URLs) / T(s,i)``, measured.

    Expected quality gathered per second of host time, with both terms learnt from what
    the host did, not from a connection model:

    - ``T(s,i) = G(s,i) + P(s,i) * (W(s,i) + X(s,i))``: ``W`` is the host's service time,
      the seconds from sending a request to its whole response: its time per request
      (to the reply's headers, the server's queue included, a rate limit's hold not: that
      is the host's pace, which the frontier waits out) plus the transfer of its typical
      page (the geometric mean of its pages' sizes times its measured seconds per byte,
      so one huge page does not sink a host); ``X`` is the crawler's own CPU time per
      page of the host (its typical page's size times the crawler's measured CPU per
      byte: a host of heavy pages costs the crawler more where the crawler is the
      bottleneck); ``G`` is what a request after idle costs more (a new connection, a
      cold cache): the saving a session of back-to-back requests buys.
    - ``P(s,i) = 1`` unless ``G > W``: Scrapy's connection pool keeps a host's connection
      between sessions, so a long non-preemptive session saves little and holds a place
      that a better host may want; it is worth it only where the measured saving is larger
      than a page's own time. Then ``P = min(RequestsPerConnection, TaskURLs)``.

    Negative qualities count as 0; each URL adds :data:`CAPABILITY_EPSILON` so all-zero
    hosts rank by P/T. ``S`` is the host's smoothed success rate, 1 until a request fails.
    """

    name = "crawl-capability"
    orders_urls_by_quality = True
    needs_host_metrics = True

    def score(self, queue: HostQueue, estimate: HostEstimate, params: CostParams) -> float:
        batch = self.session_length(len(queue), estimate)
        gathered = queue.head_sum() + CAPABILITY_EPSILON * batch
        return estimate.success_rate * gathered / self.cost(batch, estimate, params)

    def cost(self, batch: int, estimate: HostEstimate, params: CostParams) -> float:
        """What a session of ``batch`` requests spends: ``T(s,i) = G + P * (W + X)``."""
        return estimate.session_gain() + batch * (
            estimate.service(params) + estimate.processing_time
        )

    def session_length(self, queued: int, estimate: HostEstimate) -> int:
        if queued <= 0:
            return 0
        if estimate.session_gain() > estimate.service_time + estimate.transfer_time():
            return estimate.batch_size(queued)
        return 1


class ResourceCapability(CrawlCapability):
    """``C(s,i) = S * (sum of the next P qualities) / (T(s,i) / K + P(s,i) * X(s,i))``.

    Crawl-capability's quality per unit of what a session spends, where the crawl has two
    scarce resources: ``K`` connections (``TWOLEVEL_MAX_OPEN_HOSTS``, at most one per
    host) and one core (Scrapy runs on one). Per second the crawl has ``K`` seconds of
    connection time and one second of CPU. A session takes ``T = G + P * W`` seconds of
    one connection, ``T / K`` of a second's connection capacity, and ``P * X`` of a
    second's CPU; its cost is the sum of the two shares. Crawl-capability's ``T + P * X``
    counts a second of CPU as one connection's second, where it is ``K`` connections'
    worth: so a slow host of valuable pages, which holds one connection and little CPU,
    ranked below fast hosts of heavy pages that hold the core. Where connections bind (the
    crawler's CPU is small beside ``W / K``) this ranks as crawl-capability; where the
    core binds, by quality per CPU second. ``T``, ``P``, ``X``, ``S`` as in
    :class:`CrawlCapability`.
    """

    name = "resource-capability"

    def cost(self, batch: int, estimate: HostEstimate, params: CostParams) -> float:
        """``T / K + r * P * X``: the session's shares of the connections and of the core,
        the core's at its price ``r`` (:meth:`cpu_price`)."""
        took = estimate.session_gain() + batch * estimate.service(params)
        return (
            took / max(1, params.connections)
            + self.cpu_price(params) * batch * estimate.processing_time
        )

    def cpu_price(self, params: CostParams) -> float:
        """``r``: what a second of the core costs in seconds of all connections; 1 here."""
        return 1.0


class BindingCapability(ResourceCapability):
    """``C(s,i) = S * (sum of the next P qualities) / (T(s,i) / K + r * P(s,i) * X(s,i))``.

    Resource-capability with the core's price ``r`` measured instead of fixed: ``r`` is
    what a second of the crawler's CPU costs, in seconds of the crawl's whole connection
    capacity (``CostParams.cpu_price``). :class:`~.binding.CpuPrice` moves it while the
    crawl runs, from the share of the last second the crawler's process spent on the
    CPU: up (by 4x a second, to at most 64) while the core is saturated, so hosts rank
    by quality per CPU second and slow hosts of light pages fill the connections the
    core leaves idle; down (to at least ``1 / K``) while it is not, so hosts rank by
    quality per second of a connection and a slow, valuable host keeps its slot. At
    ``r = 1`` this is resource-capability; at ``r = 1 / K``, crawl-capability
    (``K * (T / K + P * X / K) = T + P * X``). ``T``, ``P``, ``X``, ``S`` as in
    :class:`CrawlCapability`.
    """

    name = "binding-capability"
    prices_cpu = True

    def cpu_price(self, params: CostParams) -> float:
        """The measured price (``CostParams.cpu_price``)."""
        return params.cpu_price


BUILTIN_POLICIES: dict[str, type[Policy]] = {
    cls.name: cls
    for cls in (
        BreadthFirst,
        PerformanceFirst,
        QualityFirst,
        CrawlCapability,
        ResourceCapability,
        BindingCapability,
    )
}
