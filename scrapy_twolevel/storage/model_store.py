"""Where a crawl's trained recrawl model is kept: a JSON file, or Redis.

:class:`ModelStore` is the interface; :class:`FileModelStore` is the file
(``TWOLEVEL_RECRAWL_MODEL``, or beside the history), and
:class:`~scrapy_twolevel.distributed.history.RedisModelStore` the distributed mode's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from ..errors import StateError
from ..recrawl.model import RecrawlPredictor


def load_model(path: Path) -> RecrawlPredictor | None:
    """The trained model at ``path``, ``None`` if there is none; ``StateError`` if damaged."""
    return load_stored_model(FileModelStore(path))


class ModelStore(Protocol):
    """Where a crawl's trained model is kept: a file, or Redis in the distributed mode
    (:class:`~scrapy_twolevel.distributed.history.RedisModelStore`)."""

    @property
    def location(self) -> str: ...

    def load(self) -> RecrawlPredictor | None: ...

    def save(self, predictor: RecrawlPredictor) -> None: ...


class FileModelStore:
    """The model in a JSON file (``TWOLEVEL_RECRAWL_MODEL``, or beside the history)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def location(self) -> str:
        return str(self.path)

    def load(self) -> RecrawlPredictor | None:
        """``None`` if there is no file; ``ValueError`` (or ``OSError``) if it is damaged."""
        if not self.path.exists():
            return None
        return RecrawlPredictor.load(self.path)

    def save(self, predictor: RecrawlPredictor) -> None:
        predictor.save(self.path)


def load_stored_model(store: ModelStore) -> RecrawlPredictor | None:
    """``store``'s model, ``None`` if it has none; :class:`StateError` if it is damaged."""
    try:
        return store.load()
    except (ValueError, KeyError, TypeError, OSError) as exc:
        raise StateError(
            f"{store.location} is not a recrawl model ({exc}). It was left untouched; run "
            "`scrapy recrawl train` again (or, for a file, set TWOLEVEL_RECRAWL_MODEL)."
        ) from exc
