"""What a crawl learned about its seed pages, in one SQLite file: the training data.

Three tables:

- ``fetches``: every completed fetch of a seed (seed key, time, new links it found);
- ``articles``: every new link found on a seed page (URL, seed key, the fetch that found
  it and the one before, and the publish time read from the article page once fetched);
- ``plans``: each seed's next planned fetch and the request to send then, so a resumed
  crawl keeps its schedule.

:meth:`HistoryStore.events` turns the articles into the ``(seed_key, publish_time)`` pairs
that :func:`~scrapy_twolevel.recrawl.model.fit_predictor` takes, applying the midpoint
rule to articles without a date (:func:`~scrapy_twolevel.recrawl.samples.known_or_midpoint`).

Writes are batched: :meth:`HistoryStore.commit` is called by the owner (at most once a
second in a crawl, and at close). A killed crawl loses at most the writes since then,
and a seed whose plan was not committed is fetched once more than planned: never lost.

A write or commit the disk refuses (full, I/O error, locked) never raises: the history
is what the crawl learns from, not what it must fetch, so the refused observations are
counted (:attr:`HistoryStore.lost`), ``on_error`` is told once, and the crawl goes on;
later writes are kept again once the disk takes them.

No Scrapy here. Raises :class:`~scrapy_twolevel.errors.StateError` for a
file that is not a history file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import StateError
from ..recrawl.planner import Plan
from ..recrawl.samples import MIDPOINT_MAX_GAP, known_or_midpoint
from .sqlite import check_format_marker

#: Format marker stored in the file; bump when the schema changes.
FORMAT = "scrapy_twolevel.recrawl-history/1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS fetches (
    seed TEXT NOT NULL, at REAL NOT NULL, new_links INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS fetches_by_seed ON fetches (seed, at);
CREATE TABLE IF NOT EXISTS articles (
    url TEXT PRIMARY KEY, seed TEXT NOT NULL, found_at REAL NOT NULL,
    previous_fetch REAL, published REAL
);
CREATE TABLE IF NOT EXISTS plans (
    seed TEXT PRIMARY KEY, due REAL NOT NULL, request BLOB NOT NULL
);
"""


class HistoryStore:
    """The history file of one crawl (or of every crawl of one spider, without JOBDIR)."""

    #: Read only from the thread that opened it (a SQLite connection's rule).
    thread_safe = False

    def __init__(
        self, path: str | Path, on_error: Callable[[Exception], None] | None = None
    ) -> None:
        self.path = Path(path)
        self.on_error = on_error
        #: Writes lost to a disk that refused them (see the module docstring).
        self.lost = 0
        existed = self.path.exists() and self.path.stat().st_size > 0
        if not existed:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, isolation_level=None)
        try:
            if existed:
                # Before any PRAGMA: switching a foreign file to WAL would rewrite its header.
                check_format_marker(
                    self.db,
                    self.path,
                    FORMAT,
                    "not a recrawl history file of this version. It was left untouched; "
                    "point TWOLEVEL_RECRAWL_HISTORY elsewhere or use a fresh JOBDIR.",
                )
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            if not existed:
                self.db.executescript(_SCHEMA)
                self.db.execute("INSERT INTO meta VALUES ('format', ?)", (FORMAT,))
        except sqlite3.DatabaseError as exc:
            self.db.close()
            raise StateError(
                f"{self.path} is not a recrawl history file ({exc}); it was left untouched."
            ) from exc
        except StateError:
            self.db.close()
            raise
        self.db.execute("BEGIN")
        self.uncommitted = 0

    # -- writing ---------------------------------------------------------------------

    def _write(self, sql: str, params: tuple[object, ...] = ()) -> int:
        """Run one write: its row count, or -1 if the disk refused it."""
        try:
            cursor = self.db.execute(sql, params)
        except sqlite3.OperationalError as exc:
            self._refused(exc, 1)
            return -1
        self.uncommitted += 1
        return cursor.rowcount

    def _refused(self, exc: Exception, writes: int) -> None:
        if not self.db.in_transaction:  # SQLite rolled back the writes before it, too
            writes += self.uncommitted
            self.uncommitted = 0
            self.db.execute("BEGIN")
        if not self.lost and self.on_error is not None:
            self.on_error(exc)
        self.lost += writes

    def record_fetch(self, seed: str, at: float, new_links: int) -> None:
        """A fetch of ``seed`` at ``at`` whose page held ``new_links`` links not seen before."""
        self._write("INSERT INTO fetches VALUES (?, ?, ?)", (seed, at, new_links))

    def record_article(
        self, url: str, seed: str, found_at: float, previous_fetch: float | None
    ) -> bool:
        """A new link on ``seed``'s page; ``False`` if the URL was already recorded."""
        return (
            self._write(
                "INSERT OR IGNORE INTO articles VALUES (?, ?, ?, ?, NULL)",
                (url, seed, found_at, previous_fetch),
            )
            > 0
        )

    def record_published(self, url: str, published: float) -> bool:
        """The publish time read from the article page; ``False`` for an unknown URL."""
        return self._write("UPDATE articles SET published=? WHERE url=?", (published, url)) > 0

    def save_plan(self, plan: Plan) -> None:
        self._write(
            "INSERT OR REPLACE INTO plans VALUES (?, ?, ?)", (plan.seed, plan.due, plan.request)
        )

    def clear_plans(self) -> int:
        """Forget every plan (a new crawl, not a resumed one); how many there were."""
        return max(self._write("DELETE FROM plans"), 0)

    def commit(self) -> None:
        if not self.uncommitted:
            return
        try:
            self.db.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            if self.db.in_transaction:
                return  # still open (a lock): the next commit tries again
            self._refused(exc, 0)
            return
        self.db.execute("BEGIN")
        self.uncommitted = 0

    def close(self) -> None:
        self.commit()
        if self.db.in_transaction:
            self.db.execute("ROLLBACK")  # what the disk would not take
        self.db.close()

    # -- reading ---------------------------------------------------------------------

    def plans(self) -> list[Plan]:
        return [
            Plan(seed, due, bytes(request))
            for seed, due, request in self.db.execute("SELECT seed, due, request FROM plans")
        ]

    def fetches(self, since: float = float("-inf")) -> list[tuple[str, float, int]]:
        """``(seed, at, new_links)`` of the fetches at or after ``since``, oldest first."""
        return list(
            self.db.execute(
                "SELECT seed, at, new_links FROM fetches WHERE at >= ? ORDER BY at, rowid",
                (since,),
            )
        )

    def last_fetch(self, seed: str) -> float | None:
        row = self.db.execute("SELECT MAX(at) FROM fetches WHERE seed=?", (seed,)).fetchone()
        at: float | None = row[0]
        return at

    def events(self, max_gap: float = MIDPOINT_MAX_GAP) -> Iterator[tuple[str, float | None]]:
        """``(seed_key, publish time)`` of every article, with the midpoint rule applied
        where the page gave no time; ``None`` where neither is known."""
        rows = self.db.execute(
            "SELECT seed, found_at, previous_fetch, published FROM articles ORDER BY rowid"
        )
        for seed, found_at, previous_fetch, published in rows:
            yield seed, known_or_midpoint(published, previous_fetch, found_at, max_gap)

    def counts(self) -> dict[str, int]:
        """Rows per table, for reports."""
        return {
            table: int(self.db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
            for table in ("fetches", "articles", "plans")
        }
