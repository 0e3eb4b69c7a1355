"""Every ``TWOLEVEL_*`` setting: its default, its rule, and one frozen object holding them.

:meth:`TwoLevelConfig.from_settings` is the only place that reads the scheduler's and the
middleware's settings (the test web's extension reads its own ``TWOLEVEL_TESTWEB_*``). It
validates them all at start-up and raises :class:`SettingsError` (a ``ValueError``) naming
the setting, the value and what is allowed, because Scrapy builds the scheduler directly
and would not catch a ``NotConfigured``.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from .frontier.estimates import CostParams
from .frontier.failures import FailurePolicy
from .frontier.topics import TopicSpec, parse_topics
from .seen.cache import CACHE_POLICIES

HOST_KEYS = ("hostname", "domain", "ip")
BUILTIN_POLICY_NAMES = ("breadth-first", "performance-first", "quality-first", "crawl-capability")
#: Settings with this prefix belong to the test web's extension, not to this module.
TESTWEB_PREFIX = "TWOLEVEL_TESTWEB_"

_COST = CostParams()
_FAILURES = FailurePolicy()

#: Defaults, in one place; ``docs/settings.rst`` documents each.
DEFAULTS: dict[str, Any] = {
    "TWOLEVEL_POLICY": "crawl-capability",
    "TWOLEVEL_MAX_OPEN_HOSTS": None,  # None: CONCURRENT_REQUESTS (0 there: no limit)
    "TWOLEVEL_DEFAULT_REQUESTS_PER_CONNECTION": _COST.default_requests_per_connection,
    "TWOLEVEL_KEEPALIVE_SPEEDUP": _COST.keepalive_speedup,
    "TWOLEVEL_EWMA_ALPHA": _COST.alpha,
    "TWOLEVEL_DEFAULT_CONNECTION_TIME": _COST.default_connection_time,
    "TWOLEVEL_DEFAULT_RESPONSE_TIME": _COST.default_response_time,
    "TWOLEVEL_QUALITY": "priority",
    "TWOLEVEL_HOST_KEY": "hostname",
    "TWOLEVEL_IDLE_TIMEOUT": 15.0,
    "TWOLEVEL_STATS_TOP_HOSTS": 10,
    "TWOLEVEL_DISK_CACHE_MB": 4,
    "TWOLEVEL_COMMIT_INTERVAL": 1.0,
    "TWOLEVEL_SESSION_FAILURES": _FAILURES.session_failures,
    "TWOLEVEL_BACKOFF": _FAILURES.backoff,
    "TWOLEVEL_BACKOFF_MAX": _FAILURES.backoff_max,
    "TWOLEVEL_FAILED_SESSIONS": _FAILURES.failed_sessions,
    # The seen cache (scrapy_twolevel.dupefilter.SeenCacheDupeFilter)
    "TWOLEVEL_SEEN_MODE": "exact",
    # From benchmarks/url_cache_study.py: CLOCK matches LRU's hit rate for less CPU and
    # RAM; 2^16 is the critical point with up to 64 hosts crawled at once (docs/seencache.rst)
    "TWOLEVEL_SEEN_CACHE_POLICY": "clock",
    "TWOLEVEL_SEEN_CACHE_SIZE": 1 << 16,
    "TWOLEVEL_SEEN_ERROR_RATE": None,  # None: 0.01 in exact mode, 0.0001 in bloom-only
    "TWOLEVEL_SEEN_BLOOM": "builtin",
    "TWOLEVEL_SEEN_INITIAL_CAPACITY": 1 << 20,
    "TWOLEVEL_SEEN_PATH": None,  # None: JOBDIR, else a temporary file removed at close
    # Seed recrawling (scrapy_twolevel.seeds, docs/recrawl.rst)
    "TWOLEVEL_RECRAWL": False,
    "TWOLEVEL_RECRAWL_HISTORY": None,  # None: JOBDIR, else .scrapy/twolevel/<spider>/
    "TWOLEVEL_RECRAWL_MODEL": None,  # None: recrawl-model.json beside the history
    "TWOLEVEL_RECRAWL_BUDGET": None,  # fetches per day over all seeds; None: the threshold
    "TWOLEVEL_RECRAWL_THRESHOLD": 1.0,
    "TWOLEVEL_RECRAWL_GAMMA": 0.5,
    "TWOLEVEL_RECRAWL_MIN_INTERVAL": 60.0,
    "TWOLEVEL_RECRAWL_MAX_INTERVAL": 86400.0,
    "TWOLEVEL_RECRAWL_INITIAL_INTERVAL": 3600.0,
    "TWOLEVEL_RECRAWL_LIST_SIZE": None,
    "TWOLEVEL_RECRAWL_DURATION": 0.0,  # real seconds the crawl stays open; 0: no bound
    "TWOLEVEL_RECRAWL_TRAIN_DAYS": 30,
    "TWOLEVEL_RECRAWL_MIN_SAMPLES": 1000,
    "TWOLEVEL_RECRAWL_RETRAIN_INTERVAL": 0.0,  # planner seconds; 0: never during a crawl
    "TWOLEVEL_RECRAWL_TIME_SCALE": 1.0,
    "TWOLEVEL_RECRAWL_TIME_ORIGIN": None,
    # the distributed mode (TWOLEVEL_REDIS_URL switches it on)
    "TWOLEVEL_REDIS_URL": None,  # e.g. redis://127.0.0.1:6379/0; None: one machine, no Redis
    "TWOLEVEL_CRAWL_ID": None,  # None: the spider's name
    "TWOLEVEL_NODE_ID": None,  # None: <host name>-<process id>
    "TWOLEVEL_BUCKETS": 16384,
    "TWOLEVEL_NODE_TTL": 10.0,
    "TWOLEVEL_SYNC_INTERVAL": 0.1,
    "TWOLEVEL_WAIT_FOR_WORK": 0.0,
    "TWOLEVEL_REBALANCE_INTERVAL": 30.0,  # seconds between rebalances by load; 0: never
    "TWOLEVEL_REBALANCE_TOLERANCE": 0.25,  # share of the mean node load left unbalanced
    # topics (None: one topic; see docs/topics.rst)
    "TWOLEVEL_TOPICS": None,
}

#: Days at the end of the training window that validate the model (``FitParams.tail_days``).
RECRAWL_TAIL_DAYS = 7
SEEN_MODES = ("exact", "bloom-only")
SEEN_BLOOMS = ("builtin", "pybloom-live")
#: Filter error rate when TWOLEVEL_SEEN_ERROR_RATE is not set. Exact mode: a "maybe" costs
#: one store lookup. Bloom-only: a "maybe" loses a new URL.
DEFAULT_SEEN_ERROR_RATE = {"exact": 0.01, "bloom-only": 0.0001}


class SettingsError(ValueError):
    """A ``TWOLEVEL_*`` setting (or a Scrapy setting the scheduler relies on) is invalid."""


class _Settings(Protocol):
    def get(self, name: str, default: Any = None) -> Any: ...


def _integer(name: str, raw: Any, rule: str, ok: Any) -> int:
    """An ``int``, or a string of one (``-s NAME=8`` passes ``"8"``); never a bool or 2.7."""
    value: int | None = None
    if type(raw) is int:
        value = raw
    elif isinstance(raw, str):
        try:
            value = int(raw.strip())
        except ValueError:
            value = None
    if value is None:
        raise SettingsError(f"{name}={raw!r} is not an integer; it must be {rule}")
    if not ok(value):
        raise SettingsError(f"{name}={raw!r} is out of range; it must be {rule}")
    return value


def _real(name: str, raw: Any, rule: str, ok: Any) -> float:
    """A finite ``int``/``float`` or a string of one; never a bool."""
    value: float | None = None
    if type(raw) in (int, float):
        value = float(raw)
    elif isinstance(raw, str):
        try:
            value = float(raw.strip())
        except ValueError:
            value = None
    if value is None:
        raise SettingsError(f"{name}={raw!r} is not a number; it must be {rule}")
    if not math.isfinite(value):
        raise SettingsError(f"{name}={raw!r} is not finite; it must be {rule}")
    if not ok(value):
        raise SettingsError(f"{name}={raw!r} is out of range; it must be {rule}")
    return value


def _get(settings: _Settings, name: str) -> Any:
    return settings.get(name, DEFAULTS[name])


def _int_setting(settings: _Settings, name: str, rule: str, ok: Any) -> int:
    return _integer(name, _get(settings, name), rule, ok)


def _float_setting(settings: _Settings, name: str, rule: str, ok: Any) -> float:
    return _real(name, _get(settings, name), rule, ok)


def _choice(settings: _Settings, name: str, valid: tuple[str, ...]) -> str:
    value = _get(settings, name)
    if value not in valid:
        raise SettingsError(f"{name}={value!r} is not valid; use one of: {', '.join(valid)}")
    return value


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


@dataclass(frozen=True, slots=True)
class TwoLevelConfig:
    """All ``TWOLEVEL_*`` settings, resolved and validated."""

    policy: str
    #: Hosts open at once; ``None``: no limit beyond the downloader's.
    max_open_hosts: int | None
    cost: CostParams
    failures: FailurePolicy
    quality: str
    host_key: str
    idle_timeout: float
    stats_top_hosts: int
    disk_cache_mb: int
    commit_interval: float

    @classmethod
    def from_settings(cls, settings: _Settings) -> TwoLevelConfig:
        policy = _get(settings, "TWOLEVEL_POLICY")
        if (
            not isinstance(policy, str)
            or not policy
            or (policy not in BUILTIN_POLICY_NAMES and "." not in policy)
        ):
            raise SettingsError(
                f"TWOLEVEL_POLICY={policy!r} is not valid; use one of: "
                f"{', '.join(BUILTIN_POLICY_NAMES)}, or the import path of a Policy subclass"
            )
        max_open: int | None
        if settings.get("TWOLEVEL_MAX_OPEN_HOSTS") is None:
            # As in Scrapy's downloader, CONCURRENT_REQUESTS = 0 means "no limit".
            concurrent = _integer(
                "CONCURRENT_REQUESTS",
                settings.get("CONCURRENT_REQUESTS", 16),
                "an integer >= 0 (0: no limit)",
                lambda v: v >= 0,
            )
            max_open = concurrent or None
        else:
            max_open = _int_setting(
                settings, "TWOLEVEL_MAX_OPEN_HOSTS", "an integer >= 1", lambda v: v >= 1
            )
        cost = CostParams(
            default_requests_per_connection=_float_setting(
                settings,
                "TWOLEVEL_DEFAULT_REQUESTS_PER_CONNECTION",
                "a number >= 1",
                lambda v: v >= 1,
            ),
            keepalive_speedup=_float_setting(
                settings, "TWOLEVEL_KEEPALIVE_SPEEDUP", "a number > 0 (p)", lambda v: v > 0
            ),
            alpha=_float_setting(
                settings, "TWOLEVEL_EWMA_ALPHA", "a number in [0, 1)", lambda v: 0 <= v < 1
            ),
            default_connection_time=_float_setting(
                settings, "TWOLEVEL_DEFAULT_CONNECTION_TIME", "seconds >= 0", lambda v: v >= 0
            ),
            default_response_time=_float_setting(
                settings, "TWOLEVEL_DEFAULT_RESPONSE_TIME", "seconds > 0", lambda v: v > 0
            ),
        )
        backoff = _float_setting(settings, "TWOLEVEL_BACKOFF", "seconds >= 0", lambda v: v >= 0)
        failures = FailurePolicy(
            session_failures=_int_setting(
                settings, "TWOLEVEL_SESSION_FAILURES", "an integer >= 1", lambda v: v >= 1
            ),
            backoff=backoff,
            backoff_max=_float_setting(
                settings,
                "TWOLEVEL_BACKOFF_MAX",
                f"seconds >= TWOLEVEL_BACKOFF ({backoff})",
                lambda v: v >= backoff,
            ),
            failed_sessions=_int_setting(
                settings,
                "TWOLEVEL_FAILED_SESSIONS",
                "an integer >= 0 (0: never give a host up)",
                lambda v: v >= 0,
            ),
        )
        quality = _get(settings, "TWOLEVEL_QUALITY")
        if not isinstance(quality, str) or not (
            quality == "priority"
            or (quality.startswith("meta:") and len(quality) > 5)
            or ("." in quality and not quality.startswith("meta:"))
        ):
            raise SettingsError(
                f"TWOLEVEL_QUALITY={quality!r} is not valid; use 'priority', 'meta:<key>', "
                "or the import path of a callable taking a Request and returning a number"
            )
        return cls(
            policy=policy,
            max_open_hosts=max_open,
            cost=cost,
            failures=failures,
            quality=quality,
            host_key=_choice(settings, "TWOLEVEL_HOST_KEY", HOST_KEYS),
            idle_timeout=_float_setting(
                settings, "TWOLEVEL_IDLE_TIMEOUT", "seconds >= 0", lambda v: v >= 0
            ),
            stats_top_hosts=_int_setting(
                settings, "TWOLEVEL_STATS_TOP_HOSTS", "an integer >= 0", lambda v: v >= 0
            ),
            disk_cache_mb=_int_setting(
                settings, "TWOLEVEL_DISK_CACHE_MB", "an integer >= 1", lambda v: v >= 1
            ),
            commit_interval=_float_setting(
                settings, "TWOLEVEL_COMMIT_INTERVAL", "seconds > 0", lambda v: v > 0
            ),
        )


@dataclass(frozen=True, slots=True)
class SeenConfig:
    """The ``TWOLEVEL_SEEN_*`` settings of the seen cache (``SeenCacheDupeFilter``)."""

    mode: str
    cache_policy: str
    cache_size: int
    error_rate: float
    bloom: str
    initial_capacity: int
    path: str | None

    @classmethod
    def from_settings(cls, settings: _Settings) -> SeenConfig:
        mode = _choice(settings, "TWOLEVEL_SEEN_MODE", SEEN_MODES)
        if settings.get("TWOLEVEL_SEEN_ERROR_RATE") is None:
            error_rate = DEFAULT_SEEN_ERROR_RATE[mode]
        else:
            error_rate = _float_setting(
                settings,
                "TWOLEVEL_SEEN_ERROR_RATE",
                "a number in [0.000001, 0.5]",
                lambda v: 1e-6 <= v <= 0.5,
            )
        path = _get(settings, "TWOLEVEL_SEEN_PATH")
        if path is not None and not isinstance(path, str):
            raise SettingsError(f"TWOLEVEL_SEEN_PATH={path!r} is not a path (a string)")
        return cls(
            mode=mode,
            cache_policy=_choice(settings, "TWOLEVEL_SEEN_CACHE_POLICY", CACHE_POLICIES),
            cache_size=_int_setting(
                settings, "TWOLEVEL_SEEN_CACHE_SIZE", "an integer >= 0", lambda v: v >= 0
            ),
            error_rate=error_rate,
            bloom=_choice(settings, "TWOLEVEL_SEEN_BLOOM", SEEN_BLOOMS),
            initial_capacity=_int_setting(
                settings,
                "TWOLEVEL_SEEN_INITIAL_CAPACITY",
                "an integer >= 1000",
                lambda v: v >= 1000,
            ),
            path=path or None,
        )


def _optional_path(settings: _Settings, name: str) -> str | None:
    value = _get(settings, name)
    if value is not None and not isinstance(value, str):
        raise SettingsError(f"{name}={value!r} is not a path (a string)")
    return value or None


def _flag(settings: _Settings, name: str) -> bool:
    """A bool, or what ``-s NAME=...`` passes: 1/0, true/false (any case)."""
    value = _get(settings, name)
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("1", "true", "0", "false"):
        return value.strip().lower() in ("1", "true")
    raise SettingsError(f"{name}={value!r} is not valid; use True or False")


@dataclass(frozen=True, slots=True)
class RecrawlConfig:
    """The ``TWOLEVEL_RECRAWL_*`` settings: refetching seed pages at planned times."""

    enabled: bool
    history: str | None
    model: str | None
    budget: float | None
    threshold: float
    gamma: float
    min_interval: float
    max_interval: float
    initial_interval: float
    list_size: int | None
    duration: float
    train_days: int
    min_samples: int
    retrain_interval: float
    time_scale: float
    time_origin: float | None

    @classmethod
    def from_settings(cls, settings: _Settings) -> RecrawlConfig:
        budget = None
        if _get(settings, "TWOLEVEL_RECRAWL_BUDGET") is not None:
            budget = _float_setting(
                settings, "TWOLEVEL_RECRAWL_BUDGET", "fetches per day > 0", lambda v: v > 0
            )
        min_interval = _float_setting(
            settings, "TWOLEVEL_RECRAWL_MIN_INTERVAL", "seconds > 0", lambda v: v > 0
        )
        max_interval = _float_setting(
            settings,
            "TWOLEVEL_RECRAWL_MAX_INTERVAL",
            f"seconds >= TWOLEVEL_RECRAWL_MIN_INTERVAL ({min_interval})",
            lambda v: v >= min_interval,
        )
        list_size = None
        if _get(settings, "TWOLEVEL_RECRAWL_LIST_SIZE") is not None:
            list_size = _int_setting(
                settings, "TWOLEVEL_RECRAWL_LIST_SIZE", "an integer >= 1", lambda v: v >= 1
            )
        scale = _float_setting(
            settings, "TWOLEVEL_RECRAWL_TIME_SCALE", "a number > 0", lambda v: v > 0
        )
        origin = None
        if _get(settings, "TWOLEVEL_RECRAWL_TIME_ORIGIN") is not None:
            origin = _float_setting(
                settings, "TWOLEVEL_RECRAWL_TIME_ORIGIN", "epoch seconds", lambda v: True
            )
        return cls(
            enabled=_flag(settings, "TWOLEVEL_RECRAWL"),
            history=_optional_path(settings, "TWOLEVEL_RECRAWL_HISTORY"),
            model=_optional_path(settings, "TWOLEVEL_RECRAWL_MODEL"),
            budget=budget,
            threshold=_float_setting(
                settings, "TWOLEVEL_RECRAWL_THRESHOLD", "a number > 0", lambda v: v > 0
            ),
            gamma=_float_setting(
                settings, "TWOLEVEL_RECRAWL_GAMMA", "a number in [0, 1]", lambda v: 0 <= v <= 1
            ),
            min_interval=min_interval,
            max_interval=max_interval,
            initial_interval=_float_setting(
                settings,
                "TWOLEVEL_RECRAWL_INITIAL_INTERVAL",
                f"seconds in [{min_interval}, {max_interval}] (the MIN and MAX intervals)",
                lambda v: min_interval <= v <= max_interval,
            ),
            list_size=list_size,
            duration=_float_setting(
                settings,
                "TWOLEVEL_RECRAWL_DURATION",
                "seconds >= 0 (0: no bound)",
                lambda v: v >= 0,
            ),
            train_days=_int_setting(
                settings,
                "TWOLEVEL_RECRAWL_TRAIN_DAYS",
                f"an integer > {RECRAWL_TAIL_DAYS} (the last {RECRAWL_TAIL_DAYS} days validate "
                "the model trained on the days before)",
                lambda v: v > RECRAWL_TAIL_DAYS,
            ),
            min_samples=_int_setting(
                settings, "TWOLEVEL_RECRAWL_MIN_SAMPLES", "an integer >= 0", lambda v: v >= 0
            ),
            retrain_interval=_float_setting(
                settings,
                "TWOLEVEL_RECRAWL_RETRAIN_INTERVAL",
                "seconds >= 0 (0: never during a crawl)",
                lambda v: v >= 0,
            ),
            time_scale=scale,
            time_origin=origin,
        )


REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def _name(settings: _Settings, name: str) -> str | None:
    value = _get(settings, name)
    if value is None or value == "":
        return None
    if not isinstance(value, str) or any(c.isspace() for c in value):
        raise SettingsError(f"{name}={value!r} is not valid; use a name without spaces")
    return value


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """The distributed mode's settings; ``redis_url is None``: the mode is off."""

    redis_url: str | None
    crawl_id: str | None
    node_id: str | None
    buckets: int
    node_ttl: float
    sync_interval: float
    wait_for_work: float
    rebalance_interval: float
    rebalance_tolerance: float

    @property
    def enabled(self) -> bool:
        return self.redis_url is not None

    @classmethod
    def from_settings(cls, settings: _Settings) -> ClusterConfig:
        url = _get(settings, "TWOLEVEL_REDIS_URL") or None
        if url is not None and not (isinstance(url, str) and url.startswith(REDIS_SCHEMES)):
            raise SettingsError(
                f"TWOLEVEL_REDIS_URL={url!r} is not valid; use a Redis URL starting with "
                f"{', '.join(REDIS_SCHEMES)} (e.g. redis://127.0.0.1:6379/0), or None for "
                "a crawl on one machine"
            )
        ttl = _float_setting(settings, "TWOLEVEL_NODE_TTL", "seconds >= 1", lambda v: v >= 1)
        return cls(
            redis_url=url,
            crawl_id=_name(settings, "TWOLEVEL_CRAWL_ID"),
            node_id=_name(settings, "TWOLEVEL_NODE_ID"),
            buckets=_int_setting(
                settings,
                "TWOLEVEL_BUCKETS",
                "an integer in [1, 1000000]",
                lambda v: 1 <= v <= 10**6,
            ),
            node_ttl=ttl,
            sync_interval=_float_setting(
                settings,
                "TWOLEVEL_SYNC_INTERVAL",
                f"seconds in [0.01, TWOLEVEL_NODE_TTL / 10 = {ttl / 10}]",
                lambda v: 0.01 <= v <= ttl / 10,
            ),
            wait_for_work=_float_setting(
                settings, "TWOLEVEL_WAIT_FOR_WORK", "seconds >= 0", lambda v: v >= 0
            ),
            rebalance_interval=_float_setting(
                settings,
                "TWOLEVEL_REBALANCE_INTERVAL",
                "seconds >= 0 (0: never)",
                lambda v: v >= 0,
            ),
            rebalance_tolerance=_float_setting(
                settings, "TWOLEVEL_REBALANCE_TOLERANCE", "a number >= 0", lambda v: v >= 0
            ),
        )


def topic_specs(settings: _Settings, spidercls: Any = None) -> list[TopicSpec] | None:
    """``TWOLEVEL_TOPICS`` (else the spider's ``twolevel_topics`` attribute) parsed, or
    ``None`` when neither declares topics."""
    raw = _get(settings, "TWOLEVEL_TOPICS")
    source = "TWOLEVEL_TOPICS"
    if raw is None and spidercls is not None:
        raw = getattr(spidercls, "twolevel_topics", None)
        source = f"{getattr(spidercls, '__name__', 'spider')}.twolevel_topics"
    if raw is None:
        return None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)  # -s TWOLEVEL_TOPICS='{"news": {"priority": 0}}'
        except ValueError as exc:
            raise SettingsError(f"{source}={raw!r} is not valid JSON ({exc})") from exc
    try:
        return parse_topics(raw)
    except ValueError as exc:
        raise SettingsError(f"{source} is not valid: {exc}") from exc
