"""The scheduler's parts, built once, in the order they depend on each other.

:func:`assemble` is the one place the object graph is written:

1. *(distributed mode)* the Redis client, the crawl's recrawl stores in Redis, the node;
2. the **seed planner** (``TWOLEVEL_RECRAWL``), over those stores or the history files;
3. the **request store** (memory, the ``JOBDIR`` file, or the cluster's), which the
   frontier queues through;
4. the **frontier** over the store's queues (one per topic with ``TWOLEVEL_TOPICS``),
   given what a resumed crawl kept;
5. the **admission** of new requests (:mod:`.admission`), over the store and the frontier;
6. the **outcome** handling (:mod:`.outcomes`);
7. *(distributed mode)* the **tick** (:mod:`~scrapy_twolevel.distributed.sync`), which
   joins the crawl: its buckets bring their requests and seed plans.

Each part is handed what it needs when it is built; nothing is assigned to a part after.
Where two parts call each other the later one is handed the earlier (the frontier tells
the store of dropped items and budgeted pages; the admission queues into the frontier).
:class:`~.parts.Parts` holds them, frozen, and fans out the crawl's life cycle
(``start``, ``leave``, ``close``). If building fails, what
was built is released and nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..frontier import Frontier, TwoLevelFrontier
from ..frontier.topic_frontier import TopicFrontier, topic_lane
from .admission import LocalAdmission
from .jobdir import JobdirStore
from .outcomes import Outcomes
from .parts import Parts, abandon
from .preflight import store_shape
from .seed_planner import SeedPlanner, open_seed_planner
from .store import MemoryStore, RequestStore

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.dupefilters import BaseDupeFilter

    from ..codec import SpiderCodec
    from ..config import ClusterConfig, TwoLevelConfig
    from ..distributed.admission import SeenKeys
    from ..frontier import HostQueue, Policy
    from ..frontier.topic_frontier import TopicSpec
    from .inflight import InFlight
    from .intake import Intake
    from .reporting import Reporter
    from .topic_tracker import TopicTracker


def assemble(
    *,
    crawler: Crawler,
    spider: Spider,
    config: TwoLevelConfig,
    policy: Policy,
    dupefilter: BaseDupeFilter,
    intake: Intake,
    topics: TopicTracker | None,
    topic_specs: list[TopicSpec] | None,
    inflight: InFlight,
    reporter: Reporter,
    codec: SpiderCodec,
    statedir: Path | None,
    cluster: ClusterConfig | None,
    enqueue: Callable[[Any], bool],
    wake: Callable[[], object],
    stop: Callable[[str], object],
) -> Parts:
    """Build the parts (see the module docstring); raises what a part refuses to start
    with, after releasing what was built. ``enqueue``: the scheduler's, for the seed
    planner's refetches; ``wake``: ask the engine for requests; ``stop``: close the spider
    with a reason."""
    if cluster is not None:
        from ..distributed.assembly import assemble_cluster

        return assemble_cluster(
            crawler=crawler,
            spider=spider,
            config=cluster,
            make_frontier=lambda store: build_frontier(config, policy, topics, store, reporter),
            dupefilter=cast("SeenKeys", dupefilter),  # checked at start-up
            intake=intake,
            inflight=inflight,
            reporter=reporter,
            codec=codec,
            enqueue=enqueue,
            wake=wake,
            stop=stop,
        )
    seeds: SeedPlanner | None = None
    store: MemoryStore | JobdirStore | None = None
    frontier: Frontier | None = None
    try:
        seeds = open_seed_planner(
            crawler,
            spider,
            enqueue=enqueue,
            inflight=inflight,
        )
        if statedir is None:
            store = MemoryStore(reporter, spider, encoded=config.memory_queue == "encoded")
        else:
            store = JobdirStore(
                statedir=statedir,
                policy=policy,
                shape=store_shape(config, policy, topic_specs),
                cache_mb=config.disk_cache_mb,
                commit_interval=config.commit_interval,
                codec=codec,
                inflight=inflight,
                topics=topics,
                reporter=reporter,
            )
        frontier = build_frontier(config, policy, topics, store, reporter)
        store.restore(frontier)
    except Exception:
        abandon(crawler, dupefilter, seeds, frontier, store.close if store else lambda: None)
        raise
    admission = LocalAdmission(
        dupefilter=dupefilter,
        intake=intake,
        store=store,
        frontier=frontier,
        seeds=seeds,
        reporter=reporter,
    )
    outcomes = Outcomes(frontier=frontier, inflight=inflight, reporter=reporter, wake=wake)
    return Parts(dupefilter, seeds, store, frontier, admission, outcomes, None)


def build_frontier(
    config: TwoLevelConfig,
    policy: Policy,
    topics: TopicTracker | None,
    store: RequestStore,
    reporter: Reporter,
) -> Frontier:
    """The frontier over ``store``'s queues; with topics, one per topic, whose queues (and
    page counts) are keyed by lane."""

    def new(queue_factory: Callable[[str, bool], HostQueue], **shared: Any) -> TwoLevelFrontier:
        return TwoLevelFrontier(
            policy,
            config.cost,
            config.max_open_hosts,
            failures=config.failures,
            queue_factory=queue_factory,
            on_give_up=reporter.host_given_up,
            on_session_end=reporter.sessions.ended,
            on_dropped=store.discard,
            min_gap=config.host_delay,
            budget=config.budget(),
            extend_sessions=config.extend_sessions,
            **shared,
        )

    on_page = store.on_page
    if topics is None:
        return new(store.make_queue, on_page=on_page)

    def make(topic: str, lock: Any, sequence: Any) -> TwoLevelFrontier:
        def factory(host: str, by_quality: bool) -> HostQueue:
            return store.make_queue(topic_lane(topic, host), by_quality)

        def pages(host: str, fetched: int) -> None:
            if on_page is not None:
                on_page(topic_lane(topic, host), fetched)

        return new(factory, host_lock=lock, lock_owner=topic, sequence=sequence, on_page=pages)

    return TopicFrontier.build(topics.selector, make)
