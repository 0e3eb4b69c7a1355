"""The recrawl history and model of a distributed crawl, in Redis: one for every node.

With ``TWOLEVEL_RECRAWL`` and ``TWOLEVEL_REDIS_URL`` together, every node records what it
learns about the seed pages it fetches into the same history, so ``scrapy recrawl train``
(and the nodes' own retraining) learn from the whole crawl, and each node loads the same
model. :class:`RedisHistoryStore` has the interface of
:class:`~scrapy_twolevel.storage.recrawl_history.HistoryStore`; what differs:

- **Writes leave with the node's tick.** ``record_*`` and ``save_plan`` only collect; the
  crawl's :class:`~.node.Node` sends them from its background thread with every tick
  (:meth:`take`, then :meth:`HistoryWrites.send` and the commit script), so recording a
  fetch never waits for Redis, and a tick that fails is retried with its writes.
  :meth:`commit` does nothing; :meth:`flush` sends at once (tools and tests).
- **Plans belong to buckets.** A seed's plan (its next fetch and the request to send) is
  stored in ``plans:<bucket>`` of the bucket of the seed's host, written by the commit
  script only while this node holds that bucket (so a node reaped while paused cannot
  plan for hosts it lost), and loaded by whichever node takes the bucket, with the
  bucket's queued requests. :meth:`plans` is therefore empty at open: a node's plans
  arrive with its buckets.
- **History and model outlive the crawl.** They are kept under
  ``twolevel-history:<crawl id>:``, not the crawl's own ``twolevel:<crawl id>:``, so
  ``scrapy twolevel reset`` starts a crawl afresh and keeps its training data (as the
  history file outlives a crawl without ``JOBDIR``); ``reset --history`` clears it too.

Keys, under ``twolevel-history:<crawl id>:``:

- ``fetches``: a sorted set, score = fetch time (planner clock), member = JSON
  ``[seed, new_links, id]``, the last :data:`FETCHES_KEPT` seconds of them;
- ``articles``: a hash, URL -> JSON ``[seed, found_at, previous_fetch]``, first writer
  wins (``HSETNX``), as the file's ``INSERT OR IGNORE``;
- ``published``: a hash, URL -> publish time read from the article page;
- ``model``: the trained model's JSON (:meth:`RecrawlPredictor.to_dict`).

and under the crawl's ``twolevel:<crawl id>:``: ``plans:<bucket>`` (seed -> ``"<due>
<encoded request>"``) and ``planned`` (the buckets that have plans: the crawl stays open
for them). Everything is JSON or text; nothing is unpickled.

No Scrapy here.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..recrawl.model import RecrawlPredictor
from ..recrawl.planner import Plan
from ..recrawl.samples import MIDPOINT_MAX_GAP, known_or_midpoint
from .keys import crawl_prefix, history_prefix

#: Keys read or written per round trip when scanning a large hash.
SCAN_COUNT = 1000
#: Seconds of fetch records kept behind the newest: a node replays the last 7 days into
#: its planner at open, and nothing reads older ones (the model learns from articles).
#: Without a bound ``fetches`` grew with time, not with URLs, for as long as a crawl ran.
FETCHES_KEPT = 8 * 86400.0


def encode_plan(due: float, request: bytes) -> bytes:
    """A plan's value in ``plans:<bucket>``: the due time, a space, the encoded request."""
    return repr(float(due)).encode("ascii") + b" " + request


def decode_plan(seed: str, value: bytes) -> Plan:
    """The :class:`Plan` of a stored value; ``ValueError`` if it is damaged."""
    head, sep, request = value.partition(b" ")
    try:
        due = float(head)
    except ValueError:
        due = math.nan
    if not sep or not math.isfinite(due) or not request:
        raise ValueError(f"plan of seed {seed!r} is damaged: {value[:80]!r}")
    return Plan(seed, due, request)


@dataclass
class HistoryWrites:
    """What a node recorded since its last tick (see the module docstring)."""

    #: ``(at, JSON member)`` for ``fetches``.
    fetches: list[tuple[float, str]] = field(default_factory=list)
    #: ``(url, JSON value)`` for ``articles`` (set if absent).
    articles: list[tuple[str, str]] = field(default_factory=list)
    #: ``(url, publish time)``.
    published: list[tuple[str, float]] = field(default_factory=list)
    #: ``(bucket, seed, encoded plan)``: written by the commit script, held buckets only.
    plans: list[tuple[int, str, bytes]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.fetches or self.articles or self.published or self.plans)

    def prepend(self, earlier: HistoryWrites) -> None:
        """Put writes that failed to go out back in front of the newer ones."""
        self.fetches[:0], self.articles[:0] = earlier.fetches, earlier.articles
        self.published[:0], self.plans[:0] = earlier.published, earlier.plans

    def send(self, redis: Any, crawl_id: str) -> int:
        """Write the history records (not the plans: see the commit script) in one
        pipelined round trip; how many round trips it took (0 or 1)."""
        if not (self.fetches or self.articles or self.published):
            return 0
        prefix = history_prefix(crawl_id)
        pipe = redis.pipeline(transaction=False)
        if self.fetches:
            pipe.zadd(f"{prefix}fetches", {member: at for at, member in self.fetches})
            oldest_kept = max(at for at, _ in self.fetches) - FETCHES_KEPT
            pipe.zremrangebyscore(f"{prefix}fetches", "-inf", f"({oldest_kept!r}")
        for url, value in self.articles:
            pipe.hsetnx(f"{prefix}articles", url, value)
        if self.published:
            pipe.hset(f"{prefix}published", mapping=dict(self.published))
        pipe.execute()
        return 1


class RedisHistoryStore:
    """A crawl's recrawl history in Redis (see the module docstring).

    ``bucket_of_plan`` gives the bucket of a plan's request (its host's), ``None`` if it
    cannot be worked out (the plan then stays in this node's memory only).
    """

    #: :meth:`events` may be read from a worker thread (the client is thread-safe).
    thread_safe = True
    #: Writes lost (the history's files count those the disk refused; Redis writes are
    #: retried with the node's ticks, never lost).
    lost = 0

    def __init__(
        self,
        redis: Any,
        crawl_id: str,
        *,
        bucket_of_plan: Callable[[Plan], int | None] | None = None,
    ) -> None:
        self.redis = redis
        self.crawl_id = crawl_id
        self.prefix = history_prefix(crawl_id)
        self.crawl_prefix = crawl_prefix(crawl_id)
        self._bucket_of_plan = bucket_of_plan
        self._writes = HistoryWrites()
        self._run = os.urandom(4).hex()  # fetch members stay unique across nodes and runs
        self._next_id = 0
        #: Seed key -> the bucket its plan is stored in (for hand-overs).
        self._bucket_of_seed: dict[str, int] = {}

    # -- writing (collected; sent with the node's tick) ------------------------------------

    def record_fetch(self, seed: str, at: float, new_links: int) -> None:
        self._next_id += 1
        member = json.dumps([seed, int(new_links), f"{self._run}-{self._next_id}"])
        self._writes.fetches.append((float(at), member))

    def record_article(
        self, url: str, seed: str, found_at: float, previous_fetch: float | None
    ) -> bool:
        """Recorded unless another node recorded ``url`` first; the answer is only known
        when the write is sent, so this returns ``True``."""
        self._writes.articles.append((url, json.dumps([seed, found_at, previous_fetch])))
        return True

    def record_published(self, url: str, published: float) -> bool:
        """The publish time of ``url``; it counts for :meth:`events` only where ``url`` is
        an article (which is not known before the write is sent, so this returns ``True``)."""
        self._writes.published.append((url, float(published)))
        return True

    def save_plan(self, plan: Plan) -> None:
        bucket = self._bucket_of_seed.get(plan.seed)
        if bucket is None and self._bucket_of_plan is not None:
            bucket = self._bucket_of_plan(plan)
            if bucket is not None:
                self._bucket_of_seed[plan.seed] = bucket
        if bucket is not None:
            self._writes.plans.append((bucket, plan.seed, encode_plan(plan.due, plan.request)))

    def clear_plans(self) -> int:
        """Plans belong to the crawl and go with ``scrapy twolevel reset``; nothing here."""
        return 0

    @property
    def has_writes(self) -> bool:
        """Whether writes wait for the next tick (the node stays open until they are out)."""
        return bool(self._writes)

    def take(self) -> HistoryWrites:
        """The writes collected since the last call (for the node's tick)."""
        writes, self._writes = self._writes, HistoryWrites()
        return writes

    def put_back(self, writes: HistoryWrites) -> None:
        """Writes of a tick that failed: sent again with the next one."""
        self._writes.prepend(writes)

    def flush(self) -> None:
        """Send the history records now (plans are only written by a node's commit)."""
        writes = self.take()
        writes.send(self.redis, self.crawl_id)
        self._writes.plans[:0] = writes.plans

    def commit(self) -> None:
        """Nothing: the node's tick sends the writes (see the module docstring)."""

    def close(self) -> None:
        """Nothing to release: the crawl's client is closed by the crawl."""

    # -- plans and buckets ------------------------------------------------------------------

    def plans(self) -> list[Plan]:
        """Plans arrive with the buckets a node takes (:meth:`adopt`): none at open."""
        return []

    def adopt(self, bucket: int, raw: dict[bytes, bytes]) -> tuple[list[Plan], int]:
        """The plans of a bucket just taken (``HGETALL plans:<bucket>``), and how many were
        damaged (skipped)."""
        plans, damaged = [], 0
        for raw_seed, value in raw.items():
            seed = raw_seed.decode("utf-8", "replace")
            try:
                plan = decode_plan(seed, value)
            except ValueError:
                damaged += 1
                continue
            self._bucket_of_seed[seed] = bucket
            plans.append(plan)
        return plans, damaged

    def seeds_in(self, buckets: Iterable[int]) -> list[str]:
        """The seeds whose plans live in ``buckets`` (buckets this node gives up)."""
        wanted = set(buckets)
        return [seed for seed, bucket in self._bucket_of_seed.items() if bucket in wanted]

    def forget_plans(self) -> None:
        """This node holds no bucket any more (it was reaped): drop its unsent plan writes."""
        self._writes.plans.clear()
        self._bucket_of_seed.clear()

    # -- reading ----------------------------------------------------------------------------

    def fetches(self, since: float = float("-inf")) -> list[tuple[str, float, int]]:
        """``(seed, at, new_links)`` of the fetches at or after ``since``, oldest first."""
        low = "-inf" if since == float("-inf") else repr(float(since))
        rows = []
        for member, at in self.redis.zrangebyscore(
            f"{self.prefix}fetches", low, "+inf", withscores=True
        ):
            try:
                seed, new_links, _ = json.loads(member)
                rows.append((str(seed), float(at), int(new_links)))
            except (ValueError, TypeError):
                continue  # a damaged member: skipped, as a damaged plan is
        return rows

    def last_fetch(self, seed: str) -> float | None:
        times = [at for s, at, _ in self.fetches() if s == seed]
        return max(times) if times else None

    def events(self, max_gap: float = MIDPOINT_MAX_GAP) -> Iterator[tuple[str, float | None]]:
        """``(seed_key, publish time)`` of every article, oldest found first, with the
        midpoint rule where the page gave no time (as the file's)."""
        published: dict[bytes, float] = {}
        for url, value in self.redis.hscan_iter(f"{self.prefix}published", count=SCAN_COUNT):
            try:
                published[url] = float(value)
            except ValueError:
                continue
        rows = []
        for url, value in self.redis.hscan_iter(f"{self.prefix}articles", count=SCAN_COUNT):
            try:
                seed, found_at, previous = json.loads(value)
                rows.append(
                    (
                        float(found_at),
                        url,
                        str(seed),
                        None if previous is None else float(previous),
                    )
                )
            except (ValueError, TypeError):
                continue
        rows.sort()
        for found_at, url, seed, previous in rows:
            yield seed, known_or_midpoint(published.get(url), previous, found_at, max_gap)

    def counts(self) -> dict[str, int]:
        """Fetches and articles of the whole crawl; plans stored over all buckets."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.zcard(f"{self.prefix}fetches")
        pipe.hlen(f"{self.prefix}articles")
        fetches, articles = pipe.execute()
        plans = stored_plans(self.redis, self.crawl_prefix)
        return {"fetches": int(fetches), "articles": int(articles), "plans": plans}


class RedisModelStore:
    """The crawl's trained recrawl model in Redis, so every node loads the same one."""

    def __init__(self, redis: Any, crawl_id: str) -> None:
        self.redis = redis
        self.key = f"{history_prefix(crawl_id)}model"

    @property
    def location(self) -> str:
        return f"Redis key {self.key}"

    def load(self) -> RecrawlPredictor | None:
        """The saved model, ``None`` if there is none; ``ValueError`` if it is damaged."""
        raw = self.redis.get(self.key)
        if raw is None:
            return None
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise ValueError(f"{self.location}: not a saved recrawl predictor ({exc})") from exc
        return RecrawlPredictor.from_dict(data, source=self.location)

    def save(self, predictor: RecrawlPredictor) -> None:
        self.redis.set(self.key, json.dumps(predictor.to_dict(), allow_nan=False))


def stored_plans(redis: Any, crawl_prefix: str) -> int:
    """Seed plans stored over all buckets of the crawl under ``crawl_prefix``."""
    planned = redis.smembers(f"{crawl_prefix}planned")
    if not planned:
        return 0
    pipe = redis.pipeline(transaction=False)
    for bucket in planned:
        pipe.hlen(f"{crawl_prefix}plans:{bucket.decode()}")
    return int(sum(pipe.execute()))


def delete_matching(redis: Any, pattern: str) -> int:
    """Delete every key matching ``pattern``, a thousand per command; how many."""
    keys = list(redis.scan_iter(pattern, count=SCAN_COUNT))
    for i in range(0, len(keys), SCAN_COUNT):
        redis.delete(*keys[i : i + SCAN_COUNT])
    return len(keys)


def clear_history(redis: Any, crawl_id: str) -> int:
    """Delete crawl ``crawl_id``'s recrawl history and model; the number of keys deleted."""
    return delete_matching(redis, f"{history_prefix(crawl_id)}*")
