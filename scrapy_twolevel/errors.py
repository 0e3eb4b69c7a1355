"""The errors scrapy_twolevel raises at start-up, for settings and for stored state.

Both are ``ValueError`` subclasses, because Scrapy builds the scheduler and the
dupefilter directly and catches ``NotConfigured`` only for middlewares, extensions and
pipelines: a ``ValueError`` stops the crawl with our message.
"""

from __future__ import annotations

from pathlib import Path


class SettingsError(ValueError):
    """A ``TWOLEVEL_*`` setting (or a Scrapy setting the scheduler relies on) is invalid."""


class StateError(ValueError):
    """A state file (or a crawl's state in Redis) is corrupt or was written by something else."""


class ShapeMismatch(StateError):
    """The file was written under another shape (e.g. another host-key mode)."""

    def __init__(self, path: Path, key: str, stored: str | None, wanted: str) -> None:
        self.path, self.key, self.stored, self.wanted = path, key, stored, wanted
        super().__init__(
            f"{path} was written with {key}={stored!r}, but this crawl has {key}={wanted!r}. "
            "It was left untouched."
        )


class StoreUnavailable(OSError):
    """The ``JOBDIR`` file can neither take writes nor replay the ones it holds in memory
    (a file system gone read-only): what is queued cannot be read back until it can."""
