"""Start-up checks: every setting and every piece of resumed state, before the crawl opens.

Two callers, one set of rules. The host metrics middleware runs them from its
``from_crawler`` (Scrapy builds downloader middlewares before it opens the spider, so an
error raised there stops the crawl with this one message), and the scheduler runs them
again when it is built. Components are found in the settings by the ``twolevel_role``
their classes declare (:mod:`scrapy_twolevel.components`), so this module imports none of
them and the scheduler, the middleware and this module form no import cycle.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from scrapy.core.scheduler import BaseScheduler
from scrapy.utils.job import job_dir
from scrapy.utils.misc import load_object

from ..components import (
    DUPEFILTER_PATH,
    DUPEFILTER_ROLE,
    MIDDLEWARE_PATH,
    MIDDLEWARE_ROLE,
    SCHEDULER_ROLE,
    SEED_MIDDLEWARE_ORDER,
    SEED_MIDDLEWARE_PATH,
    SEED_MIDDLEWARE_ROLE,
    TOPIC_MIDDLEWARE_ORDER,
    TOPIC_MIDDLEWARE_PATH,
    TOPIC_MIDDLEWARE_ROLE,
)
from ..config import (
    DEFAULTS,
    TESTWEB_PREFIX,
    ClusterConfig,
    RecrawlConfig,
    SeenConfig,
    TwoLevelConfig,
    topic_specs,
)
from ..errors import SettingsError, ShapeMismatch, StateError
from ..frontier import BUILTIN_POLICIES, Policy
from ..frontier.topic_frontier import TopicSpec
from ..storage.sqlite import SqliteStore
from ..storage.state_files import read_hosts
from .intake import make_quality
from .seed_planner import make_clock

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler


def unknown_settings(names: Iterable[str]) -> list[tuple[str, str | None]]:
    """``(name, closest valid name or None)`` for every ``TWOLEVEL_*`` name we do not know.

    A misspelled ``TWOLEVEL_POLCY`` would otherwise silently run the default policy.
    """
    prefix = "TWOLEVEL_"
    # Compared without the shared prefix, which would make every name look close.
    known = {name[len(prefix) :]: name for name in DEFAULTS}
    found = []
    for name in sorted(set(names)):
        if not name.startswith(prefix) or name in DEFAULTS or name.startswith(TESTWEB_PREFIX):
            continue
        close = difflib.get_close_matches(name[len(prefix) :], known, n=1, cutoff=0.6)
        found.append((name, known[close[0]] if close else None))
    return found


def warn_unknown_settings(names: Iterable[str]) -> None:
    """Log each unknown ``TWOLEVEL_*`` name, with the closest valid one."""
    for name, closest in unknown_settings(names):
        logger.warning(
            "Unknown setting %(name)s is ignored%(hint)s",
            {"name": name, "hint": f"; did you mean {closest}?" if closest else "."},
        )


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
    """Validate every setting the scheduler needs; raise :class:`SettingsError` if one is wrong."""
    config = TwoLevelConfig.from_settings(crawler.settings)
    if uses_seen_cache(crawler):
        SeenConfig.from_settings(crawler.settings)  # its errors, too, before the spider opens
    policy = load_policy(config.policy)
    if policy.needs_host_metrics and not metrics_middleware_enabled(crawler):
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
        if not _role_enabled(crawler, "SPIDER_MIDDLEWARES", SEED_MIDDLEWARE_ROLE):
            raise SettingsError(
                "TWOLEVEL_RECRAWL = True needs the seed middleware. Add to settings.py:\n"
                f'    SPIDER_MIDDLEWARES = {{"{SEED_MIDDLEWARE_PATH}": {SEED_MIDDLEWARE_ORDER}}}\n'
                'or use ADDONS = {"scrapy_twolevel.Addon": 0}.'
            )
    topics = crawl_topics(crawler)
    if topics is not None and not _role_enabled(
        crawler, "SPIDER_MIDDLEWARES", TOPIC_MIDDLEWARE_ROLE
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
    """The distributed mode's own rules (see :mod:`scrapy_twolevel.distributed`)."""
    cluster = ClusterConfig.from_settings(crawler.settings)
    if not cluster.enabled:
        return
    if not uses_seen_cache(crawler):
        raise SettingsError(
            "TWOLEVEL_REDIS_URL needs the seen cache, whose keys move with each bucket: "
            f'DUPEFILTER_CLASS = "{DUPEFILTER_PATH}" (the add-on sets it).'
        )
    seen = SeenConfig.from_settings(crawler.settings)
    if seen.mode != "exact" or seen.path is not None:
        raise SettingsError(
            "TWOLEVEL_REDIS_URL needs TWOLEVEL_SEEN_MODE='exact' and no TWOLEVEL_SEEN_PATH: "
            "each bucket's seen keys live in Redis and move with the bucket."
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


def crawl_topics(crawler: Crawler) -> list[TopicSpec] | None:
    """The crawl's topics: ``TWOLEVEL_TOPICS``, else the spider's ``twolevel_topics``."""
    return topic_specs(crawler.settings, getattr(crawler, "spidercls", None))


def uses_this_scheduler(crawler: Crawler) -> bool:
    """Whether ``SCHEDULER`` names :class:`~scrapy_twolevel.scheduler.TwoLevelScheduler`
    (or a subclass)."""
    return _has_role(crawler.settings["SCHEDULER"], SCHEDULER_ROLE)


def uses_seen_cache(crawler: Crawler) -> bool:
    """Whether ``DUPEFILTER_CLASS`` names the seen cache (or a subclass)."""
    return _has_role(crawler.settings["DUPEFILTER_CLASS"], DUPEFILTER_ROLE)


def metrics_middleware_enabled(crawler: Crawler) -> bool:
    return _role_enabled(crawler, "DOWNLOADER_MIDDLEWARES", MIDDLEWARE_ROLE)


def _has_role(path: object, role: str) -> bool:
    try:
        cls = load_object(path) if isinstance(path, str) else path
    except Exception:  # Scrapy reports a component it cannot load itself
        return False
    return isinstance(cls, type) and getattr(cls, "twolevel_role", None) == role


def _role_enabled(crawler: Crawler, setting: str, role: str) -> bool:
    """Whether the ``setting`` dict (with its ``_BASE``) enables a component of ``role``."""
    return any(
        order is not None and _has_role(path, role)
        for path, order in crawler.settings.getwithbase(setting).items()
    )


class RefusedStart(BaseScheduler):
    """Stands in for a scheduler whose settings are invalid; :meth:`open` raises the error.

    Scrapy builds the scheduler after it has started opening the spider, and an exception
    there ends in a cascade whose last line is ``RuntimeError: Engine slot not assigned``;
    from ``open`` the engine closes everything in order and re-raises our message last.
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


# -- resumed state ---------------------------------------------------------------------------


def check_job_state(crawler: Crawler, config: TwoLevelConfig, policy: Policy) -> None:
    """Read-only check of the state a resumed crawl would open.

    The middleware calls it before the spider opens, so a corrupt or mismatched file
    stops the crawl with one message; the scheduler's ``open`` checks again for real.
    In the distributed mode it checks the Redis instead: reachable, and holding no crawl
    of this id with another bucket count.
    """
    cluster = ClusterConfig.from_settings(crawler.settings)
    if cluster.enabled:
        from ..distributed.connect import check_cluster_state

        spidercls = getattr(crawler, "spidercls", None)
        check_cluster_state(cluster, cluster.crawl_id or getattr(spidercls, "name", None))
        return
    jobdir = job_dir(crawler.settings)
    if not jobdir:
        return
    statedir = Path(jobdir, "twolevel")
    read_hosts(statedir / "hosts.json")
    with explained_mismatch(policy):
        SqliteStore.inspect(
            statedir / "frontier.sqlite3", store_shape(config, policy, crawl_topics(crawler))
        )


def store_shape(
    config: TwoLevelConfig, policy: Policy, topics: list[TopicSpec] | None = None
) -> dict[str, str]:
    """What shapes the JOBDIR frontier: resuming under another shape would mix lanes (or,
    with other topics, leave a topic's queued requests in no frontier)."""
    order = "quality" if policy.orders_urls_by_quality else "fifo"
    names = ",".join(sorted(t.name for t in topics)) if topics else ""
    return {"TWOLEVEL_HOST_KEY": config.host_key, "url_order": order, "topics": names}


@contextmanager
def explained_mismatch(policy: Policy) -> Iterator[None]:
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
