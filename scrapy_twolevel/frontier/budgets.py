"""Per-host page budgets: how many pages of a host a crawl fetches at most.

What users of other crawlers rely on (Heritrix's queue budgets, Nutch's
``generate.max.count``, Frontera's max pages per host): a site with millions of pages must
not take the whole crawl. A budget is counted in responses; once a host has had its
budget, its queued URLs and later ones are dropped and counted. Pure module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fnmatch import fnmatchcase


def make_budget(default: int, patterns: Mapping[str, int]) -> Callable[[str], int | None]:
    """``host key -> pages`` (``None``: no budget).

    ``patterns`` maps shell-style patterns of host keys (``*.example.com``) to budgets; the
    first that matches, in the mapping's order, wins; else ``default``. 0 means no budget.
    """
    rules = [(pattern.lower(), pages) for pattern, pages in patterns.items()]

    def budget(host: str) -> int | None:
        for pattern, pages in rules:
            if fnmatchcase(host, pattern):
                return pages or None
        return default or None

    return budget
