"""``SeenCacheDupeFilter``: Scrapy's dupefilter over the layered seen set.

``DUPEFILTER_CLASS = "scrapy_twolevel.dupefilter.SeenCacheDupeFilter"`` (the add-on sets
it unless the project chose another). Thin glue: :mod:`scrapy_twolevel.seen` decides;
this module builds it from the settings, turns requests into keys with the crawler's
``REQUEST_FINGERPRINTER`` (so a project's fingerprinting still holds), keeps the stats and
opens the store.

Where the exact store lives:

- with ``TwoLevelScheduler`` and ``JOBDIR``: in the scheduler's frontier file
  (``JOBDIR/twolevel/frontier.sqlite3``), in the same transactions as the queued
  requests, so a killed crawl loses nothing (the scheduler calls :meth:`attach_store`
  before :meth:`open`);
- with another scheduler and ``JOBDIR``: ``JOBDIR/twolevel/seen.sqlite3``;
- without ``JOBDIR``: ``TWOLEVEL_SEEN_PATH``, or a temporary file removed at close (or,
  after a ``kill -9``, by the next crawl on the machine: :mod:`.storage.temp_files`);
- in the distributed mode (``TWOLEVEL_REDIS_URL``): always a temporary file, whatever
  ``JOBDIR`` and ``TWOLEVEL_SEEN_PATH`` say. Redis holds the durable copy of each bucket's
  keys and a node loads them with the bucket; keys kept in a local file could outlive a
  kill without having reached Redis, and would then filter their URLs for good.

In ``bloom-only`` mode there is no store; with ``JOBDIR`` the filter is saved to
``JOBDIR/twolevel/seen.bloom`` when the crawl stops.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy.dupefilters import BaseDupeFilter
from scrapy.utils.job import job_dir
from scrapy.utils.request import RequestFingerprinter, referer_str

from ._engine import peek_meta, url_fingerprint_function
from .components import DUPEFILTER_ROLE
from .config import SeenConfig
from .errors import ShapeMismatch, StateError
from .seen.bloom import BloomFilter, PyBloomLiveFilter, ScalableBloom
from .seen.cache import make_cache
from .seen.fingerprints import UrlKeyMemo, key_derivation, key_function
from .seen.seen_set import SeenSet
from .storage import temp_files
from .storage.sqlite import SqliteStore

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector
    from scrapy.utils.request import RequestFingerprinterProtocol

logger = logging.getLogger(__name__)

SEEN_FORMAT = "scrapy_twolevel.seen/1"
BLOOM_FILE_MAGIC = b"TLSEENBLOOM1\n"


def _class_path(obj: object) -> str:
    cls = type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"


class SeenCacheDupeFilter(BaseDupeFilter):
    """Exact duplicate filter in a few bytes of RAM per URL (see the module docstring)."""

    #: What the start-up checks (:mod:`scrapy_twolevel.glue.preflight`) look for.
    twolevel_role: ClassVar[str] = DUPEFILTER_ROLE

    def __init__(
        self,
        *,
        config: SeenConfig,
        fingerprinter: RequestFingerprinterProtocol,
        uniform_fingerprints: bool,
        url_fingerprint: Callable[[str], bytes] | None = None,
        stats: StatsCollector | None = None,
        jobdir: str | None = None,
        debug: bool = False,
        transient: bool = False,
    ) -> None:
        """``uniform_fingerprints``: the fingerprinter returns cryptographic digests of at
        least 16 bytes (Scrapy's default does), so keys are their first 16 bytes.
        ``url_fingerprint``: the fingerprinter's fingerprint of a GET without a body,
        from its URL alone (:func:`~scrapy_twolevel._engine.url_fingerprint_function`),
        so keys are computed from the URL and remembered by it; ``None``: the
        fingerprinter is asked for every request."""
        self.config = config
        self.fingerprinter = fingerprinter
        self._key = key_function(uniform_fingerprints)
        self._url_fingerprint = url_fingerprint
        self._memo = UrlKeyMemo(config.cache_size) if url_fingerprint is not None else None
        self.identity = {
            "format": SEEN_FORMAT,
            "REQUEST_FINGERPRINTER_CLASS": _class_path(fingerprinter),
            "key": key_derivation(uniform_fingerprints),
        }
        self.stats = stats
        self.jobdir = None if transient else jobdir
        self.transient = transient  # the distributed mode: see the module docstring
        self.debug = debug
        self.logdupes = True
        self.seen: SeenSet | None = None
        self._shared: SqliteStore | None = None
        self._own: SqliteStore | None = None
        self._temp_path: Path | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        config = SeenConfig.from_settings(crawler.settings)
        fingerprinter = crawler.request_fingerprinter
        jobdir = job_dir(crawler.settings)
        if config.mode == "bloom-only" and config.bloom != "builtin" and jobdir:
            raise ValueError(
                f"TWOLEVEL_SEEN_BLOOM={config.bloom!r} cannot be saved in a JOBDIR in "
                "bloom-only mode; use TWOLEVEL_SEEN_BLOOM='builtin' or TWOLEVEL_SEEN_MODE='exact'"
            )
        return cls(
            config=config,
            fingerprinter=fingerprinter,
            # Exactly Scrapy's class: a subclass may return anything.
            uniform_fingerprints=type(fingerprinter) is RequestFingerprinter,
            url_fingerprint=url_fingerprint_function(fingerprinter),
            stats=crawler.stats,
            jobdir=jobdir,
            debug=crawler.settings.getbool("DUPEFILTER_DEBUG"),
            transient=bool(crawler.settings.get("TWOLEVEL_REDIS_URL")),
        )

    def attach_store(self, store: SqliteStore) -> None:
        """Keep the seen keys in ``store`` (the scheduler's JOBDIR file); before :meth:`open`."""
        self._shared = store

    # -- Scrapy's dupefilter interface --------------------------------------------------

    def open(self) -> None:
        cache = make_cache(self.config.cache_policy, self.config.cache_size)
        factory = PyBloomLiveFilter if self.config.bloom == "pybloom-live" else BloomFilter
        if self.config.mode == "bloom-only":
            self.seen = SeenSet(
                cache,
                None,
                error_rate=self.config.error_rate,
                initial_capacity=self.config.initial_capacity,
                bloom=self._load_bloom()
                or ScalableBloom(
                    self.config.error_rate, self.config.initial_capacity, filter_factory=factory
                ),
            )
            return
        store = self._shared or self._open_own_store()
        try:
            seen_store = store.seen_store(self.identity, with_queue=store is self._shared)
        except ShapeMismatch as exc:
            self.close("shutdown")
            raise StateError(
                f"{exc} The seen keys in it were made by another fingerprinter or version; "
                "resume with the same REQUEST_FINGERPRINTER_CLASS, or use a fresh JOBDIR."
            ) from exc
        self.seen = SeenSet(
            cache,
            seen_store,
            error_rate=self.config.error_rate,
            initial_capacity=self.config.initial_capacity,
            filter_factory=factory,
        )

    def _open_own_store(self) -> SqliteStore:
        if self.jobdir:
            path = Path(self.jobdir, "twolevel", "seen.sqlite3")
            path.parent.mkdir(parents=True, exist_ok=True)
        elif self.config.path and not self.transient:
            path = Path(self.config.path)
        else:
            files, freed = temp_files.sweep()
            if files:
                logger.info(
                    "Removed %(files)d seen-keys file(s), %(mb).1f MB, left in %(dir)s by "
                    "crawls without JOBDIR that were killed.",
                    {"files": files, "mb": freed / 1e6, "dir": tempfile.gettempdir()},
                )
            path = self._temp_path = temp_files.create()
        self._own = SqliteStore(path, on_error=self._store_failing, on_recover=self._recovered)
        return self._own

    def _store_failing(self, exc: Exception) -> None:
        if self.stats is not None:
            self.stats.inc_value("twolevel/seen/store_failures")
        logger.warning(
            "The seen keys' file %(path)s cannot be written (%(error)s): new keys are kept "
            "in memory until it takes writes again; nothing is filtered wrongly.",
            {"path": self._own.path if self._own else "?", "error": f"{type(exc).__name__}: {exc}"},
        )

    def _recovered(self, saved: int) -> None:
        logger.warning(
            "The seen keys' file takes writes again: %(n)d kept writes saved.", {"n": saved}
        )

    def request_seen(self, request: Request) -> bool:
        if request.dont_filter:
            return False
        assert self.seen is not None, "open() was not called"
        return self.seen.test_and_add(self.request_key(request))

    # -- the distributed mode: the scheduler keeps each bucket's keys in Redis too --------

    def request_key(self, request: Request) -> bytes:
        """The 16-byte seen key of ``request``."""
        memo = self._memo
        if (
            memo is None
            or request.method != "GET"
            or request.body
            or peek_meta(request).get("verbatim_url")
        ):
            return self._key(self.fingerprinter.fingerprint(request))
        url = request.url
        key = memo.get(url)
        if key is None:
            assert self._url_fingerprint is not None  # there is a memo only with it
            key = self._key(self._url_fingerprint(url))
            memo.remember(url, key)
        return key

    def key_seen(self, key: bytes) -> bool:
        """:meth:`request_seen` for a key from :meth:`request_key`."""
        assert self.seen is not None, "open() was not called"
        return self.seen.test_and_add(key)

    def has_key(self, key: bytes) -> bool:
        """Whether ``key`` is seen, without recording it: a ``dont_filter`` request is
        fetched either way, but its key need not be recorded twice."""
        assert self.seen is not None, "open() was not called"
        return key in self.seen

    def forget(self) -> None:
        """Start again with no key: a reaped node holds no bucket any more, and keys it
        recorded without committing them must not filter those URLs when they come back."""
        self.close("forget")
        self.open()

    def add_keys(self, keys: Iterable[bytes]) -> None:
        """Record keys seen by another node (a bucket handed over), uncounted."""
        assert self.seen is not None, "open() was not called"
        for key in keys:
            self.seen.add(key)

    def close(self, reason: str) -> None:
        if self.seen is not None:
            self._report()
            if self.seen.bloom_only and self.jobdir:
                self._save_bloom()
        if self._own is not None:
            self._own.close()
            self._own = None
        if self._temp_path is not None:
            temp_files.remove(self._temp_path)
            self._temp_path = None

    def log(self, request: Request, spider: Spider, *, count: bool = True) -> None:
        """As Scrapy's RFPDupeFilter: the first duplicate, or all with DUPEFILTER_DEBUG;
        ``count=False``: the caller adds to ``dupefilter/filtered`` itself (in batches)."""
        if self.debug:
            logger.debug(
                "Filtered duplicate request: %(request)s (referer: %(referer)s)",
                {"request": request, "referer": referer_str(request)},
                extra={"spider": spider},
            )
        elif self.logdupes:
            logger.debug(
                "Filtered duplicate request: %(request)s - no more duplicates will be shown"
                " (see DUPEFILTER_DEBUG to show all duplicates)",
                {"request": request},
                extra={"spider": spider},
            )
            self.logdupes = False
        if count and self.stats is not None:
            self.stats.inc_value("dupefilter/filtered")

    # -- helpers ------------------------------------------------------------------------

    def _report(self) -> None:
        assert self.seen is not None
        if self.stats is None:
            return
        c = self.seen.counters
        values: dict[str, Any] = {
            "mode": self.config.mode,
            "tests": c.tests,
            "urls": len(self.seen),
            "cache_hits": c.cache_hits,
            "url_key_hits": self._memo.hits if self._memo is not None else 0,
            "bloom_maybe": c.bloom_maybe,
            "store_lookups": c.store_lookups,
            "bloom_bytes": self.seen.bloom.nbytes,
            "bloom_rebuilds": c.rebuilds,
        }
        if c.tests:
            values["cache_hit_rate"] = round(c.cache_hits / c.tests, 4)
            values["bloom_maybe_rate"] = round(c.bloom_maybe / max(1, c.tests - c.cache_hits), 4)
        if not self.seen.bloom_only:
            values["bloom_false_positives"] = c.false_positives
            rate = c.observed_false_positive_rate
            if rate is not None:
                values["bloom_false_positive_rate"] = round(rate, 6)
        for name, value in values.items():
            self.stats.set_value(f"twolevel/seen/{name}", value)

    def _bloom_path(self) -> Path:
        assert self.jobdir
        return Path(self.jobdir, "twolevel", "seen.bloom")

    def _load_bloom(self) -> ScalableBloom | None:
        if not self.jobdir or not self._bloom_path().exists():
            return None
        path = self._bloom_path()
        data = path.read_bytes()
        try:
            if not data.startswith(BLOOM_FILE_MAGIC):
                raise ValueError("no bloom-only marker")
            head, _, blob = data[len(BLOOM_FILE_MAGIC) :].partition(b"\n")
            identity = json.loads(head)
            bloom = ScalableBloom.from_bytes(blob)
        except ValueError as exc:
            raise StateError(
                f"{path} is not a scrapy_twolevel bloom-only seen file ({exc}); it was left "
                "untouched. Use a fresh JOBDIR, or delete the file to start over."
            ) from exc
        if identity != self.identity:
            raise StateError(
                f"{path} was written with {identity}, but this crawl has {self.identity}. "
                "It was left untouched; resume with the same REQUEST_FINGERPRINTER_CLASS, "
                "or use a fresh JOBDIR."
            )
        return bloom

    def _save_bloom(self) -> None:
        assert self.seen is not None
        bloom = self.seen.bloom
        if not isinstance(bloom, ScalableBloom):
            return
        path = self._bloom_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        head = json.dumps(self.identity, sort_keys=True).encode()
        tmp.write_bytes(BLOOM_FILE_MAGIC + head + b"\n" + bloom.to_bytes())
        os.replace(tmp, path)
