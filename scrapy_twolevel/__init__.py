"""Two-level (host + URL) scheduling for Scrapy.

The public names, each at the path to write in ``settings.py`` (docs/reference.rst lists
the same): the scheduler, the host metrics middleware, the seen-cache dupefilter, the four
spider middlewares, the add-on, the settings reader, the policy base class for custom
policies, and the two error types.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._version import __version__ as __version__
from .addon import Addon
from .config import TwoLevelConfig
from .errors import SettingsError, StateError
from .frontier.policies import Policy

if TYPE_CHECKING:
    # The lazy names below, for type checkers; at run time ``__getattr__`` imports them.
    from .dupefilter import SeenCacheDupeFilter
    from .duplicate_links import DuplicateLinksMiddleware
    from .middleware import HostMetricsMiddleware
    from .scheduler import TwoLevelScheduler
    from .seeds import SeedMiddleware
    from .start_pacing import StartPacingMiddleware
    from .topics import TopicMiddleware

__all__ = [
    "Addon",
    "DuplicateLinksMiddleware",
    "HostMetricsMiddleware",
    "Policy",
    "SeedMiddleware",
    "SeenCacheDupeFilter",
    "SettingsError",
    "StartPacingMiddleware",
    "StateError",
    "TopicMiddleware",
    "TwoLevelConfig",
    "TwoLevelScheduler",
]


#: Imported on first use, so ``import scrapy_twolevel`` (e.g. for settings constants) does
#: not import Scrapy's scheduler machinery.
_LAZY = {
    "TwoLevelScheduler": ".scheduler",
    "HostMetricsMiddleware": ".middleware",
    "SeenCacheDupeFilter": ".dupefilter",
    "SeedMiddleware": ".seeds",
    "TopicMiddleware": ".topics",
    "DuplicateLinksMiddleware": ".duplicate_links",
    "StartPacingMiddleware": ".start_pacing",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(name)
