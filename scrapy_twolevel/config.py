"""Every ``TWOLEVEL_*`` setting: its default, its rule, and one frozen object holding them.

:meth:`TwoLevelConfig.from_settings` is the only place that reads these settings. It
validates them all at start-up and raises ``ValueError`` naming the setting, the value
and what is allowed, because Scrapy builds the scheduler directly and would not catch a
``NotConfigured``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Protocol

from .frontier.estimates import CostParams

HOST_KEYS = ("hostname", "domain", "ip")
BUILTIN_POLICY_NAMES = ("breadth-first", "performance-first", "quality-first", "crawl-capability")

_COST = CostParams()

#: Defaults, in one place; ``docs/settings.rst`` documents each.
DEFAULTS: dict[str, Any] = {
    "TWOLEVEL_POLICY": "crawl-capability",
    "TWOLEVEL_MAX_OPEN_HOSTS": None,  # None: CONCURRENT_REQUESTS
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
}


class _Settings(Protocol):
    def get(self, name: str, default: Any = None) -> Any: ...
    def getint(self, name: str, default: int = 0) -> int: ...
    def getfloat(self, name: str, default: float = 0.0) -> float: ...


def _number(settings: _Settings, name: str, kind: type, rule: str, ok: Any) -> Any:
    raw = settings.get(name, DEFAULTS[name])
    try:
        value = kind(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={raw!r} is not a number; it must be {rule}") from None
    if (isinstance(value, float) and not math.isfinite(value)) or not ok(value):
        raise ValueError(f"{name}={raw!r} is out of range; it must be {rule}")
    return value


def _choice(settings: _Settings, name: str, valid: tuple[str, ...]) -> str:
    value = settings.get(name, DEFAULTS[name])
    if value not in valid:
        raise ValueError(f"{name}={value!r} is not valid; use one of: {', '.join(valid)}")
    return value


@dataclass(frozen=True, slots=True)
class TwoLevelConfig:
    """All ``TWOLEVEL_*`` settings, resolved and validated."""

    policy: str
    max_open_hosts: int
    cost: CostParams
    quality: str
    host_key: str
    idle_timeout: float
    stats_top_hosts: int
    disk_cache_mb: int

    @classmethod
    def from_settings(cls, settings: _Settings) -> TwoLevelConfig:
        policy = settings.get("TWOLEVEL_POLICY", DEFAULTS["TWOLEVEL_POLICY"])
        if (
            not isinstance(policy, str)
            or not policy
            or (policy not in BUILTIN_POLICY_NAMES and "." not in policy)
        ):
            raise ValueError(
                f"TWOLEVEL_POLICY={policy!r} is not valid; use one of: "
                f"{', '.join(BUILTIN_POLICY_NAMES)}, or the import path of a Policy subclass"
            )
        max_open = settings.get("TWOLEVEL_MAX_OPEN_HOSTS")
        if max_open is None:
            max_open = max(1, settings.getint("CONCURRENT_REQUESTS", 16))
        else:
            max_open = _number(
                settings, "TWOLEVEL_MAX_OPEN_HOSTS", int, "an integer >= 1", lambda v: v >= 1
            )
        cost = CostParams(
            default_requests_per_connection=_number(
                settings,
                "TWOLEVEL_DEFAULT_REQUESTS_PER_CONNECTION",
                float,
                "a number >= 1",
                lambda v: v >= 1,
            ),
            keepalive_speedup=_number(
                settings, "TWOLEVEL_KEEPALIVE_SPEEDUP", float, "a number > 0 (p)", lambda v: v > 0
            ),
            alpha=_number(
                settings,
                "TWOLEVEL_EWMA_ALPHA",
                float,
                "a number in [0, 1)",
                lambda v: 0 <= v < 1,
            ),
            default_connection_time=_number(
                settings,
                "TWOLEVEL_DEFAULT_CONNECTION_TIME",
                float,
                "seconds >= 0",
                lambda v: v >= 0,
            ),
            default_response_time=_number(
                settings,
                "TWOLEVEL_DEFAULT_RESPONSE_TIME",
                float,
                "seconds > 0",
                lambda v: v > 0,
            ),
        )
        quality = settings.get("TWOLEVEL_QUALITY", DEFAULTS["TWOLEVEL_QUALITY"])
        if not isinstance(quality, str) or not (
            quality == "priority"
            or (quality.startswith("meta:") and len(quality) > 5)
            or ("." in quality and not quality.startswith("meta:"))
        ):
            raise ValueError(
                f"TWOLEVEL_QUALITY={quality!r} is not valid; use 'priority', 'meta:<key>', "
                "or the import path of a callable taking a Request and returning a number"
            )
        return cls(
            policy=policy,
            max_open_hosts=max_open,
            cost=cost,
            quality=quality,
            host_key=_choice(settings, "TWOLEVEL_HOST_KEY", HOST_KEYS),
            idle_timeout=_number(
                settings, "TWOLEVEL_IDLE_TIMEOUT", float, "seconds >= 0", lambda v: v >= 0
            ),
            stats_top_hosts=_number(
                settings, "TWOLEVEL_STATS_TOP_HOSTS", int, "an integer >= 0", lambda v: v >= 0
            ),
            disk_cache_mb=_number(
                settings, "TWOLEVEL_DISK_CACHE_MB", int, "an integer >= 1", lambda v: v >= 1
            ),
        )
