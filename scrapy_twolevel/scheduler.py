"""``TwoLevelScheduler``: Scrapy's scheduler interface over the two-level frontier.

The scheduler composes; it does not contain. ``from_crawler`` checks and reads the
settings once (:mod:`scrapy_twolevel.glue.preflight`); :meth:`TwoLevelScheduler.open`
has the parts built, in dependency order, by :func:`~scrapy_twolevel.glue.assembly.assemble`:

- the **frontier** (:mod:`scrapy_twolevel.frontier`) decides the order: which host, which
  of its requests; with topics, one frontier per topic behind the same interface;
- the **intake** (:mod:`~scrapy_twolevel.glue.intake`) works out a request's host, lane
  and quality, with a fallback for each, so a request the dupefilter has recorded is
  never lost;
- the **request store** keeps the queued requests (:mod:`~scrapy_twolevel.glue.store`:
  memory; :mod:`~scrapy_twolevel.glue.jobdir`: the ``JOBDIR`` file;
  :mod:`~scrapy_twolevel.distributed.store`: Redis, the distributed mode) and the
  **admission** admits new ones (:mod:`~scrapy_twolevel.glue.admission`);
- the **in-flight registry** (:mod:`~scrapy_twolevel.glue.inflight`) knows when a
  handed-out request is finished: its outcome frees its host, the engine being done with
  it ends its leases (the JOBDIR row, the copy in Redis, the seed fetch);
- the **seed planner**, the **topic tracker** (``TWOLEVEL_RECRAWL``, ``TWOLEVEL_TOPICS``)
  and the **reporter** (stats, warnings logged once).

A request's outcome is known when the host metrics middleware reports it through the
scheduler's view (:mod:`scrapy_twolevel.view`; :mod:`.glue.outcomes` handles it), so a
host's session is decided knowing whether its last request failed: Scrapy sends
``request_left_downloader`` before its middlewares see the response or the failure.
Without the middleware, ``request_left_downloader`` is the outcome. The scheduler is the
view: :class:`~scrapy_twolevel.view.CrawlView` lists what it answers.

A settings error found in ``from_crawler`` is raised from :meth:`open` instead: Scrapy
builds the scheduler after it has started opening the spider, and an exception there
ends in a cascade whose last line is ``RuntimeError: Engine slot not assigned``; from
``open`` the engine closes everything in order and re-raises our message last. A
``JOBDIR``'s files: :mod:`.glue.jobdir`; failing hosts: :mod:`.frontier.failures`.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy import signals
from scrapy.core.scheduler import BaseScheduler
from scrapy.utils.job import job_dir
from scrapy.utils.misc import build_from_crawler, load_object

from . import _engine
from ._engine import (
    requests_in_downloader,
    requests_in_progress,
    wake_engine,
)
from .codec import SpiderCodec, url_of
from .components import SCHEDULER_ROLE
from .config import ClusterConfig, TwoLevelConfig
from .frontier import PLAIN_LANE, Frontier, Policy
from .frontier.binding import CpuPrice
from .frontier.topic_frontier import TopicSelector, TopicSpec, lane_host
from .glue.assembly import assemble
from .glue.collector import CollectorTuning
from .glue.inflight import InFlight
from .glue.intake import Intake, drop_inherited_keys, make_request_host, mark_host
from .glue.preflight import (
    RefusedStart,
    crawl_topics,
    metrics_middleware_enabled,
    resolve_settings,
    warn_unknown_settings,
)
from .glue.reporting import Reporter
from .glue.seed_planner import SeedPlanner, close_seed_planner
from .glue.timers import Alarm, Timer
from .glue.topic_tracker import TopicTracker
from .signals import page_relevant

if TYPE_CHECKING:
    from collections.abc import Callable, Sized
    from typing import Self

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.dupefilters import BaseDupeFilter
    from scrapy.statscollectors import StatsCollector

    from .frontier.hosts import SessionRecord
    from .glue.outcomes import Outcomes
    from .glue.parts import Parts

logger = logging.getLogger(__name__)

#: Popped items with nothing to hand out (stale copies of a bucket that moved, damaged
#: rows) that one ``next_request`` call skips at most before it returns and lets the
#: reactor run (about a millisecond's work; 200,000 stale copies took 0.48 s in one call).
SKIPPED_PER_CALL = 1000


class TwoLevelScheduler(BaseScheduler):
    """Scrapy scheduler that ranks hosts and serves each in non-preemptive sessions.

    ``SCHEDULER = "scrapy_twolevel.scheduler.TwoLevelScheduler"``; see the docs for the
    settings and the policies' formulas.
    """

    #: What the start-up checks (:mod:`scrapy_twolevel.glue.preflight`) look for.
    twolevel_role: ClassVar[str] = SCHEDULER_ROLE

    def __init__(
        self,
        *,
        dupefilter: BaseDupeFilter,
        config: TwoLevelConfig,
        policy: Policy,
        quality_of: Callable[[Request], float],
        host_of: Callable[[Request], str],
        stats: StatsCollector,
        crawler: Crawler,
        jobdir: str | None = None,
        logunser: bool = False,
        outcomes_reported: bool = False,
        cluster: ClusterConfig | None = None,
        topics: list[TopicSpec] | None = None,
    ) -> None:
        """``outcomes_reported``: the host metrics middleware is enabled and reports every
        request's outcome (see the module docstring). ``cluster``: the distributed mode's
        settings (:mod:`scrapy_twolevel.distributed`); the frontier's state is then in
        Redis, not in JOBDIR. ``topics``: the declared topics
        (:mod:`scrapy_twolevel.glue.topic_tracker`)."""
        self.df = dupefilter
        self.config = config
        self.policy = policy
        self.stats = stats
        self.crawler = crawler
        # Scrapy sets the crawler's spider before it builds the scheduler.
        self.reporter = Reporter(stats, crawler.spider)
        self._inc_stat = self.reporter.inc  # bound once: see Reporter
        #: Topics (``TWOLEVEL_TOPICS``), see :mod:`.glue.topic_tracker`.
        self.topics = None if topics is None else TopicTracker(TopicSelector(topics), stats)
        self._topic_specs = topics
        self.intake = Intake(
            host_of=host_of, quality_of=quality_of, reporter=self.reporter, topics=self.topics
        )
        self.inflight = InFlight(
            in_progress=lambda: requests_in_progress(crawler),
            in_downloader=lambda: requests_in_downloader(crawler),
        )
        self.statedir = Path(jobdir, "twolevel") if jobdir else None
        self.logunser = logunser
        self._outcomes_reported = outcomes_reported
        self._cluster_config = cluster if cluster is not None and cluster.enabled else None
        #: The parts, built by :meth:`open` (see :mod:`.glue.assembly`); ``None`` when closed.
        self.parts: Parts | None = None
        self.collector = CollectorTuning(config.gc_threshold, self.reporter)
        self.spider: Spider | None = None
        self._connected = False
        #: Wakes the engine when a backed-off host may be opened again: otherwise a crawl
        #: left with only backed-off hosts waits for the engine's 5-second heartbeat.
        self._wake = Alarm(lambda: wake_engine(crawler), self._now)
        #: Asks the engine again on the next reactor turn (see SKIPPED_PER_CALL).
        self._wake_soon = Timer(lambda: wake_engine(crawler))
        #: The price of a CPU second, for a policy that ranks by it (binding-capability).
        self.cpu_price = (
            CpuPrice(time.monotonic, time.process_time, config.cost.connections)
            if policy.prices_cpu
            else None
        )
        if self._cluster_config is not None and self.statedir is not None:
            logger.info(
                "With TWOLEVEL_REDIS_URL the frontier and the seen keys live in Redis; "
                "JOBDIR keeps no scheduler state."
            )
            self.statedir = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        try:
            return cls._from_crawler(crawler)
        except (ValueError, ImportError) as exc:
            # Raised from open(): see the module docstring.
            return RefusedStart(exc)  # type: ignore[return-value]

    @classmethod
    def _from_crawler(cls, crawler: Crawler) -> Self:
        config, policy, quality_of = resolve_settings(crawler)
        warn_unknown_settings(crawler.settings)
        dupefilter_cls = load_object(crawler.settings["DUPEFILTER_CLASS"])
        assert crawler.stats is not None
        return cls(
            dupefilter=build_from_crawler(dupefilter_cls, crawler),
            config=config,
            policy=policy,
            quality_of=quality_of,
            host_of=make_request_host(config.host_key),
            stats=crawler.stats,
            crawler=crawler,
            jobdir=job_dir(crawler.settings),
            logunser=crawler.settings.getbool("SCHEDULER_DEBUG"),
            outcomes_reported=metrics_middleware_enabled(crawler),
            cluster=ClusterConfig.from_settings(crawler.settings),
            topics=crawl_topics(crawler),
        )

    # -- the parts, while open ----------------------------------------------------------

    @property
    def frontier(self) -> Frontier | None:
        """The frontier (``None`` before :meth:`open` and after :meth:`close`)."""
        return None if self.parts is None else self.parts.frontier

    @property
    def seeds(self) -> SeedPlanner | None:
        """The seed planner (``TWOLEVEL_RECRAWL``), see :mod:`.glue.seed_planner`."""
        return None if self.parts is None else self.parts.seeds

    # -- Scrapy's scheduler interface ---------------------------------------------

    def open(self, spider: Spider) -> Any:
        self.spider = spider
        crawler = self.crawler
        self.parts = parts = assemble(
            crawler=crawler,
            spider=spider,
            config=self.config,
            policy=self.policy,
            dupefilter=self.df,
            intake=self.intake,
            topics=self.topics,
            topic_specs=self._topic_specs,
            inflight=self.inflight,
            reporter=self.reporter,
            codec=SpiderCodec(spider, self.stats, self.logunser),
            statedir=self.statedir,
            cluster=self._cluster_config,
            enqueue=self.enqueue_request,
            wake=lambda: wake_engine(crawler),
            stop=lambda reason: _engine.close_spider(crawler, reason),
        )
        frontier = parts.frontier
        if len(frontier):
            logger.info(
                "Resuming crawl (%(queuesize)d requests scheduled over %(hosts)d hosts)",
                {"queuesize": len(frontier), "hosts": frontier.host_count},
                extra={"spider": spider},
            )
        self._connect(True)
        self.collector.start()
        self.stats.set_value("twolevel/policy", self.policy.name)
        return parts.start()

    def _connect(self, on: bool) -> None:
        """Connect (or disconnect) the signals the scheduler listens to."""
        if on == self._connected:
            return
        handlers: list[tuple[Callable[..., object], object]] = [
            (self._request_left, signals.request_left_downloader)
        ]
        if self.topics is not None:
            handlers += [
                (self.topics.item_scraped, signals.item_scraped),
                (self.topics.page_relevant, page_relevant),
            ]
        manager = self.crawler.signals
        for handler, signal in handlers:
            (manager.connect if on else manager.disconnect)(handler, signal)
        self._connected = on

    def close(self, reason: str) -> Any:
        parts = self.parts
        if parts is None:
            return self.df.close(reason)
        training = None if parts.seeds is None else parts.seeds.training()
        if training is not None:
            # A recrawl model being trained: applied, counted and saved before the close.
            return training.addCallback(lambda _: self.close(reason))
        # First: the distributed mode's last commit needs the frontier's and the engine's
        # view of the leases.
        leaving = parts.leave()
        self._connect(False)
        self.collector.stop()
        self._wake.cancel()
        self._wake_soon.cancel()
        seeds = parts.seeds
        if seeds is not None:
            if leaving is None:
                close_seed_planner(self.crawler, seeds)
            else:
                # The distributed mode: the seeds' last history records go out with the
                # node's last batch, and the history's counts are reported after them.
                def close_seeds(result: Any) -> Any:
                    close_seed_planner(self.crawler, seeds)
                    return result

                leaving.addBoth(close_seeds)
        if not self._outcomes_reported:
            # Dropped before download when nothing else was pending: no release was
            # needed then, so none was counted; count them now, so the stat does not
            # depend on timing.
            parts.outcomes.release_dropped()
        self.reporter.report_hosts(parts.frontier, self.config.stats_top_hosts)
        if self.topics is not None:
            self.topics.report()
        self.parts = None
        closed = parts.close(reason)
        self.reporter.unbuffer()
        return closed

    def has_pending_requests(self) -> bool:
        # Planned seed refetches keep the crawl open (until TWOLEVEL_RECRAWL_DURATION), and
        # a node of a distributed crawl stays open until the whole crawl is out of work.
        parts = self.parts
        if parts is None:
            return False
        self.reporter.flush()  # the engine asks when it may be idle: stats exact by then
        return (
            len(parts.frontier) > 0
            or (parts.seeds is not None and parts.seeds.pending())
            or parts.busy()
        )

    def __len__(self) -> int:
        return 0 if self.parts is None else len(self.parts.frontier)

    # -- what Scrapy's engine status (``est()``, telnet, remote control) reads ---------

    @property
    def mqs(self) -> Sized:
        """Requests queued in memory, under the name of Scrapy's scheduler: the frontier
        when no ``JOBDIR`` keeps it (in memory, or in Redis in the distributed mode)."""
        return self if self.statedir is None else ()

    @property
    def dqs(self) -> Sized | None:
        """Requests queued on disk (the ``JOBDIR`` frontier), as Scrapy's scheduler names
        them; ``None`` without a ``JOBDIR``, as there."""
        return self if self.statedir is not None else None

    def enqueue_request(self, request: Request) -> bool:
        assert self.parts is not None
        drop_inherited_keys(request)  # meta=response.meta
        if not self.parts.admission.admit(request):
            return False
        self._inc_stat("scheduler/enqueued")
        return True

    def next_request(self) -> Request | None:
        request = self._next_request()
        # The counts of this call and of the requests queued since the last one: stats
        # are exact after each call (see Reporter.inc).
        self.reporter.flush()
        return request

    def _next_request(self) -> Request | None:
        parts = self.parts
        assert parts is not None
        frontier, store = parts.frontier, parts.store
        if parts.seeds is not None:
            parts.seeds.release_due()
        if self.cpu_price is not None:
            self._reprice(frontier, self.cpu_price)
        if not store.may_dispatch():
            return None
        skipped = 0
        while True:
            popped = frontier.pop()
            if popped is None and len(frontier) and parts.outcomes.release_dropped():
                popped = frontier.pop()
            if popped is None:
                if len(frontier):
                    parts.outcomes.held_back()
                    self._inc_stat("twolevel/held_back")
                    self._wake.at(frontier.next_retry_at())
                store.dispatched()
                return None
            lane, item = popped
            request = store.unwrap(lane, item)
            if request is not None:
                break
            # Nothing to hand out for it (a damaged row, a bucket that moved): the lane
            # is free again.
            if lane != PLAIN_LANE:
                frontier.done(lane)
            skipped += 1
            if skipped >= SKIPPED_PER_CALL:
                # A host's stale copies (its bucket moved away) can be hundreds of
                # thousands: the rest on the reactor's next turns, not in one call.
                self._inc_stat("twolevel/skipped_per_call_reached")
                self._wake_soon.arm(0)
                store.dispatched()
                return None
        self._inc_stat("scheduler/dequeued")
        if parts.seeds is not None:
            parts.seeds.handed_out(request)
        if lane != PLAIN_LANE:
            mark_host(request, lane_host(lane))
            self.inflight.handed_out(request, lane)
        store.dispatched()
        return request

    def _reprice(self, frontier: Frontier, cpu_price: CpuPrice) -> None:
        """Rank hosts at the crawl's new price of a CPU second, if it moved."""
        price = cpu_price.sample()
        if price is None:
            return
        started = time.monotonic()
        frontier.reprice(price)
        cpu_price.rescored(time.monotonic() - started)
        self._inc_stat("twolevel/cpu_price_changes")
        self.stats.set_value("twolevel/cpu_price", price)

    # -- the view: what the package's middlewares and extensions ask (view.py) ----------

    def seed_rows(self, top: int) -> list[dict[str, Any]] | None:
        seeds = self.seeds
        return None if seeds is None else seeds.plan_rows(top)

    def cluster_status(self) -> dict[str, Any] | None:
        parts = self.parts
        return None if parts is None or parts.cluster is None else parts.cluster.status()

    def recent_sessions(self, lane: str) -> list[SessionRecord]:
        return self.reporter.sessions.of(lane)

    def queued_pages(self, lane: str, n: int) -> list[dict[str, Any]]:
        frontier = self.frontier
        host = None if frontier is None else next(
            (h for h in frontier.hosts() if h.key == lane), None
        )  # fmt: skip
        if host is None:
            return []
        return [{"url": url_of(item), "quality": quality} for quality, item in host.queue.peek(n)]

    def quality(self, request: Request) -> float:
        return self.intake.quality_of(request)

    def seen_test(self) -> Callable[[Request], bool] | None:
        return None if self.parts is None else self.parts.admission.seen_test()

    @property
    def outcomes(self) -> Outcomes | None:
        """Each handed-out request's outcome, as the middleware reports it (``None`` when
        closed)."""
        return None if self.parts is None else self.parts.outcomes

    # -- signals --------------------------------------------------------------------

    def _request_left(self, request: Request, spider: Spider | None = None) -> None:
        if not self._outcomes_reported and self.outcomes is not None:
            self.outcomes.request_done(request)

    def _now(self) -> float:
        """The frontier's clock (back-off times are on it)."""
        frontier = self.frontier
        assert frontier is not None
        return frontier.now()
