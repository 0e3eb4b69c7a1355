"""``TwoLevelScheduler``: Scrapy's scheduler interface over the two-level frontier.

Thin glue. ``from_crawler`` reads and validates the settings once; the frontier
(:mod:`scrapy_twolevel.frontier`) decides the order. The scheduler's own jobs are the
Scrapy contract: the dupefilter, stats, JOBDIR persistence, and knowing when a request
is finished so its host may take the next one.

A request is finished when the host metrics middleware reports its outcome
(:data:`~scrapy_twolevel.signals.host_measured` or
:data:`~scrapy_twolevel.signals.host_failed`), so a host's session is decided knowing
whether its last request failed: Scrapy sends ``request_left_downloader`` before its
middlewares see the response or the failure. Without the middleware,
``request_left_downloader`` finishes the request. Either way a request that is no longer
in the downloader and was never reported (dropped by another middleware) is finished
when the frontier next runs dry.

Nothing a request goes through may lose it once the dupefilter has seen it: its lane and
quality are worked out before the dupefilter is asked, and every step after that has a
fallback (quality 0, the plain lane, a memory queue) instead of an exception.

A settings error found in ``from_crawler`` is raised from :meth:`open` instead: Scrapy
builds the scheduler after it has started opening the spider, and an exception there
ends in a cascade whose last line is ``RuntimeError: Engine slot not assigned``; from
``open`` the engine closes everything in order and re-raises our message last.

Job directory contents (with ``JOBDIR``):

- ``twolevel/frontier.sqlite3``: pending requests, per host, the requests handed out
  and not yet finished (leases), and, with :class:`~scrapy_twolevel.dupefilter.SeenCacheDupeFilter`,
  the seen set, all in one transaction stream (see :mod:`scrapy_twolevel.storage.sqlite`);
  requests are encoded as JSON, never pickled.
- ``twolevel/hosts.json``: host estimates, written when the crawl stops.

Both carry a format marker; a file that does not match is reported, never overwritten.

A request handed out stays leased in the file until the engine has finished with it —
its response handled and the requests it produced queued, or its redirect or retry
queued — which the scheduler learns by watching the engine's in-progress set at every
commit. A crawl killed at any moment resumes with its leased requests queued again.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.core.scheduler import BaseScheduler
from scrapy.utils.job import job_dir
from scrapy.utils.misc import build_from_crawler, load_object

from ._engine import (
    call_later,
    requests_in_downloader,
    requests_in_progress,
    wake_engine,
)
from .addon import (
    MIDDLEWARE_PATH,
    SEED_MIDDLEWARE_ORDER,
    SEED_MIDDLEWARE_PATH,
    TOPIC_MIDDLEWARE_ORDER,
    TOPIC_MIDDLEWARE_PATH,
)
from .cluster import Cluster
from .config import (
    ClusterConfig,
    RecrawlConfig,
    SeenConfig,
    SettingsError,
    TwoLevelConfig,
    topic_specs,
    unknown_settings,
)
from .frontier import (
    BUILTIN_POLICIES,
    PLAIN_LANE,
    HostEstimate,
    Policy,
    TwoLevelFrontier,
    memory_queue,
)
from .frontier.topics import SEP, TopicFrontier, TopicSelector, TopicSpec, topic_lane
from .request_codec import decode_request, encode_request
from .request_keys import make_quality, make_request_host, mark_lane
from .seeds import SeedMiddleware, SeedPlanner, close_seed_planner, make_clock, open_seed_planner
from .signals import host_failed, host_measured, page_relevant
from .storage.sqlite import Leased, ShapeMismatch, SqliteStore, StateError
from .topics import TopicMiddleware, TopicTracker

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.dupefilters import BaseDupeFilter
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

HOSTS_FORMAT = "scrapy_twolevel.hosts/1"


def load_policy(name: str) -> Policy:
    """Instantiate a built-in policy by name, or a :class:`Policy` subclass by import path."""
    if name in BUILTIN_POLICIES:
        return BUILTIN_POLICIES[name]()
    try:
        cls = load_object(name)
    except Exception as exc:  # user code runs on import: anything can come out
        raise SettingsError(f"TWOLEVEL_POLICY={name!r} cannot be imported: {exc}") from exc
    if not (isinstance(cls, type) and issubclass(cls, Policy)):
        raise SettingsError(
            f"TWOLEVEL_POLICY={name!r} is not a subclass of scrapy_twolevel.frontier.Policy"
        )
    return cls()


def resolve_settings(crawler: Crawler) -> tuple[TwoLevelConfig, Policy, Callable[[Request], float]]:
    """Validate every setting the scheduler needs; raise :class:`SettingsError` if one is wrong.

    Also called by the middleware, which Scrapy builds before it opens the spider: an error
    raised there stops the crawl with this one message instead of a cascade.
    """
    config = TwoLevelConfig.from_settings(crawler.settings)
    if _uses_seen_cache(crawler):
        SeenConfig.from_settings(crawler.settings)  # its errors, too, before the spider opens
    policy = load_policy(config.policy)
    if policy.needs_host_metrics and not _metrics_middleware_enabled(crawler):
        raise SettingsError(
            f"TWOLEVEL_POLICY={config.policy!r} ranks hosts by measured times and needs "
            "the host metrics middleware. Add to settings.py:\n"
            f'    DOWNLOADER_MIDDLEWARES = {{"{MIDDLEWARE_PATH}": 950}}\n'
            'or use ADDONS = {"scrapy_twolevel.Addon": 0}, or TWOLEVEL_POLICY = '
            '"breadth-first" / "quality-first".'
        )
    recrawl = RecrawlConfig.from_settings(crawler.settings)
    if recrawl.enabled:
        make_clock(recrawl)  # its rule, too, before the spider opens
        if not _component_enabled(crawler, "SPIDER_MIDDLEWARES", SeedMiddleware):
            raise SettingsError(
                "TWOLEVEL_RECRAWL = True needs the seed middleware. Add to settings.py:\n"
                f'    SPIDER_MIDDLEWARES = {{"{SEED_MIDDLEWARE_PATH}": {SEED_MIDDLEWARE_ORDER}}}\n'
                'or use ADDONS = {"scrapy_twolevel.Addon": 0}.'
            )
    topics = topic_specs(crawler.settings, getattr(crawler, "spidercls", None))
    if topics is not None and not _component_enabled(
        crawler, "SPIDER_MIDDLEWARES", TopicMiddleware
    ):
        raise SettingsError(
            "TWOLEVEL_TOPICS needs the topic middleware. Add to settings.py:\n"
            f'    SPIDER_MIDDLEWARES = {{"{TOPIC_MIDDLEWARE_PATH}": {TOPIC_MIDDLEWARE_ORDER}}}\n'
            'or use ADDONS = {"scrapy_twolevel.Addon": 0}.'
        )
    check_cluster(crawler, config, recrawl, topics)
    return config, policy, make_quality(config.quality)


def check_cluster(
    crawler: Crawler,
    config: TwoLevelConfig,
    recrawl: RecrawlConfig,
    topics: list[TopicSpec] | None,
) -> None:
    """The distributed mode's own rules (see :mod:`scrapy_twolevel.cluster`)."""
    cluster = ClusterConfig.from_settings(crawler.settings)
    if not cluster.enabled:
        return
    if not _uses_seen_cache(crawler):
        raise SettingsError(
            "TWOLEVEL_REDIS_URL needs the seen cache, whose keys move with each bucket: "
            'DUPEFILTER_CLASS = "scrapy_twolevel.dupefilter.SeenCacheDupeFilter" (the add-on '
            "sets it)."
        )
    seen = SeenConfig.from_settings(crawler.settings)
    if seen.mode != "exact" or seen.path is not None:
        raise SettingsError(
            "TWOLEVEL_REDIS_URL needs TWOLEVEL_SEEN_MODE='exact' and no TWOLEVEL_SEEN_PATH: "
            "each bucket's seen keys live in Redis and move with the bucket."
        )
    if config.host_key == "ip":
        raise SettingsError(
            "TWOLEVEL_HOST_KEY='ip' cannot be used with TWOLEVEL_REDIS_URL: hosts are "
            "assigned to nodes before their addresses are known. Use 'hostname' or 'domain'."
        )
    if recrawl.enabled and (recrawl.history or recrawl.model):
        raise SettingsError(
            "TWOLEVEL_RECRAWL_HISTORY and TWOLEVEL_RECRAWL_MODEL name files, but with "
            "TWOLEVEL_REDIS_URL the recrawl history and model are kept in Redis for every "
            "node. Unset them."
        )
    if topics is not None:
        raise SettingsError(
            "TWOLEVEL_TOPICS is not supported with TWOLEVEL_REDIS_URL yet. Unset one of them."
        )


def uses_this_scheduler(crawler: Crawler) -> bool:
    """Whether ``SCHEDULER`` names :class:`TwoLevelScheduler` (or a subclass)."""
    try:
        cls = load_object(crawler.settings["SCHEDULER"])
    except Exception:  # Scrapy reports a bad SCHEDULER itself
        return False
    return isinstance(cls, type) and issubclass(cls, TwoLevelScheduler)


def _uses_seen_cache(crawler: Crawler) -> bool:
    from .dupefilter import SeenCacheDupeFilter

    try:
        cls = load_object(crawler.settings["DUPEFILTER_CLASS"])
    except Exception:  # Scrapy reports a bad DUPEFILTER_CLASS itself
        return False
    return isinstance(cls, type) and issubclass(cls, SeenCacheDupeFilter)


def _metrics_middleware_enabled(crawler: Crawler) -> bool:
    from .middleware import HostMetricsMiddleware

    return _component_enabled(crawler, "DOWNLOADER_MIDDLEWARES", HostMetricsMiddleware)


def _component_enabled(crawler: Crawler, setting: str, component: type) -> bool:
    """Whether the ``setting`` dict (with its ``_BASE``) enables ``component`` or a subclass."""
    for path, order in crawler.settings.getwithbase(setting).items():
        if order is None:
            continue
        try:
            cls = load_object(path) if isinstance(path, str) else path
        except Exception:  # Scrapy reports a component it cannot load itself
            continue
        if isinstance(cls, type) and issubclass(cls, component):
            return True
    return False


class _RefusedStart(BaseScheduler):
    """Stands in for a scheduler whose settings are invalid; :meth:`open` raises the error.

    See the module docstring for why the error waits for ``open``.
    """

    def __init__(self, error: Exception) -> None:
        self.error = error

    def open(self, spider: Spider) -> None:
        raise self.error

    def close(self, reason: str) -> None:
        return None

    def has_pending_requests(self) -> bool:
        return False

    def enqueue_request(self, request: Request) -> bool:
        return False

    def next_request(self) -> Request | None:
        return None


class TwoLevelScheduler(BaseScheduler):
    """Scrapy scheduler that ranks hosts and serves each in non-preemptive sessions.

    ``SCHEDULER = "scrapy_twolevel.scheduler.TwoLevelScheduler"``; see the docs for the
    settings and the policies' formulas.
    """

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
        settings (:mod:`scrapy_twolevel.cluster`); the frontier's state is then in Redis,
        not in JOBDIR. ``topics``: the declared topics (:mod:`scrapy_twolevel.topics`)."""
        self.df = dupefilter
        self.config = config
        self.policy = policy
        self._quality_of = quality_of
        self._host_of = host_of
        self.stats = stats
        # Bound once: Scrapy 2.19's StatsCollector wraps every method looked up on it, which
        # costs a microsecond per lookup, four times per request here.
        self._inc_stat = stats.inc_value
        self.crawler = crawler
        self.statedir = Path(jobdir, "twolevel") if jobdir else None
        self.logunser = logunser
        self._outcomes_reported = outcomes_reported
        self.frontier: TwoLevelFrontier | None = None
        self._store: SqliteStore | None = None
        self._in_flight: dict[Request, str] = {}
        #: Requests handed out from the JOBDIR file and not yet finished -> their row.
        self._leases: dict[Request, int] = {}
        self._held_back = False
        self._connected = False
        self._warned: set[str] = set()
        self._commit_timer: Any = None
        self._wake_timer: Any = None
        self._wake_at: float | None = None
        self.spider: Spider | None = None
        #: Seed recrawling (``TWOLEVEL_RECRAWL``), see :mod:`scrapy_twolevel.seeds`.
        self.seeds: SeedPlanner | None = None
        self._cluster_config = cluster if cluster is not None and cluster.enabled else None
        #: The distributed mode's state (``TWOLEVEL_REDIS_URL``), see :mod:`.cluster`.
        self.cluster: Cluster | None = None
        self._topic_specs = topics
        #: Topics (``TWOLEVEL_TOPICS``), see :mod:`scrapy_twolevel.topics`.
        self.topics: TopicTracker | None = None
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
            return _RefusedStart(exc)  # type: ignore[return-value]

    @classmethod
    def _from_crawler(cls, crawler: Crawler) -> Self:
        config, policy, quality_of = resolve_settings(crawler)
        for name, closest in unknown_settings(crawler.settings):
            logger.warning(
                "Unknown setting %(name)s is ignored%(hint)s",
                {"name": name, "hint": f"; did you mean {closest}?" if closest else "."},
            )
        from scrapy.resolver import dnscache

        dupefilter_cls = load_object(crawler.settings["DUPEFILTER_CLASS"])
        assert crawler.stats is not None
        return cls(
            dupefilter=build_from_crawler(dupefilter_cls, crawler),
            config=config,
            policy=policy,
            quality_of=quality_of,
            host_of=make_request_host(config.host_key, dnscache),
            stats=crawler.stats,
            crawler=crawler,
            jobdir=job_dir(crawler.settings),
            logunser=crawler.settings.getbool("SCHEDULER_DEBUG"),
            outcomes_reported=_metrics_middleware_enabled(crawler),
            cluster=ClusterConfig.from_settings(crawler.settings),
            topics=topic_specs(crawler.settings, getattr(crawler, "spidercls", None)),
        )

    # -- Scrapy's scheduler interface ---------------------------------------------

    def open(self, spider: Spider) -> Any:
        self.spider = spider
        try:
            self.frontier = self._open_frontier()
            if self._cluster_config is not None:
                self.cluster = Cluster(self, self._cluster_config, spider.name)
            cluster = self.cluster
            self.seeds = open_seed_planner(
                self.crawler,
                spider.name,
                encode=lambda request: encode_request(request, spider),
                decode=lambda data: decode_request(data, spider),
                enqueue=self.enqueue_request,
                shared=None
                if cluster is None
                else (cluster.history_store(), cluster.model_store()),
            )
            if cluster is not None:
                self.df.open()  # before the cluster loads its buckets' seen keys
                cluster.open()  # its buckets bring their seed plans
        except Exception:
            # Refusing to start: release what the frontier, the dupefilter and the store
            # hold, touch no file.
            if self.frontier is not None:
                self.frontier.close()
                self.frontier = None
            if self._store is not None:
                self._store.close()
                self._store = None
            if self.cluster is not None:
                self.cluster.abort()
                self.cluster = None
            self.df.close("shutdown")
            raise
        if len(self.frontier):
            logger.info(
                "Resuming crawl (%(queuesize)d requests scheduled over %(hosts)d hosts)",
                {"queuesize": len(self.frontier), "hosts": self.frontier.host_count},
                extra={"spider": spider},
            )
        self.crawler.signals.connect(self._request_left, signals.request_left_downloader)
        self.crawler.signals.connect(self._host_measured, host_measured)
        self.crawler.signals.connect(self._host_failed, host_failed)
        if self.topics is not None:
            self.crawler.signals.connect(self.topics.item_scraped, signals.item_scraped)
            self.crawler.signals.connect(self.topics.page_relevant, page_relevant)
        self._connected = True
        self.stats.set_value("twolevel/policy", self.policy.name)
        if self._store is not None:
            self._share_store_with_dupefilter(self._store)
        if self.cluster is not None:
            return None
        return self.df.open()

    def _share_store_with_dupefilter(self, store: SqliteStore) -> None:
        if store.resumed_leases:
            self.stats.set_value("twolevel/leases_resumed", store.resumed_leases)
        store.before_commit(self._release_finished)
        attach = getattr(self.df, "attach_store", None)
        if attach is not None:
            attach(store)
            return
        from scrapy.dupefilters import RFPDupeFilter

        if isinstance(self.df, RFPDupeFilter):
            logger.warning(
                "With JOBDIR, %(df)s records seen requests apart from the queue, so a killed "
                "crawl can lose URLs for good (marked seen, never fetched). Set "
                'DUPEFILTER_CLASS = "scrapy_twolevel.dupefilter.SeenCacheDupeFilter" (the '
                "add-on does) to keep both in one store.",
                {"df": type(self.df).__name__},
                extra={"spider": self.spider},
            )

    def _open_frontier(self) -> TwoLevelFrontier | TopicFrontier:
        queue_factory = memory_queue
        estimates: dict[str, HostEstimate] = {}
        if self.statedir is not None:
            self.statedir.mkdir(parents=True, exist_ok=True)
            estimates = read_hosts(self.statedir / "hosts.json")
            self._store = self._open_store(self.statedir / "frontier.sqlite3")
            queue_factory = self._store.queue
        frontier: TwoLevelFrontier | TopicFrontier
        if self._topic_specs is None:
            frontier = self._new_frontier(queue_factory)
        else:
            frontier = self._open_topics(queue_factory)
        for key, estimate in estimates.items():
            frontier.set_estimate(key, estimate)
        if self._store is not None:
            frontier.restore((key for key, _ in self._store.stored_hosts()), self._store.max_seq())
        return frontier

    def _new_frontier(self, queue_factory: Any, **shared: Any) -> TwoLevelFrontier:
        return TwoLevelFrontier(
            self.policy,
            self.config.cost,
            self.config.max_open_hosts,
            failures=self.config.failures,
            queue_factory=queue_factory,
            on_give_up=self._host_given_up,
            on_dropped=self._dropped,
            **shared,
        )

    def _open_topics(self, queue_factory: Any) -> TopicFrontier:
        """One frontier per topic; their queues in the JOBDIR file are keyed by lane."""
        assert self._topic_specs is not None
        selector = TopicSelector(self._topic_specs)
        self.topics = TopicTracker(selector, self.stats)
        if self.statedir is not None:
            self.topics.load(self.statedir / "topics.json")

        def make(topic: str, lock: Any, sequence: Any) -> TwoLevelFrontier:
            def factory(host: str, by_quality: bool) -> Any:
                return queue_factory(topic_lane(topic, host), by_quality)

            return self._new_frontier(
                factory,
                host_lock=lock,
                lock_owner=topic,
                sequence=sequence,
            )

        return TopicFrontier.build(selector, make)

    def _open_store(self, path: Path) -> SqliteStore:
        with _explained_mismatch(self.policy):
            return SqliteStore(
                path,
                cache_mb=self.config.disk_cache_mb,
                commit_interval=self.config.commit_interval,
                shape=_store_shape(self.config, self.policy, self._topic_specs),
            )

    def close(self, reason: str) -> Any:
        # First: its last commit needs the frontier's and the engine's view of the leases.
        leaving = self.cluster.close() if self.cluster is not None else None
        if self._connected:
            self.crawler.signals.disconnect(self._request_left, signals.request_left_downloader)
            self.crawler.signals.disconnect(self._host_measured, host_measured)
            self.crawler.signals.disconnect(self._host_failed, host_failed)
            if self.topics is not None:
                self.crawler.signals.disconnect(self.topics.item_scraped, signals.item_scraped)
                self.crawler.signals.disconnect(self.topics.page_relevant, page_relevant)
            self._connected = False
        for timer in (self._commit_timer, self._wake_timer):
            if timer is not None:
                timer.cancel()
        self._commit_timer = self._wake_timer = None
        if self.seeds is not None:
            close_seed_planner(self.crawler, self.seeds)
            self.seeds = None
        if self.frontier is not None and not self._outcomes_reported:
            # Dropped before download when nothing else was pending: no release was needed
            # then, so none was counted; count them now, so the stat does not depend on timing.
            self._release_dropped()
        if self._store is not None:
            self._release_finished()
        if self.frontier is not None:
            self._report_hosts()
            if self.statedir is not None:
                self._write_hosts(self.statedir / "hosts.json")
            if self.topics is not None:
                self.topics.report()
                if self.statedir is not None:
                    self.topics.save(self.statedir / "topics.json")
            self.frontier.close()
        if self._store is not None:
            self._store.close()
            self._store = None
        if leaving is not None:
            self.cluster = None
            return leaving.addBoth(lambda _: self.df.close(reason))
        return self.df.close(reason)

    def has_pending_requests(self) -> bool:
        # Planned seed refetches keep the crawl open (until TWOLEVEL_RECRAWL_DURATION), and
        # a node of a distributed crawl stays open until the whole crawl is out of work.
        return (
            len(self) > 0
            or (self.seeds is not None and self.seeds.pending())
            or (self.cluster is not None and self.cluster.busy())
        )

    def __len__(self) -> int:
        return len(self.frontier) if self.frontier is not None else 0

    def enqueue_request(self, request: Request) -> bool:
        # Everything that can fail comes before the dupefilter: once it has recorded the
        # request as seen, losing the request would lose its URL for good.
        host = self._lane(request)
        quality = self._quality(request)
        lane = host if self.topics is None else self.topics.lane(request, host)
        if self.cluster is not None:
            if not self.cluster.enqueue(request, host, quality):
                return False
            self._inc_stat("scheduler/enqueued")
            return True
        if not request.dont_filter and self.df.request_seen(request):
            self.df.log(request, self.spider)
            return False
        assert self.frontier is not None
        if self.seeds is not None:
            self.seeds.accepting(request)
        if host == PLAIN_LANE:
            self._inc_stat("twolevel/plain_lane")
        item: Any = request
        if self._store is not None:
            item = self._encode(request)
        if not self._push(lane, quality, item, request):
            return False
        self._inc_stat(
            "scheduler/enqueued/disk" if isinstance(item, bytes) else "scheduler/enqueued/memory"
        )
        self._inc_stat("scheduler/enqueued")
        return True

    def next_request(self) -> Request | None:
        frontier = self.frontier
        assert frontier is not None
        if self.seeds is not None:
            self.seeds.release_due()
        cluster = self.cluster
        if cluster is not None and not cluster.may_dispatch():
            # No heartbeat for half the node ttl: the buckets may soon be someone else's.
            self._inc_stat("twolevel/redis/held_back")
            return None
        while True:
            popped = frontier.pop()
            if popped is None and len(frontier) and self._release_dropped():
                popped = frontier.pop()
            if popped is None:
                if len(frontier):
                    self._held_back = True
                    self._inc_stat("twolevel/held_back")
                    self._arm_wake(frontier.next_retry_at())
                self._arm_commit()
                return None
            host, item = popped
            if cluster is not None:
                request = cluster.handed_out(item)
                if request is None:  # its bucket moved: the new holder has it
                    if host != PLAIN_LANE:
                        frontier.done(host)
                    continue
                self._inc_stat("scheduler/dequeued/memory")
                break
            if not isinstance(item, Leased):
                request = item
                self._inc_stat("scheduler/dequeued/memory")
                break
            try:
                request = decode_request(item.data, self.spider)
            except Exception as exc:
                assert self._store is not None
                self._store.release(item.seq)
                # A damaged row, or a class or callback the spider no longer has (renamed
                # code raises anything from ValueError to ModuleNotFoundError): nothing to
                # hand out, so the host is free again; say so once, count every case.
                if host != PLAIN_LANE:
                    frontier.done(host)
                self._count_once(
                    "undecodable",
                    "A stored request could not be rebuilt and is dropped (%(request)s).",
                    f"{type(exc).__name__}: {exc}",
                )
                continue
            self._inc_stat("scheduler/dequeued/disk")
            self._leases[request] = item.seq
            break
        self._inc_stat("scheduler/dequeued")
        if self.seeds is not None:
            self.seeds.handed_out(request)
        if host != PLAIN_LANE:
            mark_lane(request, host)
            self._in_flight[request] = host
        self._arm_commit()
        return request

    # -- signals --------------------------------------------------------------------

    def _request_left(self, request: Request, spider: Spider | None = None) -> None:
        if not self._outcomes_reported:
            self._request_done(request)

    def _host_measured(
        self, host: str, observation: dict[str, Any] | None, request: Request | None = None
    ) -> None:
        if self.frontier is None:
            return
        if observation is not None:
            self.frontier.observe(host, **observation)
        if request is not None:
            self._request_done(request)

    def _host_failed(
        self, host: str, elapsed: float, timeout: bool, request: Request | None = None
    ) -> None:
        if self.frontier is None:
            return
        self.frontier.observe_failure(host, elapsed=elapsed, timeout=timeout)
        self._inc_stat("twolevel/failures/timeout" if timeout else "twolevel/failures/other")
        if request is not None:
            self._request_done(request)

    def _request_done(self, request: Request) -> None:
        """``request`` is finished: its host may take its next one."""
        host = self._in_flight.pop(request, None)
        if host is None or self.frontier is None:
            return
        self.frontier.done(host)
        if self._held_back:
            self._held_back = False
            wake_engine(self.crawler)

    def _dropped(self, item: Any) -> None:
        if self.cluster is not None:
            self.cluster.dropped(item)

    def _host_given_up(self, host: str, dropped: int) -> None:
        self._inc_stat("twolevel/hosts_given_up")
        self._inc_stat("twolevel/dropped/host_failed", dropped)
        logger.warning(
            "Host %(host)s failed %(sessions)d sessions in a row and is given up: "
            "%(dropped)d queued requests dropped, later ones for it are dropped too "
            "(twolevel/dropped/host_failed; TWOLEVEL_FAILED_SESSIONS sets when).",
            {"host": host, "sessions": self.config.failures.failed_sessions, "dropped": dropped},
            extra={"spider": self.spider},
        )

    # -- helpers ----------------------------------------------------------------------

    def _lane(self, request: Request) -> str:
        try:
            return self._host_of(request)
        except Exception:
            self._count_once(
                "malformed_url",
                "Cannot work out the host of %(request)s; it takes "
                "the plain lane and the downloader will report it.",
                request,
            )
            return PLAIN_LANE

    def _push(self, host: str, quality: float, item: Any, request: Request) -> bool:
        assert self.frontier is not None
        try:
            accepted = self.frontier.push(host, quality, item)
        except Exception as exc:
            if item is request:
                raise
            # The disk store failed (full disk, I/O error): keep the request in memory
            # rather than lose it after the dupefilter recorded it. (``host`` is a lane.)
            self._count_once(
                "store_error",
                "The JOBDIR frontier could not store a request (%(request)s); it is kept "
                "in memory and will be lost if the crawl stops before it is fetched.",
                f"{type(exc).__name__}: {exc}",
            )
            if host != PLAIN_LANE and not host.endswith(SEP):
                self.frontier.host(host, queue_factory=memory_queue)
            accepted = self.frontier.push(host, quality, request)
        if not accepted:
            self._inc_stat("twolevel/dropped/host_failed")
        return accepted

    def _release_dropped(self) -> bool:
        """Free hosts whose request never reached the downloader (dropped by a middleware)."""
        active = requests_in_downloader(self.crawler)
        if active is None:
            return False
        dropped = [r for r in self._in_flight if r not in active]
        for request in dropped:
            host = self._in_flight.pop(request)
            assert self.frontier is not None
            self.frontier.done(host)
            self._inc_stat("twolevel/released_without_download")
        return bool(dropped)

    def _quality(self, request: Request) -> float:
        try:
            quality = self._quality_of(request)
        except Exception:  # user code (TWOLEVEL_QUALITY) can raise anything
            quality = float("nan")
        if quality != quality or quality in (float("inf"), float("-inf")):
            self._count_once(
                "invalid_quality",
                "TWOLEVEL_QUALITY gave no finite number for %(request)s; using 0.",
                request,
            )
            return 0.0
        return quality

    def _encode(self, request: Request) -> bytes | Request:
        try:
            return encode_request(request, self.spider)
        except Exception as exc:  # to_dict runs user code (callbacks, Request subclasses)
            if self.logunser:
                logger.warning(
                    "Unable to serialize request: %(request)s - reason: %(reason)s - no more "
                    "unserializable requests will be logged (stats being collected)",
                    {"request": request, "reason": exc},
                    extra={"spider": self.spider},
                )
                self.logunser = False
            self._inc_stat("scheduler/unserializable")
            return request

    def _release_finished(self) -> None:
        """Release the leases of requests the engine is done with (runs before each commit).

        The engine keeps a request in progress until its output is handled: the response's
        callback output queued, or a redirect or retry queued. Without access to that set,
        a request is finished when its outcome was reported.
        """
        if not self._leases or self._store is None:
            return
        for request in self.finished_requests(self._leases):
            self._store.release(self._leases.pop(request))

    def finished_requests(self, leased: Iterable[Request]) -> list[Request]:
        """Those of ``leased`` the engine is done with (see :meth:`_release_finished`)."""
        active = requests_in_progress(self.crawler)
        if active is None:
            active = self._in_flight
        return [r for r in leased if r not in active]

    def _arm_commit(self) -> None:
        """Commit the JOBDIR frontier within ``TWOLEVEL_COMMIT_INTERVAL`` of a write."""
        if self._store is None or self._commit_timer is not None or not self._store.uncommitted:
            return
        self._commit_timer = call_later(self.config.commit_interval, self._commit_tick)

    def _commit_tick(self) -> None:
        self._commit_timer = None
        if self._store is not None and self._store.commit_if_due() is not None:
            if self.topics is not None and self.statedir is not None:
                # With each commit, so a killed crawl resumes its topics' turns and counts
                # too (a few requests behind, which only shifts a slice).
                self.topics.save(self.statedir / "topics.json")
            self._arm_commit()

    def _arm_wake(self, retry_at: float | None) -> None:
        """Wake the engine when a backed-off host may be opened again.

        Otherwise a crawl left with only backed-off hosts waits for the engine's 5-second
        heartbeat after each back-off ends.
        """
        if retry_at is None or (self._wake_at is not None and self._wake_at <= retry_at):
            return
        if self._wake_timer is not None:
            self._wake_timer.cancel()
        assert self.frontier is not None
        delay = max(0.0, retry_at - self.frontier.now())
        self._wake_at = retry_at
        self._wake_timer = call_later(delay, self._wake)

    def _wake(self) -> None:
        self._wake_timer = self._wake_at = None
        wake_engine(self.crawler)

    def _count_once(self, what: str, message: str, subject: object) -> None:
        """Count ``twolevel/<what>``; log the first case (``message`` may use %(request)s)."""
        self._inc_stat(f"twolevel/{what}")
        if what not in self._warned:
            self._warned.add(what)
            logger.warning(
                message + " Further cases are only counted in stats (twolevel/%(what)s).",
                {"request": subject, "what": what},
                extra={"spider": self.spider},
            )

    def _report_hosts(self) -> None:
        assert self.frontier is not None
        self.stats.set_value("twolevel/hosts", self.frontier.host_count)
        # Counted by the frontier, written once: two stats calls per session cost a third
        # of the dequeue time when sessions are short.
        self.stats.set_value("twolevel/sessions", self.frontier.sessions_ended)
        self.stats.set_value("twolevel/session_requests", self.frontier.session_requests)
        top = sorted(self.frontier.hosts(), key=lambda h: -h.estimate.samples)
        for host in top[: self.config.stats_top_hosts]:
            if not host.estimate.samples:
                break
            for field, value in host.estimate.to_dict().items():
                if not field.endswith("samples"):
                    self.stats.set_value(f"twolevel/host/{host.key}/{field}", value)

    def _write_hosts(self, path: Path) -> None:
        assert self.frontier is not None
        data = {
            "format": HOSTS_FORMAT,
            "hosts": {
                h.key: h.estimate.to_dict() for h in self.frontier.hosts() if h.estimate.samples
            },
        }
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)


def read_hosts(path: Path) -> dict[str, HostEstimate]:
    """Host estimates saved in a JOBDIR; :class:`StateError` for a file that is not ours."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("format") != HOSTS_FORMAT:
            found = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise StateError(
                f"{path} holds {found!r}, expected {HOSTS_FORMAT!r}: probably a JOBDIR "
                "from another version or tool. It was left untouched; use a fresh JOBDIR."
            )
        return {k: HostEstimate.from_dict(v) for k, v in data["hosts"].items()}
    except StateError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StateError(
            f"{path} is corrupt ({exc}). It was left untouched; fix or delete it, or use a "
            "fresh JOBDIR."
        ) from exc


def check_job_state(crawler: Crawler, config: TwoLevelConfig, policy: Policy) -> None:
    """Read-only check of the JOBDIR state a resumed crawl would open.

    The middleware calls it before the spider opens, so a corrupt or mismatched file
    stops the crawl with one message; the scheduler's ``open`` checks again for real.
    In the distributed mode it checks the Redis instead: reachable, and holding no crawl
    of this id with another bucket count.
    """
    cluster = ClusterConfig.from_settings(crawler.settings)
    if cluster.enabled:
        assert cluster.redis_url is not None
        check_cluster_state(cluster, cluster.crawl_id or _spider_name(crawler))
        return
    jobdir = job_dir(crawler.settings)
    if not jobdir:
        return
    statedir = Path(jobdir, "twolevel")
    read_hosts(statedir / "hosts.json")
    topics = topic_specs(crawler.settings, getattr(crawler, "spidercls", None))
    with _explained_mismatch(policy):
        SqliteStore.inspect(statedir / "frontier.sqlite3", _store_shape(config, policy, topics))


def check_cluster_state(cluster: ClusterConfig, crawl_id: str | None) -> None:
    """Raise :class:`SettingsError` if the crawl's Redis is unreachable or disagrees."""
    from .cluster import connect
    from .distributed.buckets import BucketTable

    assert cluster.redis_url is not None
    client = connect(cluster.redis_url)
    try:
        raw = client.get(f"twolevel:{crawl_id}:table") if crawl_id else None
        if raw:
            try:
                size = BucketTable.from_json(raw).size
            except ValueError as exc:
                raise StateError(
                    f"twolevel:{crawl_id}:table in TWOLEVEL_REDIS_URL is damaged ({exc}); "
                    f"`scrapy twolevel reset --crawl-id {crawl_id}` clears the crawl."
                ) from exc
            if size != cluster.buckets:
                raise SettingsError(
                    f"TWOLEVEL_BUCKETS={cluster.buckets}, but crawl {crawl_id!r} in Redis has "
                    f"{size} buckets: every node of a crawl must use the same number."
                )
    finally:
        client.close()


def _spider_name(crawler: Crawler) -> str | None:
    spidercls = getattr(crawler, "spidercls", None)
    return getattr(spidercls, "name", None)


def _store_shape(
    config: TwoLevelConfig, policy: Policy, topics: list[TopicSpec] | None = None
) -> dict[str, str]:
    """What shapes the JOBDIR frontier: resuming under another shape would mix lanes (or,
    with other topics, leave a topic's queued requests in no frontier)."""
    order = "quality" if policy.orders_urls_by_quality else "fifo"
    names = ",".join(sorted(t.name for t in topics)) if topics else ""
    return {"TWOLEVEL_HOST_KEY": config.host_key, "url_order": order, "topics": names}


@contextmanager
def _explained_mismatch(policy: Policy) -> Iterator[None]:
    """Turn a :class:`ShapeMismatch` into a message naming the setting to change."""
    try:
        yield
    except ShapeMismatch as exc:
        if exc.key == "topics":
            raise StateError(
                f"{exc.path} was written with topics {exc.stored or '(none)'!r}, this crawl "
                f"declares {exc.wanted or '(none)'!r} (TWOLEVEL_TOPICS): its queued requests "
                "would belong to no topic. Resume with the same topics or use a fresh "
                "JOBDIR; the file was left untouched."
            ) from exc
        if exc.key == "url_order":
            raise StateError(
                f"{exc.path} queues URLs in {exc.stored} order, but TWOLEVEL_POLICY="
                f"{policy.name!r} needs {exc.wanted} order. Resume with a policy of "
                f"the same order ({_policies_of_order(exc.stored)}) or use a fresh "
                "JOBDIR; the file was left untouched."
            ) from exc
        raise StateError(
            f"{exc} Resume with {exc.key}={exc.stored!r}, or use a fresh JOBDIR: requests "
            "queued under one host key would share no lane with new ones."
        ) from exc


def _policies_of_order(order: str | None) -> str:
    by_quality = order == "quality"
    names = [n for n, cls in BUILTIN_POLICIES.items() if cls.orders_urls_by_quality == by_quality]
    return ", ".join(names)
