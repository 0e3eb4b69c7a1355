"""The distributed mode's parts, built in order: the scheduler's side of ``TWOLEVEL_REDIS_URL``.

Called by :func:`scrapy_twolevel.glue.assembly.assemble`, whose docstring gives the order.
Here: the Redis client, the crawl's recrawl history and model in Redis, the seed
planner over them, the node (:mod:`.node`), the pure bucket ownership (:mod:`.ownership`),
the store (:mod:`.store`), the frontier over it, the admission (:mod:`.admission`), the
outcome handling and the tick (:mod:`.sync`), which joins the crawl.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from ..glue.outcomes import Outcomes
from ..glue.parts import Parts, abandon
from ..glue.seed_planner import open_seed_planner
from .admission import ClusterAdmission
from .buckets import bucket_of
from .connect import connect, default_node_id
from .history import RedisHistoryStore, RedisModelStore
from .messages import ClusterMessages, report_undecodable
from .node import Node
from .ownership import Ownership
from .store import ClusterStore
from .sync import ClusterSync

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.dupefilters import BaseDupeFilter

    from ..codec import SpiderCodec
    from ..config import ClusterConfig
    from ..frontier import Frontier
    from ..glue.inflight import InFlight
    from ..glue.intake import Intake
    from ..glue.reporting import Reporter
    from ..glue.seed_planner import SeedPlanner
    from ..recrawl.planner import Plan
    from .admission import SeenKeys


def crawl_id_of(config: ClusterConfig, spider_name: str) -> str:
    """The crawl's id: ``TWOLEVEL_CRAWL_ID``, else the spider's name."""
    return config.crawl_id or spider_name


def recrawl_stores(
    redis: Any, crawl_id: str, buckets: int, intake: Intake, codec: SpiderCodec, reporter: Reporter
) -> tuple[RedisHistoryStore, RedisModelStore]:
    """The crawl's recrawl history and model in Redis (:mod:`.history`); a seed plan goes
    with its request's host's bucket (``None``: it cannot be decoded)."""

    def bucket_of_plan(plan: Plan) -> int | None:
        try:
            request = codec.decode(plan.request)
        except Exception as exc:  # damaged, or a callback this spider does not have
            report_undecodable(reporter, exc)
            return None
        return bucket_of(intake.lane(request), buckets)

    history = RedisHistoryStore(redis, crawl_id, bucket_of_plan=bucket_of_plan)
    return history, RedisModelStore(redis, crawl_id)


def assemble_cluster(
    *,
    crawler: Crawler,
    spider: Spider,
    config: ClusterConfig,
    make_frontier: Callable[[ClusterStore], Frontier],
    dupefilter: SeenKeys,
    intake: Intake,
    inflight: InFlight,
    reporter: Reporter,
    codec: SpiderCodec,
    enqueue: Callable[[Any], bool],
    wake: Callable[[], object],
    stop: Callable[[str], object],
) -> Parts:
    """The parts of a node of a distributed crawl; raises what refuses to start, after
    releasing the connection and what the frontier holds."""
    assert config.redis_url is not None
    redis = connect(config.redis_url)
    crawl_id = crawl_id_of(config, spider.name)
    node_id = config.node_id or default_node_id()
    seeds: SeedPlanner | None = None
    frontier: Frontier | None = None
    sync: ClusterSync | None = None
    try:
        history, model = recrawl_stores(redis, crawl_id, config.buckets, intake, codec, reporter)
        seeds = open_seed_planner(
            crawler,
            spider,
            enqueue=enqueue,
            inflight=inflight,
            shared=(history, model),
        )
        node = Node(
            redis,
            crawl_id,
            node_id,
            buckets=config.buckets,
            ttl=config.node_ttl,
            rebalance_every=config.rebalance_interval,
            rebalance_tolerance=config.rebalance_tolerance,
        )
        ownership = Ownership()
        counts: Counter[str] = Counter()
        store = ClusterStore(
            ownership=ownership,
            heartbeat_fresh=node.may_dispatch,
            buckets=config.buckets,
            codec=codec,
            seen=dupefilter,
            inflight=inflight,
            reporter=reporter,
            counts=counts,
        )
        frontier = make_frontier(store)
        admission = ClusterAdmission(
            ownership=ownership,
            store=store,
            frontier=frontier,
            buckets=config.buckets,
            intake=intake,
            codec=codec,
            seen=dupefilter,
            seeds=seeds,
            reporter=reporter,
            counts=counts,
        )
        outcomes = Outcomes(frontier=frontier, inflight=inflight, reporter=reporter, wake=wake)
        sync = ClusterSync(
            node=node,
            redis=redis,
            crawl_id=crawl_id,
            node_id=node_id,
            buckets=config.buckets,
            sync_interval=config.sync_interval,
            wait_for_work=config.wait_for_work,
            ownership=ownership,
            store=store,
            admission=admission,
            frontier=frontier,
            seen=dupefilter,
            seeds=seeds,
            history=history,
            inflight=inflight,
            reporter=reporter,
            messages=ClusterMessages(reporter),
            counts=counts,
            queued=frontier.__len__,
            wake=wake,
            stop=stop,
        )
        sync.join()  # the buckets bring their requests and seed plans
    except Exception:
        abandon(crawler, dupefilter, seeds, frontier, sync.abort if sync else redis.close)
        raise
    return Parts(
        cast("BaseDupeFilter", dupefilter), seeds, store, frontier, admission, outcomes, sync
    )
