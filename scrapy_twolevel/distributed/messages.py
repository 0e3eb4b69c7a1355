"""What the distributed mode tells the user: its warnings, and its stats at close.

Kept apart from the generic :class:`~scrapy_twolevel.glue.reporting.Reporter` (stats,
once-only warnings), which it writes through.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections import Counter

    from ..glue.reporting import Reporter
    from .batch import SyncResult

logger = logging.getLogger(__name__)

#: Stats the distributed mode sets at close even when zero (``twolevel/redis/<name>``).
ALWAYS_REPORTED = (
    "round_trips",
    "stored",
    "routed_out",
    "routed_in",
    "buckets_taken",
    "buckets_given",
    "loaded",
    "refused",
    "reaped",
    "rejoined",
    "rebalanced",
)
#: How many URLs of lost requests a leaving node names in its log.
LOST_URLS_SHOWN = 20
#: Also reported with ``TWOLEVEL_RECRAWL``.
RECRAWL_REPORTED = ("plans_loaded",)


def report_undecodable(reporter: Reporter, error: Exception) -> None:
    """A request read from Redis could not be rebuilt: said once, counted every time."""
    reporter.count_once(
        "undecodable",
        "A request from Redis could not be rebuilt and is dropped (%(request)s).",
        f"{type(error).__name__}: {error}",
    )


class ClusterMessages:
    """The distributed mode's log lines and ``twolevel/redis/...`` stats."""

    def __init__(self, reporter: Reporter) -> None:
        self._reporter = reporter

    def leave_failed(self, crawl_id: str, error: Exception) -> None:
        logger.error(
            "Could not leave crawl %(crawl)s cleanly (%(error)s): the other nodes will reap "
            "this node after TWOLEVEL_NODE_TTL and fetch its leased requests.",
            {"crawl": crawl_id, "error": error},
            extra={"spider": self._reporter.spider},
        )

    def apply_failed(self) -> None:
        """Inside an ``except``: logged with its traceback."""
        logger.exception(
            "Applying a tick's result failed; the node goes on ticking.",
            extra={"spider": self._reporter.spider},
        )

    def node_reaped(self, leases: int) -> None:
        self._reporter.warning(
            "This node was reaped (no heartbeat for TWOLEVEL_NODE_TTL): its %(leases)d "
            "requests in flight were refused and will be fetched by the new holders; it "
            "has joined again.",
            {"leases": leases},
        )

    def local_only_lost(self, urls: list[str]) -> None:
        """A leaving node names the requests it drops: Scrapy's graceful stop does not
        wait for queued requests, and these have no copy in Redis (nor their seen keys),
        so another node fetches one only if it finds a link to it again."""
        if not urls:
            return
        more = len(urls) - LOST_URLS_SHOWN
        self._reporter.warning(
            "%(count)d requests that cannot be encoded were still queued when this node "
            "left; they have no copy in Redis, so each is lost unless another node finds a "
            "link to it again: %(urls)s%(more)s. Keep callbacks spider methods and meta "
            "values JSON-friendly.",
            {
                "count": len(urls),
                "urls": ", ".join(urls[:LOST_URLS_SHOWN]),
                "more": f" and {more} more" if more > 0 else "",
            },
        )

    def redis_unreachable(self, error: str) -> None:
        self._reporter.warning(
            "Cannot reach Redis at TWOLEVEL_REDIS_URL (%(error)s); retrying with back-off. "
            "Requests are kept here; this node stops handing out requests after "
            "TWOLEVEL_NODE_TTL / 2 without Redis.",
            {"error": error},
        )

    def tick_result(self, result: SyncResult, counts: Counter[str]) -> None:
        """Count what a distributed tick did, and say what a user must hear of it."""
        counts.update(
            round_trips=result.round_trips,
            stored=result.stored,
            routed_out=result.routed,
            refused=result.refused,
            reaped=len(result.reaped),
            rerouted=result.rerouted,
            seen_compacted=result.seen_compacted,
        )
        if result.rebalanced:
            counts["rebalanced"] += result.rebalanced
            self._reporter.info(
                "Rebalanced the crawl by pending requests: %(moves)d bucket(s) move from "
                "the busiest node to the idlest (TWOLEVEL_REBALANCE_INTERVAL).",
                {"moves": result.rebalanced},
            )
        if result.reaped:
            self._reporter.warning(
                "Reaped node(s) %(nodes)s (no heartbeat for TWOLEVEL_NODE_TTL); their "
                "buckets and inboxes went to the live nodes.",
                {"nodes": ", ".join(result.reaped)},
            )
        if result.damaged_entries:
            self._reporter.count_once(
                "redis/inbox_damaged",
                "A damaged entry in this node's inbox was dropped (%(request)s).",
                f"{result.damaged_entries} entries",
            )
        for bucket in result.damaged_seen:
            self._reporter.count_once(
                "redis/seen_damaged",
                "The seen keys of a bucket in Redis are damaged; its requests were loaded "
                "without them, so pages it had seen may be fetched again (%(request)s).",
                f"bucket {bucket}",
            )

    def report_cluster(
        self,
        node_id: str,
        crawl_id: str,
        buckets_owned: int,
        sync_cpu: float,
        counts: Mapping[str, int],
        *,
        recrawl: bool,
    ) -> None:
        """The distributed mode's stats (``twolevel/redis/...``), when the node leaves."""
        put = self._reporter.set
        put("twolevel/redis/node", node_id)
        put("twolevel/redis/crawl_id", crawl_id)
        put("twolevel/redis/buckets_owned", buckets_owned)
        put("twolevel/redis/sync_cpu_seconds", round(sync_cpu, 3))
        names = {*ALWAYS_REPORTED, *counts}
        if recrawl:
            names.update(RECRAWL_REPORTED)
        for name in sorted(names):
            put(f"twolevel/redis/{name}", counts.get(name, 0))
