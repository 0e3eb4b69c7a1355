"""What the scheduler tells the user: stats for everything, a log line once per kind.

A problem that can repeat per request (a URL whose host cannot be worked out, a stored
request that cannot be rebuilt) is logged the first time and counted every time, as
Scrapy's own dupefilter does, so a million bad URLs do not bury the log.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..frontier.hosts import GIVEN_UP_BUDGET, GIVEN_UP_FAILING

if TYPE_CHECKING:
    from collections import Counter

    from scrapy import Spider
    from scrapy.statscollectors import StatsCollector

    from ..distributed.batch import SyncResult
    from ..frontier import Frontier

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


class Reporter:
    """The crawl's stats, and warnings logged once per kind."""

    def __init__(self, stats: StatsCollector, spider: Spider | None = None) -> None:
        """``spider``: named in the log lines' ``extra``."""
        self.stats = stats
        # Bound once: Scrapy 2.19's StatsCollector wraps every method looked up on it, which
        # costs a microsecond per lookup, four times per request here.
        self.inc = stats.inc_value
        self.set = stats.set_value
        self.spider = spider
        self._warned: set[str] = set()

    def count_once(self, what: str, message: str, subject: object) -> None:
        """Count ``twolevel/<what>``; log the first case (``message`` may use %(request)s)."""
        self.inc(f"twolevel/{what}")
        if what not in self._warned:
            self._warned.add(what)
            self.warning(
                message + " Further cases are only counted in stats (twolevel/%(what)s).",
                {"request": subject, "what": what},
            )

    def warning(self, message: str, args: dict[str, Any] | None = None) -> None:
        # No args, no formatting: logging formats a lone empty dict as a tuple, and fails.
        logger.warning(message, *((args,) if args else ()), extra={"spider": self.spider})

    def info(self, message: str, args: dict[str, Any] | None = None) -> None:
        logger.info(message, *((args,) if args else ()), extra={"spider": self.spider})

    def leave_failed(self, crawl_id: str, error: Exception) -> None:
        logger.error(
            "Could not leave crawl %(crawl)s cleanly (%(error)s): the other nodes will reap "
            "this node after TWOLEVEL_NODE_TTL and fetch its leased requests.",
            {"crawl": crawl_id, "error": error},
            extra={"spider": self.spider},
        )

    def apply_failed(self) -> None:
        """Inside an ``except``: logged with its traceback."""
        logger.exception(
            "Applying a tick's result failed; the node goes on ticking.",
            extra={"spider": self.spider},
        )

    def undecodable(self, error: Exception) -> None:
        self.count_once(
            "undecodable",
            "A request from Redis could not be rebuilt and is dropped (%(request)s).",
            f"{type(error).__name__}: {error}",
        )

    def node_reaped(self, leases: int) -> None:
        self.warning(
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
        self.warning(
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
        self.warning(
            "Cannot reach Redis at TWOLEVEL_REDIS_URL (%(error)s); retrying with back-off. "
            "Requests are kept here; this node stops handing out requests after "
            "TWOLEVEL_NODE_TTL / 2 without Redis.",
            {"error": error},
        )

    def host_given_up(self, host: str, dropped: int, why: str = GIVEN_UP_FAILING) -> None:
        if why == GIVEN_UP_BUDGET:
            self.inc("twolevel/hosts_at_budget")
            self.inc("twolevel/dropped/budget", dropped)
            self.info(
                "Host %(host)s has had its page budget: %(dropped)d queued requests dropped, "
                "later ones for it are dropped too (twolevel/dropped/budget; "
                "TWOLEVEL_HOST_BUDGET and TWOLEVEL_HOST_BUDGETS set it).",
                {"host": host, "dropped": dropped},
            )
            return
        self.inc("twolevel/hosts_given_up")
        self.inc("twolevel/dropped/host_failed", dropped)
        self.warning(
            "Host %(host)s is given up: %(dropped)d queued requests dropped, later ones for "
            "it are dropped too (twolevel/dropped/host_failed). A host that never answered "
            "is given up after TWOLEVEL_FAILED_SESSIONS failed sessions in a row, one that "
            "answered before after failing for TWOLEVEL_GIVE_UP_AFTER seconds; set either "
            "to 0 to keep failing hosts.",
            {"host": host, "dropped": dropped},
        )

    def crawl_delay(self, host: str, delay: float) -> None:
        """Log once per host that its robots.txt ``Crawl-delay`` is honoured."""
        if f"crawl_delay:{host}" not in self._warned:
            self._warned.add(f"crawl_delay:{host}")
            self.info(
                "robots.txt of %(host)s asks for Crawl-delay: %(delay)s; its requests start "
                "at least that far apart (TWOLEVEL_CRAWL_DELAY = False to ignore it).",
                {"host": host, "delay": delay},
            )

    def report_hosts(self, frontier: Frontier, top_hosts: int) -> None:
        """Frontier totals, and the estimates of the ``top_hosts`` most measured hosts."""
        self.set("twolevel/hosts", frontier.host_count)
        # Counted by the frontier, written once: two stats calls per session cost a third
        # of the dequeue time when sessions are short.
        self.set("twolevel/sessions", frontier.sessions_ended)
        self.set("twolevel/session_requests", frontier.session_requests)
        refusing = sorted(
            (h for h in frontier.hosts() if h.estimate.refusals), key=lambda h: -h.estimate.refusals
        )
        self.set("twolevel/hosts_refusing", len(refusing))
        for host in refusing[:top_hosts]:  # where the refusals were, bounded like the rest
            self.set(f"twolevel/host/{host.key}/refusals", host.estimate.refusals)
        top = sorted(frontier.hosts(), key=lambda h: -h.estimate.samples)
        for host in top[:top_hosts]:
            if not host.estimate.samples:
                break
            for field, value in host.estimate.to_dict().items():
                if not field.endswith("samples"):
                    self.set(f"twolevel/host/{host.key}/{field}", value)

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
            self.info(
                "Rebalanced the crawl by pending requests: %(moves)d bucket(s) move from "
                "the busiest node to the idlest (TWOLEVEL_REBALANCE_INTERVAL).",
                {"moves": result.rebalanced},
            )
        if result.reaped:
            self.warning(
                "Reaped node(s) %(nodes)s (no heartbeat for TWOLEVEL_NODE_TTL); their "
                "buckets and inboxes went to the live nodes.",
                {"nodes": ", ".join(result.reaped)},
            )
        if result.damaged_entries:
            self.count_once(
                "redis/inbox_damaged",
                "A damaged entry in this node's inbox was dropped (%(request)s).",
                f"{result.damaged_entries} entries",
            )
        for bucket in result.damaged_seen:
            self.count_once(
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
        put = self.set
        put("twolevel/redis/node", node_id)
        put("twolevel/redis/crawl_id", crawl_id)
        put("twolevel/redis/buckets_owned", buckets_owned)
        put("twolevel/redis/sync_cpu_seconds", round(sync_cpu, 3))
        names = {*ALWAYS_REPORTED, *counts}
        if recrawl:
            names.update(RECRAWL_REPORTED)
        for name in sorted(names):
            put(f"twolevel/redis/{name}", counts.get(name, 0))
