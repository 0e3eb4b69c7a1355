"""Seed pages in a crawl: refetched when the recrawl planner expects new links on them.

Turn it on with ``TWOLEVEL_RECRAWL = True`` (the two-level scheduler is required) and mark
the seed pages in the spider::

    yield scrapy.Request(url, meta={"twolevel_seed": True})   # key: host/first-segment
    yield scrapy.Request(url, meta={"twolevel_seed": "site/sport"})  # an explicit key

What happens then, piece by piece:

1. The scheduler accepts a seed request as usual (the first time through the seen
   filter) and keeps a **plan** for its seed key: the request to send and when. Each
   fetch is named in ``meta["twolevel_seed_fetch"] = [seed_key, fetch_id]``.
2. :class:`~scrapy_twolevel.seeds.SeedMiddleware` (a spider middleware, added by
   :class:`~scrapy_twolevel.Addon`) tags every request the seed page's callback yields with
   ``meta["twolevel_found_on_seed"] = [seed_key, fetch_id]``. The scheduler counts those
   its seen filter lets through: the fetch's **new links**, each recorded as an article.
3. When the engine is done with the seed's request (its callback output handled, every
   new link queued: Scrapy processes callback output concurrently, so the end of the
   callback's iterator is too early), the fetch is complete: it is recorded in the
   history (time, new links) and the planner answers the seed's next fetch time
   (:meth:`~scrapy_twolevel.recrawl.planner.RecrawlPlanner.next_fetch`).
4. When a plan comes due, the scheduler queues a copy of the seed request with
   ``dont_filter=True`` (the seed itself bypasses the seen filter; its links do not) and
   wakes the engine; meanwhile the crawl stays open (``has_pending_requests``) until
   ``TWOLEVEL_RECRAWL_DURATION`` or Scrapy's ``CLOSESPIDER_TIMEOUT`` ends it.
5. Responses to tagged links go through the publish-time extractor
   (:mod:`~scrapy_twolevel.recrawl.publish_time`); their times complete the history that
   ``scrapy recrawl train`` learns from (the midpoint rule covers pages without one).

A queued seed fetch also gets a provisional next time (twice its last interval, at least
``TWOLEVEL_RECRAWL_INITIAL_INTERVAL``), replaced when the fetch completes: a fetch lost on
the way (a request a middleware dropped, a kill) delays the seed; it never stops it. A
fetch that ends without a response reaching the callback (a failed download, a non-2xx
answer, a redirect, whose new request is a fetch of its own) or whose callback raised
plans the next try ``TWOLEVEL_RECRAWL_INITIAL_INTERVAL`` later without counting the
fetch.

The history and plans live in one SQLite file (:mod:`~scrapy_twolevel.storage.recrawl_history`):
``JOBDIR/twolevel/recrawl.sqlite3``, else ``TWOLEVEL_RECRAWL_HISTORY``, else
``.scrapy/twolevel/<spider>/recrawl.sqlite3`` in the project, so successive crawls of a
spider add to one history; the plans (the schedule) carry over only to a resumed ``JOBDIR``
crawl. Times are planner time (:mod:`~scrapy_twolevel.recrawl.clock`).
"""

from __future__ import annotations

import heapq
import logging
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.http import TextResponse
from scrapy.utils.job import job_dir
from scrapy.utils.project import data_path
from twisted.internet.defer import Deferred

from .. import meta as meta_keys
from .._engine import peek_meta, wake_engine
from ..codec import decode_request, encode_request
from ..config import RecrawlConfig
from ..errors import StateError
from ..recrawl.clock import ScaledClock
from ..recrawl.model import RecrawlPredictor, fit_predictor
from ..recrawl.planner import Plan, RecrawlPlanner
from ..recrawl.publish_time import extract_publish_time
from ..recrawl.samples import seed_key
from ..signals import article_fetched, seed_page_failed, seed_page_received
from ..storage.model_store import FileModelStore, ModelStore, load_stored_model
from ..storage.recrawl_history import HistoryStore
from .timers import Alarm, Timer

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector

    from ..distributed.history import RedisHistoryStore
    from .inflight import InFlight

logger = logging.getLogger(__name__)

#: Real seconds between commits of the history file.
COMMIT_INTERVAL = 1.0
#: Real seconds added to each wake-up timer, so it does not fire before the plan is due.
WAKE_SLACK = 0.002
#: Fetches replayed into the planner at open, so its online correction survives a restart.
REPLAY_DAYS = 7


def seed_key_of(request: Request) -> str | None:
    """The seed key of a seed request, ``None`` for any other request."""
    mark = peek_meta(request).get(meta_keys.SEED)
    if not mark:
        return None
    if isinstance(mark, str):
        return mark
    return seed_key(request.url)


def recrawl_paths(settings: BaseSettings, spider_name: str) -> tuple[Path, Path]:
    """``(history file, model file)`` of a spider's crawl, as the settings place them."""
    config = RecrawlConfig.from_settings(settings)
    jobdir = job_dir(settings)
    if config.history:
        history = Path(config.history)
    elif jobdir:
        history = Path(jobdir, "twolevel", "recrawl.sqlite3")
    else:
        history = Path(data_path(Path("twolevel", spider_name)), "recrawl.sqlite3")
    model = Path(config.model) if config.model else history.with_name("recrawl-model.json")
    return history, model


def _history_refused(exc: Exception) -> None:
    logger.warning(
        "The recrawl history file refuses writes (%s): the crawl goes on, its URLs are "
        "kept, and the observations the file does not take are lost "
        "(twolevel/recrawl/history_lost).",
        exc,
    )


def make_clock(config: RecrawlConfig) -> ScaledClock:
    if config.time_scale != 1.0 and config.time_origin is None:
        raise ValueError(
            "TWOLEVEL_RECRAWL_TIME_SCALE needs TWOLEVEL_RECRAWL_TIME_ORIGIN (epoch seconds), "
            "so that the crawl and the site agree on the time"
        )
    return ScaledClock(config.time_scale, config.time_origin)


def make_planner(
    config: RecrawlConfig, predictor: RecrawlPredictor | None, clock: Callable[[], float]
) -> RecrawlPlanner:
    return RecrawlPlanner(
        predictor,
        budget=config.budget,
        gamma=config.gamma,
        threshold=None if config.budget is not None else config.threshold,
        min_interval=config.min_interval,
        max_interval=config.max_interval,
        list_size=config.list_size,
        initial_interval=config.initial_interval,
        clock=clock,
    )


def _fetch_id(meta: Any) -> str | None:
    tag = meta.get(meta_keys.SEED_FETCH)
    return tag[1] if isinstance(tag, list | tuple) and len(tag) == 2 else None


@dataclass
class _Fetch:
    seed: str
    at: float | None = None  # when the response reached the spider (planner time)
    previous: float | None = None  # the seed's fetch before this one
    new_links: int = 0
    failed: bool = False  # the callback (or a spider middleware) raised


class SeedPlanner:
    """The scheduler's side of seed recrawling: plans, refetches, the history.

    The scheduler calls :meth:`accepting` for every request its seen filter lets through,
    :meth:`handed_out` for every request it gives the engine (a seed's fetch is leased in
    the in-flight registry, which calls :meth:`finished` once the engine is done with it),
    :meth:`release_due` before each dequeue, and :meth:`pending` from
    ``has_pending_requests``; the rest arrives by signals from
    :class:`~scrapy_twolevel.seeds.SeedMiddleware`.
    """

    def __init__(
        self,
        *,
        config: RecrawlConfig,
        history: HistoryStore | RedisHistoryStore,
        planner: RecrawlPlanner,
        clock: ScaledClock,
        model_store: ModelStore,
        encode: Callable[[Request], bytes],
        decode: Callable[[bytes], Request],
        enqueue: Callable[[Request], bool],
        stats: StatsCollector,
        wake: Callable[[], object],
        inflight: InFlight,
        real_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``inflight``: the registry that tells when the engine is done with a seed's fetch."""
        self.config = config
        self.history = history
        self.planner = planner
        self.clock = clock
        self.model_store = model_store
        self._encode = encode
        self._decode = decode
        self._enqueue = enqueue
        self._stats = stats
        self._wake_engine = wake
        self._inflight = inflight
        self._real = real_clock
        self._opened_at = real_clock()
        self._plans: dict[str, Plan] = {p.seed: p for p in history.plans()}
        self._heap: list[tuple[float, str]] = [(p.due, p.seed) for p in self._plans.values()]
        heapq.heapify(self._heap)
        self._intervals: dict[str, float] = {}
        self._last_fetch: dict[str, float] = {}
        self._fetches: dict[str, _Fetch] = {}
        self._run = os.urandom(4).hex()  # fetch ids stay unique across resumed runs
        self._next_id = 0
        #: Wakes the engine when the next plan is due (on the planner's clock).
        self._wake = Alarm(
            self._wake_engine,
            self.clock,
            lambda due: max(0.0, self.clock.to_real_delay(due - self.clock())) + WAKE_SLACK,
        )
        self._commit_timer = Timer(self._commit)
        self._deadline_timer = Timer(self._deadline)
        #: Fires when the retraining in flight ends; ``None`` when none is.
        self._training: Deferred[Any] | None = None
        self._trained_at: float | None = None
        self._replay()
        if self._plans:
            self._stats.set_value("twolevel/recrawl/plans_resumed", len(self._plans))
        if config.duration:
            self._deadline_timer.arm(config.duration)
        self._arm_wake()

    def _replay(self) -> None:
        """Feed the last days' fetches to the planner: its per-seed state is not saved."""
        now = self.clock()
        for seed, at, new_links in self.history.fetches(since=now - REPLAY_DAYS * 86400):
            self.planner.next_fetch(seed, at, new_links)
            self._last_fetch[seed] = at

    # -- called by the scheduler ---------------------------------------------------------

    def accepting(self, request: Request) -> bool:
        """``request`` passed the seen filter and is about to be queued; whether its meta
        changed (a seed's fetch is named in it: a stored copy must be encoded again)."""
        meta = peek_meta(request)
        found_on = meta.get(meta_keys.FOUND_ON_SEED)
        if found_on:
            self._new_link(request, found_on)
        key = seed_key_of(request)
        if key is None:
            return False
        if _fetch_id(meta) in self._fetches:
            return False  # a refetch this planner queued
        template = self._template(request)
        meta_keys.set_own(
            request.meta, request.url, meta_keys.SEED_FETCH, [key, self._new_fetch(key)]
        )
        if template is not None:
            self._stats.inc_value("twolevel/recrawl/seed_requests")
            self._set_plan(Plan(key, self._provisional(key), template))
        return True

    def handed_out(self, request: Request) -> None:
        """The scheduler gives ``request`` to the engine."""
        meta = peek_meta(request)
        fetch_id = _fetch_id(meta)
        if fetch_id is None:
            return
        if fetch_id not in self._fetches:
            # Queued by an earlier run (a JOBDIR resume), or a retry of a finished fetch.
            self._fetches[fetch_id] = _Fetch(meta[meta_keys.SEED_FETCH][0])
        self._inflight.lease(request, self, fetch_id)

    def release_due(self) -> None:
        """Finish the fetches the engine is done with; queue every seed that is due."""
        self._inflight.collect()
        heap = self._heap
        now = self.clock()
        if not heap or heap[0][0] > now or self.expired:
            # A timer may fire a little early (event loops round their clocks): re-arm.
            self._arm_wake()
            return
        while heap and heap[0][0] <= now:
            due, key = heapq.heappop(heap)
            plan = self._plans.get(key)
            if plan is None or plan.due != due:
                continue  # replaced by a later plan
            try:
                request = self._decode(plan.request).replace(dont_filter=True)
            except Exception as exc:
                del self._plans[key]
                logger.error("Seed %s dropped: its stored request cannot be rebuilt (%s)", key, exc)
                self._stats.inc_value("twolevel/recrawl/undecodable")
                continue
            meta_keys.set_own(
                request.meta, request.url, meta_keys.SEED_FETCH, [key, self._new_fetch(key)]
            )
            self._set_plan(Plan(key, self._provisional(key), plan.request))
            self._stats.inc_value("twolevel/recrawl/refetches")
            self._enqueue(request)
        self._arm_wake()

    def adopt_plans(self, plans: Iterable[Plan]) -> None:
        """Plans another node made, of a bucket this node just took (distributed mode):
        kept and followed, not written again."""
        for plan in plans:
            self._plans[plan.seed] = plan
            heapq.heappush(self._heap, (plan.due, plan.seed))
        self._arm_wake()

    def adopt_stored(self, history: RedisHistoryStore, bucket: int, raw: dict[bytes, bytes]) -> int:
        """The stored plans of a bucket this node just took; how many it adopted. A damaged
        one is skipped, counted (``twolevel/redis/plans_damaged``) and logged."""
        plans, damaged = history.adopt(bucket, raw)
        self.adopt_plans(plans)
        if damaged:
            self._stats.inc_value("twolevel/redis/plans_damaged", damaged)
            logger.warning("%d damaged seed plan(s) in Redis skipped (bucket %d).", damaged, bucket)
        return len(plans)

    def reloaded(self, request: Request) -> None:
        """A seed fetch another node had queued or in flight when it left or died, queued
        here again (a bucket taken over): its plan is pushed back as :meth:`release_due`
        does for a fetch it queues, so the plan, overdue by now, does not fetch the seed a
        second time at once."""
        tag = peek_meta(request).get(meta_keys.SEED_FETCH)
        plan = self._plans.get(tag[0]) if isinstance(tag, list | tuple) and tag else None
        if plan is not None:
            self._set_plan(Plan(plan.seed, self._provisional(plan.seed), plan.request))

    def drop_plans(self, seeds: Iterable[str]) -> None:
        """Forget the plans of ``seeds``: their bucket went to another node, which loads
        them (a fetch of theirs still in flight here then plans nothing)."""
        for seed in seeds:
            self._plans.pop(seed, None)  # its heap entry is skipped as stale

    def plan_rows(self, limit: int) -> list[dict[str, Any]]:
        """The next ``limit`` planned refetches, soonest first, for the live view: in how
        many planner seconds each is due, its last interval, the model's rate now."""
        now, predictor = self.clock(), self.planner.predictor
        rows = []
        for plan in heapq.nsmallest(limit, self._plans.values(), key=lambda p: p.due):
            rate = predictor.rate(plan.seed, now) if predictor is not None else None
            interval = self._intervals.get(plan.seed)
            rows.append(
                {
                    "seed": plan.seed,
                    "due_in_s": round(plan.due - now, 1),
                    "interval_s": None if interval is None else round(interval, 1),
                    "articles_per_hour": None if rate is None else round(3600 * rate, 3),
                }
            )
        return rows

    def pending(self) -> bool:
        """Whether the crawl must stay open for planned refetches."""
        return bool(self._plans) and not self.expired

    @property
    def expired(self) -> bool:
        return bool(self.config.duration) and self._real() - self._opened_at >= self.config.duration

    def close(self) -> None:
        self._inflight.drop(self)  # fetches still in flight plan nothing now
        self._wake.cancel()
        self._commit_timer.cancel()
        self._deadline_timer.cancel()
        self._stats.set_value("twolevel/recrawl/seeds", len(self._plans))
        if self.history.lost:
            self._stats.set_value("twolevel/recrawl/history_lost", self.history.lost)
        try:
            counts = self.history.counts()
        except Exception as exc:  # the distributed mode's Redis may be gone by now
            logger.warning("Recrawl history counts not reported: %s", exc)
        else:
            self._stats.set_value("twolevel/recrawl/history_fetches", counts["fetches"])
            self._stats.set_value("twolevel/recrawl/history_articles", counts["articles"])
        self.history.close()

    # -- signal handlers (from SeedMiddleware) -------------------------------------------

    def page_received(self, request: Request) -> None:
        fetch = self._fetches.get(_fetch_id(peek_meta(request)))  # type: ignore[arg-type]
        if fetch is not None and fetch.at is None:
            fetch.at = self.clock()
            fetch.previous = self._last_fetch.get(fetch.seed)

    def page_failed(self, request: Request, exception: BaseException | None = None) -> None:
        fetch = self._fetches.get(_fetch_id(peek_meta(request)))  # type: ignore[arg-type]
        if fetch is not None:
            fetch.failed = True

    def finished(self, request: Request, fetch_id: str) -> None:
        """The engine is done with a seed's fetch: record it, plan the next."""
        fetch = self._fetches.pop(fetch_id, None)
        if fetch is not None:
            self._complete(fetch)

    def _complete(self, fetch: _Fetch) -> None:
        if fetch.at is None or fetch.failed:
            self._stats.inc_value("twolevel/recrawl/fetches_without_response")
            self._replan(fetch.seed, self.clock() + self.config.initial_interval)
            return
        self.history.record_fetch(fetch.seed, fetch.at, fetch.new_links)
        self._last_fetch[fetch.seed] = fetch.at
        self._stats.inc_value("twolevel/recrawl/fetches")
        self._stats.inc_value("twolevel/recrawl/new_links", fetch.new_links)
        if fetch.new_links:
            self._stats.inc_value("twolevel/recrawl/fetches_with_new_links")
        due = self.planner.next_fetch(fetch.seed, fetch.at, fetch.new_links)
        self._intervals[fetch.seed] = due - fetch.at
        self._replan(fetch.seed, due)
        self._maybe_retrain(fetch.at)

    def article(self, request: Request, response: Response) -> None:
        if not isinstance(response, TextResponse):
            return
        url = (response.meta.get("redirect_urls") or [request.url])[0]
        published = extract_publish_time(response.body, now=self.clock())
        if published is None:
            self._stats.inc_value("twolevel/recrawl/articles_undated")
            return
        if self.history.record_published(url, published):
            self._stats.inc_value("twolevel/recrawl/articles_dated")
            self._arm_commit()

    # -- internals ------------------------------------------------------------------------

    def _new_fetch(self, key: str) -> str:
        self._next_id += 1
        fetch_id = f"{self._run}-{self._next_id}"
        self._fetches[fetch_id] = _Fetch(key)
        return fetch_id

    def _template(self, request: Request) -> bytes | None:
        # A refetch is not a start request (Scrapy's tag), whatever the first fetch was:
        # the distributed mode filters start requests by the crawl's seen keys.
        tags = (meta_keys.SEED_FETCH, meta_keys.FOUND_ON_SEED, "is_start_request")
        meta = {k: v for k, v in request.meta.items() if k not in tags}
        try:
            return self._encode(request.replace(meta=meta))
        except ValueError as exc:
            logger.warning(
                "Seed %s cannot be stored for refetching (%s); it is fetched once.",
                request,
                exc,
            )
            self._stats.inc_value("twolevel/recrawl/unserializable")
            return None

    def _new_link(self, request: Request, found_on: Any) -> None:
        try:
            key, fetch_id = found_on
        except (TypeError, ValueError):
            return
        fetch = self._fetches.get(fetch_id)
        if fetch is not None and fetch.at is not None:
            found_at, previous = fetch.at, fetch.previous
            fetch.new_links += 1
        else:  # the seed's fetch is not ours (an earlier run): date it now
            found_at, previous = self.clock(), self._last_fetch.get(key)
        self.history.record_article(request.url, key, found_at, previous)
        self._arm_commit()

    def _provisional(self, key: str) -> float:
        interval = max(2 * self._intervals.get(key, 0.0), self.config.initial_interval)
        return self.clock() + min(interval, self.config.max_interval)

    def _set_plan(self, plan: Plan) -> None:
        self._plans[plan.seed] = plan
        heapq.heappush(self._heap, (plan.due, plan.seed))
        self.history.save_plan(plan)
        self._arm_commit()

    def _replan(self, key: str, due: float) -> None:
        plan = self._plans.get(key)
        if plan is None:
            return
        self._set_plan(Plan(key, due, plan.request))
        self._arm_wake()

    def _arm_wake(self) -> None:
        """Wake the engine when the earliest plan comes due (else: its 5 s heartbeat)."""
        while self._heap:
            due, key = self._heap[0]
            plan = self._plans.get(key)
            if plan is not None and plan.due == due:
                break
            heapq.heappop(self._heap)
        if not self._heap or self.expired:
            return
        self._wake.at(self._heap[0][0])

    def _deadline(self) -> None:
        logger.info("TWOLEVEL_RECRAWL_DURATION reached: seeds are no longer refetched.")
        self._wake_engine()

    def _arm_commit(self) -> None:
        self._commit_timer.arm(COMMIT_INTERVAL)

    def _commit(self) -> None:
        self.history.commit()

    def _maybe_retrain(self, now: float) -> None:
        interval = self.config.retrain_interval
        if not interval or self._training is not None:
            return
        if self._trained_at is None:
            self._trained_at = now  # the first retraining waits one interval
            return
        if now - self._trained_at < interval:
            return
        from twisted.internet.threads import deferToThread

        self._trained_at = now
        self.history.commit()
        if self.history.thread_safe:
            read_events: Callable[[], Iterable[Any]] = self.history.events
        else:  # a SQLite connection stays in its thread: read here
            events = list(self.history.events())
            read_events = lambda: events  # noqa: E731
        self._training = deferToThread(self._fit_and_save, read_events, now)
        self._training.addCallbacks(self._trained, self._train_failed)

    def training(self) -> Deferred[None] | None:
        """A Deferred fired when the retraining in flight ends, ``None`` if none is. The
        scheduler's close waits for it: the model is then applied and counted, and the
        history its thread may read is not closed under it."""
        if self._training is None:
            return None
        ended: Deferred[None] = Deferred()
        self._training.addBoth(lambda _: ended.callback(None))
        return ended

    def _fit_and_save(
        self, read_events: Callable[[], Iterable[Any]], now: float
    ) -> RecrawlPredictor:
        """In a worker thread: read the history (Redis), fit, save where the crawl loads."""
        predictor = fit_predictor(
            list(read_events()),
            now,
            days=self.config.train_days,
            min_samples=self.config.min_samples,
        )
        self.model_store.save(predictor)
        return predictor

    def _trained(self, predictor: RecrawlPredictor) -> None:
        self._training = None
        self.planner.set_predictor(predictor)
        self._stats.inc_value("twolevel/recrawl/retrained")
        logger.info(
            "Recrawl model retrained on %d seed keys, saved to %s",
            len(predictor.fits),
            self.model_store.location,
        )

    def _train_failed(self, failure: Any) -> None:
        self._training = None
        self._stats.inc_value("twolevel/recrawl/retrain_failed")
        logger.warning("Retraining the recrawl model failed: %s", failure.getErrorMessage())


def open_seed_planner(
    crawler: Crawler,
    spider: Spider,
    *,
    enqueue: Callable[[Request], bool],
    inflight: InFlight,
    shared: tuple[RedisHistoryStore, ModelStore] | None = None,
) -> SeedPlanner | None:
    """The scheduler's seed planner, or ``None`` when ``TWOLEVEL_RECRAWL`` is off. Its plans
    keep their requests encoded for ``spider`` (:mod:`scrapy_twolevel.codec`).

    ``shared``: the history and model of a distributed crawl, in Redis (the plans then
    come with the buckets the node takes); else both are files (:func:`recrawl_paths`).
    """
    spider_name = spider.name

    def encode(request: Request) -> bytes:
        return encode_request(request, spider)

    def decode(data: bytes) -> Request:
        return decode_request(data, spider)

    config = RecrawlConfig.from_settings(crawler.settings)
    if not config.enabled:
        return None
    clock = make_clock(config)
    history: HistoryStore | RedisHistoryStore
    model_store: ModelStore
    if shared is not None:
        history, model_store = shared
        history_location = f"Redis, under {history.prefix}"
    else:
        history_path, model_path = recrawl_paths(crawler.settings, spider_name)
        history = HistoryStore(history_path, on_error=_history_refused)
        model_store = FileModelStore(model_path)
        history_location = str(history_path)
        if not job_dir(crawler.settings):
            # Without JOBDIR every crawl starts afresh, as Scrapy's do: the history is
            # kept (it is the training data), the plans of an earlier crawl are not.
            history.clear_plans()
    try:
        predictor = load_stored_model(model_store)
    except StateError:
        history.close()
        raise
    assert crawler.stats is not None
    seeds = SeedPlanner(
        config=config,
        history=history,
        planner=make_planner(config, predictor, clock),
        clock=clock,
        model_store=model_store,
        encode=encode,
        decode=decode,
        enqueue=enqueue,
        stats=crawler.stats,
        wake=lambda: wake_engine(crawler),
        inflight=inflight,
    )
    signals = crawler.signals
    signals.connect(seeds.page_received, seed_page_received)
    signals.connect(seeds.page_failed, seed_page_failed)
    signals.connect(seeds.article, article_fetched)
    if predictor is None:
        logger.info(
            "Recrawl: no model at %s yet; seeds get an adaptive interval until "
            "`scrapy recrawl train` has run (history: %s)",
            model_store.location,
            history_location,
        )
    else:
        logger.info(
            "Recrawl: model of %d seed keys from %s", len(predictor.fits), model_store.location
        )
    return seeds


def close_seed_planner(crawler: Crawler, seeds: SeedPlanner) -> None:
    signals = crawler.signals
    signals.disconnect(seeds.page_received, seed_page_received)
    signals.disconnect(seeds.page_failed, seed_page_failed)
    signals.disconnect(seeds.article, article_fetched)
    seeds.close()
