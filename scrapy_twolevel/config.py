"""Every ``TWOLEVEL_*`` setting in one table: its name, its default and its rule.

Each setting is a :class:`Setting` written once, below; ``docs/settings.rst`` documents each
(a test checks every name and default there against this table). One frozen reader per
feature turns the settings into plain values, validating all of them at start-up:

- :class:`TwoLevelConfig`: the scheduler and the host metrics middleware;
- :class:`SeenConfig`: the seen cache (``TWOLEVEL_SEEN_*``);
- :class:`RecrawlConfig`: seed recrawling (``TWOLEVEL_RECRAWL*``);
- :class:`ClusterConfig`: the distributed mode;
- :func:`topic_specs`: the topics (``TWOLEVEL_TOPICS``).

Nothing else reads a ``TWOLEVEL_*`` setting (the test web's extension reads its own
``TWOLEVEL_TESTWEB_*``). An invalid value raises :class:`SettingsError` (a ``ValueError``)
naming the setting, the value and the rule, because Scrapy builds the scheduler directly
and would not catch a ``NotConfigured``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from .errors import SettingsError
from .frontier.budgets import make_budget
from .frontier.estimates import CostParams
from .frontier.failures import FailurePolicy
from .frontier.host_keys import HOST_KEY_MODES
from .frontier.policies import BUILTIN_POLICIES
from .frontier.topic_frontier import TopicSpec, parse_topics
from .seen.cache import CACHE_POLICIES

__all__ = [
    "DEFAULTS",
    "SETTINGS",
    "ClusterConfig",
    "RecrawlConfig",
    "SeenConfig",
    "Setting",
    "SettingsError",
    "TwoLevelConfig",
    "topic_specs",
]

#: Settings with this prefix belong to the test web's extension, not to this module.
TESTWEB_PREFIX = "TWOLEVEL_TESTWEB_"
#: Days at the end of the training window that validate the model (``FitParams.tail_days``).
RECRAWL_TAIL_DAYS = 7
SEEN_MODES = ("exact", "bloom-only")
#: What stands for a queued request without JOBDIR: its encoded bytes, or the object itself.
MEMORY_QUEUE_MODES = ("encoded", "objects")
SEEN_BLOOMS = ("builtin", "pybloom-live")
#: Filter error rate when TWOLEVEL_SEEN_ERROR_RATE is not set. Exact mode: a "maybe" costs
#: one store lookup. Bloom-only: a "maybe" loses a new URL.
DEFAULT_SEEN_ERROR_RATE = {"exact": 0.01, "bloom-only": 0.0001}
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


class _Settings(Protocol):
    def get(self, name: str, default: Any = None) -> Any: ...


#: ``(name, raw value) -> value``; raises :class:`SettingsError` naming the setting.
Rule = Callable[[str, Any], Any]


# -- rules ---------------------------------------------------------------------------------


def _integer(name: str, raw: Any, rule: str, ok: Callable[[int], bool]) -> int:
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


def _real(name: str, raw: Any, rule: str, ok: Callable[[float], bool]) -> float:
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


def integer(rule: str, ok: Callable[[int], bool]) -> Rule:
    return lambda name, raw: _integer(name, raw, rule, ok)


def real(rule: str, ok: Callable[[float], bool]) -> Rule:
    return lambda name, raw: _real(name, raw, rule, ok)


def choice(*valid: str) -> Callable[[str, Any], str]:
    def check(name: str, value: Any) -> str:
        if value not in valid:
            raise SettingsError(f"{name}={value!r} is not valid; use one of: {', '.join(valid)}")
        chosen: str = value  # one of ``valid``
        return chosen

    return check


def optional(rule: Rule) -> Rule:
    """``None`` stays ``None`` (the documented meaning of an unset value)."""
    return lambda name, raw: None if raw is None else rule(name, raw)


def flag(name: str, value: Any) -> bool:
    """A bool, or what ``-s NAME=...`` passes: 1/0, true/false (any case)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("1", "true", "0", "false"):
        return value.strip().lower() in ("1", "true")
    raise SettingsError(f"{name}={value!r} is not valid; use True or False")


def path(name: str, value: Any) -> str | None:
    """A path, ``None`` (or ``""``) for the documented default place."""
    if value is not None and not isinstance(value, str):
        raise SettingsError(f"{name}={value!r} is not a path (a string)")
    return value or None


#: Not in crawl or node ids: they are parts of Redis key names and key patterns (with a
#: ":" in ids, ``scrapy twolevel reset news`` would also delete a crawl named ``news:eu``).
ID_FORBIDDEN = frozenset(":*?[]\\")


def node_name(name: str, value: Any) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or any(c.isspace() or c in ID_FORBIDDEN for c in value):
        raise SettingsError(
            f"{name}={value!r} is not valid; use a name without spaces or any of "
            f"{' '.join(sorted(ID_FORBIDDEN))}"
        )
    return value


def _policy(name: str, value: Any) -> str:
    builtin_or_path = value in BUILTIN_POLICIES or "." in str(value)
    if not isinstance(value, str) or not value or not builtin_or_path:
        raise SettingsError(
            f"{name}={value!r} is not valid; use one of: {', '.join(BUILTIN_POLICIES)}, "
            "or the import path of a Policy subclass"
        )
    return value


def _quality(name: str, value: Any) -> str:
    if not isinstance(value, str) or not (
        value == "priority"
        or (value.startswith("meta:") and len(value) > 5)
        or ("." in value and not value.startswith("meta:"))
    ):
        raise SettingsError(
            f"{name}={value!r} is not valid; use 'priority', 'meta:<key>', "
            "or the import path of a callable taking a Request and returning a number"
        )
    return value


def _redis_url(name: str, value: Any) -> str | None:
    url = value or None
    if url is not None and not (isinstance(url, str) and url.startswith(REDIS_SCHEMES)):
        raise SettingsError(
            f"{name}={url!r} is not valid; use a Redis URL starting with "
            f"{', '.join(REDIS_SCHEMES)} (e.g. redis://127.0.0.1:6379/0), or None for "
            "a crawl on one machine"
        )
    return url


def _status_codes(name: str, value: Any) -> tuple[int, ...]:
    """HTTP status codes (400-599): a list, or ``-s NAME=429,503``."""
    items = value.split(",") if isinstance(value, str) else value
    try:
        codes = tuple(sorted({int(str(item).strip()) for item in items if str(item).strip()}))
    except (TypeError, ValueError):
        codes = None
    if codes is None or isinstance(value, (bool, int)) or not all(400 <= c <= 599 for c in codes):
        raise SettingsError(
            f"{name}={value!r} is not valid; use a list of HTTP status codes from 400 to 599 "
            "(e.g. [429, 503]), or [] to treat no response as a refusal"
        )
    return codes


def _budgets(name: str, value: Any) -> dict[str, int]:
    """``{host pattern: pages}``, or the same as JSON (``-s NAME='{"*.example.com": 100}'``)."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError:
            value = None
    if isinstance(value, dict) and all(
        isinstance(k, str) and k and type(v) is int and v >= 0 for k, v in value.items()
    ):
        return dict(value)
    raise SettingsError(
        f"{name}={value!r} is not valid; use a dict of host patterns to page budgets, "
        'e.g. {"*.example.com": 100, "big.example.org": 0} (0: no budget)'
    )


def _as_is(name: str, value: Any) -> Any:
    return value  # checked by its reader (topic_specs)


# -- the table -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Setting:
    """One ``TWOLEVEL_*`` setting: its name, its default and its rule."""

    name: str
    default: Any
    rule: Rule

    def raw(self, settings: _Settings) -> Any:
        return settings.get(self.name, self.default)

    def read(self, settings: _Settings, rule: Rule | None = None) -> Any:
        """The value, checked by the setting's rule (or by ``rule``, where the bound
        depends on another setting)."""
        return (rule or self.rule)(self.name, self.raw(settings))


_COST = CostParams()
_FAILURES = FailurePolicy()
SECONDS = real("seconds >= 0", lambda v: v >= 0)
POSITIVE_SECONDS = real("seconds > 0", lambda v: v > 0)
AT_LEAST_ONE = integer("an integer >= 1", lambda v: v >= 1)
NOT_NEGATIVE = integer("an integer >= 0", lambda v: v >= 0)

# The scheduler and the middleware (TwoLevelConfig)
POLICY = Setting("TWOLEVEL_POLICY", "crawl-capability", _policy)
MAX_OPEN_HOSTS = Setting("TWOLEVEL_MAX_OPEN_HOSTS", None, optional(AT_LEAST_ONE))
EXTEND_SESSIONS = Setting("TWOLEVEL_EXTEND_SESSIONS", True, flag)
REQUESTS_PER_CONNECTION = Setting(
    "TWOLEVEL_DEFAULT_REQUESTS_PER_CONNECTION",
    _COST.default_requests_per_connection,
    real("a number >= 1", lambda v: v >= 1),
)
KEEPALIVE_SPEEDUP = Setting(
    "TWOLEVEL_KEEPALIVE_SPEEDUP", _COST.keepalive_speedup, real("a number > 0 (p)", lambda v: v > 0)
)
EWMA_ALPHA = Setting(
    "TWOLEVEL_EWMA_ALPHA", _COST.alpha, real("a number in [0, 1)", lambda v: 0 <= v < 1)
)
CONNECTION_TIME = Setting(
    "TWOLEVEL_DEFAULT_CONNECTION_TIME", _COST.default_connection_time, SECONDS
)
RESPONSE_TIME = Setting(
    "TWOLEVEL_DEFAULT_RESPONSE_TIME", _COST.default_response_time, POSITIVE_SECONDS
)
QUALITY = Setting("TWOLEVEL_QUALITY", "priority", _quality)


def _host_key(name: str, value: Any) -> str:
    if value == "ip":
        raise SettingsError(
            f"{name}='ip' was removed: a URL's host is chosen as it is queued, before its "
            "name is resolved, so names sharing an address were never merged. Use "
            "'hostname' (with CONCURRENT_REQUESTS_PER_IP the downloader still keeps one "
            "address's requests apart) or 'domain'."
        )
    return choice(*HOST_KEY_MODES)(name, value)


HOST_KEY = Setting("TWOLEVEL_HOST_KEY", "hostname", _host_key)
IDLE_TIMEOUT = Setting("TWOLEVEL_IDLE_TIMEOUT", 15.0, SECONDS)
STATS_TOP_HOSTS = Setting("TWOLEVEL_STATS_TOP_HOSTS", 10, NOT_NEGATIVE)
#: Share of the crawl's time given to reading ``start()`` while requests wait (start_pacing.py).
START_SHARE = Setting(
    "TWOLEVEL_START_SHARE", 0.33, real("a number in (0, 1] (1: never pause)", lambda v: 0 < v <= 1)
)
#: The collector's young-generation threshold while the crawl is open (glue/collector.py).
GC_THRESHOLD = Setting(
    "TWOLEVEL_GC_THRESHOLD", 50_000, integer("an integer >= 0 (0: Python's own)", lambda v: v >= 0)
)
MEMORY_QUEUE = Setting("TWOLEVEL_MEMORY_QUEUE", "encoded", choice(*MEMORY_QUEUE_MODES))
DISK_CACHE_MB = Setting("TWOLEVEL_DISK_CACHE_MB", 4, AT_LEAST_ONE)
COMMIT_INTERVAL = Setting("TWOLEVEL_COMMIT_INTERVAL", 1.0, POSITIVE_SECONDS)
SESSION_FAILURES = Setting("TWOLEVEL_SESSION_FAILURES", _FAILURES.session_failures, AT_LEAST_ONE)
BACKOFF = Setting("TWOLEVEL_BACKOFF", _FAILURES.backoff, SECONDS)
BACKOFF_MAX = Setting("TWOLEVEL_BACKOFF_MAX", _FAILURES.backoff_max, SECONDS)  # >= BACKOFF
FAILED_SESSIONS = Setting(
    "TWOLEVEL_FAILED_SESSIONS",
    _FAILURES.failed_sessions,
    integer("an integer >= 0 (0: never give a host up)", lambda v: v >= 0),
)
GIVE_UP_AFTER = Setting(
    "TWOLEVEL_GIVE_UP_AFTER",
    _FAILURES.give_up_after,
    real("seconds >= 0 (0: never give up a host that has answered)", lambda v: v >= 0),
)
FIRST_ANSWER_TIMEOUT = Setting(
    "TWOLEVEL_FIRST_ANSWER_TIMEOUT", _FAILURES.first_answer_timeout, SECONDS
)
# Politeness that listens (TwoLevelConfig; docs/politeness.rst)
HOST_DELAY = Setting("TWOLEVEL_HOST_DELAY", 0.0, SECONDS)
CRAWL_DELAY = Setting("TWOLEVEL_CRAWL_DELAY", True, flag)
REFUSAL_CODES = Setting("TWOLEVEL_REFUSAL_CODES", (429, 503), _status_codes)
REFUSAL_RETRIES = Setting("TWOLEVEL_REFUSAL_RETRIES", 10, NOT_NEGATIVE)
RETRY_AFTER_MAX = Setting("TWOLEVEL_RETRY_AFTER_MAX", 600.0, POSITIVE_SECONDS)
HOST_BUDGET = Setting(
    "TWOLEVEL_HOST_BUDGET", 0, integer("pages >= 0 (0: no budget)", lambda v: v >= 0)
)
HOST_BUDGETS = Setting("TWOLEVEL_HOST_BUDGETS", {}, _budgets)
# The seen cache (SeenConfig)
SEEN_MODE = Setting("TWOLEVEL_SEEN_MODE", "exact", choice(*SEEN_MODES))
# From the URL-cache study (archived, benchmarks/README.md): CLOCK matches LRU's hit rate
# for less CPU and RAM;
# 2^16 is the critical point with up to 64 hosts crawled at once (docs/seencache.rst)
SEEN_CACHE_POLICY = Setting("TWOLEVEL_SEEN_CACHE_POLICY", "clock", choice(*CACHE_POLICIES))
SEEN_CACHE_SIZE = Setting("TWOLEVEL_SEEN_CACHE_SIZE", 1 << 16, NOT_NEGATIVE)
SEEN_ERROR_RATE = Setting(  # None: DEFAULT_SEEN_ERROR_RATE of the mode
    "TWOLEVEL_SEEN_ERROR_RATE",
    None,
    optional(real("a number in [0.000001, 0.5]", lambda v: 1e-6 <= v <= 0.5)),
)
SEEN_BLOOM = Setting("TWOLEVEL_SEEN_BLOOM", "builtin", choice(*SEEN_BLOOMS))
SEEN_INITIAL_CAPACITY = Setting(
    "TWOLEVEL_SEEN_INITIAL_CAPACITY", 1 << 20, integer("an integer >= 1000", lambda v: v >= 1000)
)
SEEN_PATH = Setting("TWOLEVEL_SEEN_PATH", None, path)  # None: JOBDIR, else a temporary file
# Seed recrawling (RecrawlConfig; docs/recrawl.rst)
RECRAWL = Setting("TWOLEVEL_RECRAWL", False, flag)
RECRAWL_HISTORY = Setting("TWOLEVEL_RECRAWL_HISTORY", None, path)  # None: JOBDIR, else .scrapy
RECRAWL_MODEL = Setting("TWOLEVEL_RECRAWL_MODEL", None, path)  # None: beside the history
RECRAWL_BUDGET = Setting(  # fetches per day over all seeds; None: the threshold decides
    "TWOLEVEL_RECRAWL_BUDGET", None, optional(real("fetches per day > 0", lambda v: v > 0))
)
RECRAWL_THRESHOLD = Setting(
    "TWOLEVEL_RECRAWL_THRESHOLD", 1.0, real("a number > 0", lambda v: v > 0)
)
RECRAWL_GAMMA = Setting(
    "TWOLEVEL_RECRAWL_GAMMA", 0.5, real("a number in [0, 1]", lambda v: 0 <= v <= 1)
)
RECRAWL_MIN_INTERVAL = Setting("TWOLEVEL_RECRAWL_MIN_INTERVAL", 60.0, POSITIVE_SECONDS)
RECRAWL_MAX_INTERVAL = Setting("TWOLEVEL_RECRAWL_MAX_INTERVAL", 86400.0, POSITIVE_SECONDS)
RECRAWL_INITIAL_INTERVAL = Setting("TWOLEVEL_RECRAWL_INITIAL_INTERVAL", 3600.0, POSITIVE_SECONDS)
RECRAWL_LIST_SIZE = Setting("TWOLEVEL_RECRAWL_LIST_SIZE", None, optional(AT_LEAST_ONE))
RECRAWL_DURATION = Setting(  # real seconds the crawl stays open
    "TWOLEVEL_RECRAWL_DURATION", 0.0, real("seconds >= 0 (0: no bound)", lambda v: v >= 0)
)
RECRAWL_TRAIN_DAYS = Setting(
    "TWOLEVEL_RECRAWL_TRAIN_DAYS",
    30,
    integer(
        f"an integer > {RECRAWL_TAIL_DAYS} (the last {RECRAWL_TAIL_DAYS} days validate "
        "the model trained on the days before)",
        lambda v: v > RECRAWL_TAIL_DAYS,
    ),
)
RECRAWL_MIN_SAMPLES = Setting("TWOLEVEL_RECRAWL_MIN_SAMPLES", 1000, NOT_NEGATIVE)
RECRAWL_RETRAIN_INTERVAL = Setting(  # planner seconds
    "TWOLEVEL_RECRAWL_RETRAIN_INTERVAL",
    0.0,
    real("seconds >= 0 (0: never during a crawl)", lambda v: v >= 0),
)
RECRAWL_TIME_SCALE = Setting(
    "TWOLEVEL_RECRAWL_TIME_SCALE", 1.0, real("a number > 0", lambda v: v > 0)
)
RECRAWL_TIME_ORIGIN = Setting(
    "TWOLEVEL_RECRAWL_TIME_ORIGIN", None, optional(real("epoch seconds", lambda v: True))
)
# The distributed mode (ClusterConfig; TWOLEVEL_REDIS_URL switches it on)
REDIS_URL = Setting("TWOLEVEL_REDIS_URL", None, _redis_url)
CRAWL_ID = Setting("TWOLEVEL_CRAWL_ID", None, node_name)  # None: the spider's name
NODE_ID = Setting("TWOLEVEL_NODE_ID", None, node_name)  # None: <host name>-<process id>
BUCKETS = Setting(
    "TWOLEVEL_BUCKETS", 16384, integer("an integer in [1, 1000000]", lambda v: 1 <= v <= 10**6)
)
NODE_TTL = Setting("TWOLEVEL_NODE_TTL", 10.0, real("seconds >= 1", lambda v: v >= 1))
SYNC_INTERVAL = Setting("TWOLEVEL_SYNC_INTERVAL", 0.1, POSITIVE_SECONDS)  # <= NODE_TTL / 10
WAIT_FOR_WORK = Setting("TWOLEVEL_WAIT_FOR_WORK", 0.0, SECONDS)
REBALANCE_INTERVAL = Setting(
    "TWOLEVEL_REBALANCE_INTERVAL", 30.0, real("seconds >= 0 (0: never)", lambda v: v >= 0)
)
REBALANCE_TOLERANCE = Setting(  # share of the mean node load left unbalanced
    "TWOLEVEL_REBALANCE_TOLERANCE", 0.25, real("a number >= 0", lambda v: v >= 0)
)
# Topics (topic_specs; None: one topic; docs/topics.rst)
TOPICS = Setting("TWOLEVEL_TOPICS", None, _as_is)
PORT = Setting("TWOLEVEL_WEB_PORT", None, optional(integer("0-65535", lambda v: 0 <= v < 65536)))
WEB_HOST = Setting("TWOLEVEL_WEB_HOST", "127.0.0.1", path)  # the live view: live/extension.py
WEB_TOP_HOSTS = Setting("TWOLEVEL_WEB_TOP_HOSTS", 50, AT_LEAST_ONE)
PROMETHEUS_MAX_HOSTS = Setting(
    "TWOLEVEL_PROMETHEUS_MAX_HOSTS",
    50,
    integer("an integer >= 0 (0: no per-host series)", lambda v: v >= 0),
)
STATUS_INTERVAL = Setting("TWOLEVEL_STATUS_INTERVAL", 60.0, SECONDS)  # 0: no log line

#: Every setting, in the order of ``docs/settings.rst``.
SETTINGS: tuple[Setting, ...] = tuple(v for v in list(globals().values()) if isinstance(v, Setting))
#: Defaults, by name.
DEFAULTS: dict[str, Any] = {s.name: s.default for s in SETTINGS}


# -- one reader per feature ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TwoLevelConfig:
    """The scheduler's and the middleware's settings, resolved and validated."""

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
    #: Without JOBDIR, queued requests are kept encoded (``"encoded"``) or as themselves.
    memory_queue: str = "encoded"
    #: Least seconds between the starts of two requests to one host.
    host_delay: float = 0.0
    #: Honour robots.txt ``Crawl-delay`` (with ``ROBOTSTXT_OBEY``).
    crawl_delay: bool = True
    #: Responses that refuse a request for now (the host is parked, the request retried).
    refusal_codes: tuple[int, ...] = (429, 503)
    #: Times one request is retried after refusals before RetryMiddleware sees the refusal.
    refusal_retries: int = 10
    #: The longest ``Retry-After`` honoured, in seconds.
    retry_after_max: float = 600.0
    #: Pages per host (0: no budget), and budgets by host pattern.
    host_budget: int = 0
    host_budgets: tuple[tuple[str, int], ...] = ()
    #: The collector's young-generation threshold while open (``0``: Python's own).
    gc_threshold: int = 50_000
    #: A session past its ``P`` goes on while no other host wants its place.
    extend_sessions: bool = True

    def budget(self) -> Callable[[str], int | None] | None:
        """``host -> pages`` for the frontier; ``None`` when no host has a budget."""
        if not self.host_budget and not any(pages for _, pages in self.host_budgets):
            return None
        return make_budget(self.host_budget, dict(self.host_budgets))

    @classmethod
    def from_settings(cls, settings: _Settings) -> TwoLevelConfig:
        policy = POLICY.read(settings)
        max_open = MAX_OPEN_HOSTS.read(settings)
        if max_open is None:
            # As in Scrapy's downloader, CONCURRENT_REQUESTS = 0 means "no limit".
            concurrent = _integer(
                "CONCURRENT_REQUESTS",
                settings.get("CONCURRENT_REQUESTS", 16),
                "an integer >= 0 (0: no limit)",
                lambda v: v >= 0,
            )
            max_open = concurrent or None
        cost = CostParams(
            default_requests_per_connection=REQUESTS_PER_CONNECTION.read(settings),
            keepalive_speedup=KEEPALIVE_SPEEDUP.read(settings),
            alpha=EWMA_ALPHA.read(settings),
            default_connection_time=CONNECTION_TIME.read(settings),
            default_response_time=RESPONSE_TIME.read(settings),
            # No limit: a connection costs nothing but its host's time, as with one.
            connections=max_open or 1,
        )
        backoff = BACKOFF.read(settings)
        failures = FailurePolicy(
            session_failures=SESSION_FAILURES.read(settings),
            backoff=backoff,
            backoff_max=BACKOFF_MAX.read(
                settings,
                real(f"seconds >= TWOLEVEL_BACKOFF ({backoff})", lambda v: v >= backoff),
            ),
            failed_sessions=FAILED_SESSIONS.read(settings),
            give_up_after=GIVE_UP_AFTER.read(settings),
            first_answer_timeout=FIRST_ANSWER_TIMEOUT.read(settings),
        )
        quality = QUALITY.read(settings)
        return cls(
            policy=policy,
            max_open_hosts=max_open,
            cost=cost,
            failures=failures,
            quality=quality,
            host_key=HOST_KEY.read(settings),
            idle_timeout=IDLE_TIMEOUT.read(settings),
            stats_top_hosts=STATS_TOP_HOSTS.read(settings),
            disk_cache_mb=DISK_CACHE_MB.read(settings),
            commit_interval=COMMIT_INTERVAL.read(settings),
            memory_queue=MEMORY_QUEUE.read(settings),
            host_delay=HOST_DELAY.read(settings),
            crawl_delay=CRAWL_DELAY.read(settings),
            refusal_codes=REFUSAL_CODES.read(settings),
            refusal_retries=REFUSAL_RETRIES.read(settings),
            retry_after_max=RETRY_AFTER_MAX.read(settings),
            host_budget=HOST_BUDGET.read(settings),
            host_budgets=tuple(HOST_BUDGETS.read(settings).items()),
            gc_threshold=GC_THRESHOLD.read(settings),
            extend_sessions=EXTEND_SESSIONS.read(settings),
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
        mode = SEEN_MODE.read(settings)
        error_rate = SEEN_ERROR_RATE.read(settings)
        path = SEEN_PATH.read(settings)
        return cls(
            mode=mode,
            cache_policy=SEEN_CACHE_POLICY.read(settings),
            cache_size=SEEN_CACHE_SIZE.read(settings),
            error_rate=DEFAULT_SEEN_ERROR_RATE[mode] if error_rate is None else error_rate,
            bloom=SEEN_BLOOM.read(settings),
            initial_capacity=SEEN_INITIAL_CAPACITY.read(settings),
            path=path,
        )


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
        budget = RECRAWL_BUDGET.read(settings)
        low = RECRAWL_MIN_INTERVAL.read(settings)
        high = RECRAWL_MAX_INTERVAL.read(
            settings,
            real(f"seconds >= TWOLEVEL_RECRAWL_MIN_INTERVAL ({low})", lambda v: v >= low),
        )
        list_size = RECRAWL_LIST_SIZE.read(settings)
        scale = RECRAWL_TIME_SCALE.read(settings)
        origin = RECRAWL_TIME_ORIGIN.read(settings)
        return cls(
            enabled=RECRAWL.read(settings),
            history=RECRAWL_HISTORY.read(settings),
            model=RECRAWL_MODEL.read(settings),
            budget=budget,
            threshold=RECRAWL_THRESHOLD.read(settings),
            gamma=RECRAWL_GAMMA.read(settings),
            min_interval=low,
            max_interval=high,
            initial_interval=RECRAWL_INITIAL_INTERVAL.read(
                settings,
                real(
                    f"seconds in [{low}, {high}] (the MIN and MAX intervals)",
                    lambda v: low <= v <= high,
                ),
            ),
            list_size=list_size,
            duration=RECRAWL_DURATION.read(settings),
            train_days=RECRAWL_TRAIN_DAYS.read(settings),
            min_samples=RECRAWL_MIN_SAMPLES.read(settings),
            retrain_interval=RECRAWL_RETRAIN_INTERVAL.read(settings),
            time_scale=scale,
            time_origin=origin,
        )


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
        url = REDIS_URL.read(settings)
        ttl = NODE_TTL.read(settings)
        return cls(
            redis_url=url,
            crawl_id=CRAWL_ID.read(settings),
            node_id=NODE_ID.read(settings),
            buckets=BUCKETS.read(settings),
            node_ttl=ttl,
            sync_interval=SYNC_INTERVAL.read(
                settings,
                real(
                    f"seconds in [0.01, TWOLEVEL_NODE_TTL / 10 = {ttl / 10}]",
                    lambda v: 0.01 <= v <= ttl / 10,
                ),
            ),
            wait_for_work=WAIT_FOR_WORK.read(settings),
            rebalance_interval=REBALANCE_INTERVAL.read(settings),
            rebalance_tolerance=REBALANCE_TOLERANCE.read(settings),
        )


def topic_specs(settings: _Settings, spidercls: Any = None) -> list[TopicSpec] | None:
    """``TWOLEVEL_TOPICS`` (else the spider's ``twolevel_topics`` attribute) parsed, or
    ``None`` when neither declares topics."""
    raw = TOPICS.read(settings)
    source = TOPICS.name
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
