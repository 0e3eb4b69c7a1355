"""Two-level (host + URL) scheduling for Scrapy.

Public API: the scheduler, the host metrics middleware, the seen-cache dupefilter, the
add-on, the settings object and the policy base class for custom policies.
"""

from .addon import Addon
from .config import TwoLevelConfig
from .frontier.policies import Policy

__all__ = [
    "Addon",
    "HostMetricsMiddleware",
    "Policy",
    "SeenCacheDupeFilter",
    "TwoLevelConfig",
    "TwoLevelScheduler",
]

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # Lazy, so ``import scrapy_twolevel`` (e.g. for settings constants) does not import
    # Scrapy's scheduler machinery until it is used.
    if name == "TwoLevelScheduler":
        from .scheduler import TwoLevelScheduler

        return TwoLevelScheduler
    if name == "HostMetricsMiddleware":
        from .middleware import HostMetricsMiddleware

        return HostMetricsMiddleware
    if name == "SeenCacheDupeFilter":
        from .dupefilter import SeenCacheDupeFilter

        return SeenCacheDupeFilter
    raise AttributeError(name)
