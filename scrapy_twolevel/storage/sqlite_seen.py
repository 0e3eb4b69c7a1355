"""The exact seen set in a crawl's SQLite file: 16-byte keys in a ``WITHOUT ROWID`` table.

New keys wait in a set in memory and are written in key order in the same transaction as
the frontier's rows, just before each commit (:class:`~.sqlite.SqliteStore`), so a key is
never durable before the request it let through. Pure module: no Scrapy.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .sqlite import SqliteStore


class SqliteSeenStore:
    """The exact seen set (:class:`~scrapy_twolevel.seen.seen_set.SeenStore`) in a store's file."""

    def __init__(self, store: SqliteStore, *, with_queue: bool = True) -> None:
        self._store = store
        self._db = store.db
        self._note_write = store.counted if with_queue else store.wrote
        self._pending: set[bytes] = set()
        # Keys written since the last commit, which a failing disk may have rolled back.
        self._unsaved: set[bytes] = set()
        self._unsaved_since = store.commits
        self._len = int(self._db.execute("SELECT COUNT(*) FROM seen").fetchone()[0])
        store.before_commit(self.flush)

    def __contains__(self, key: bytes) -> bool:
        # Never raises: the file's view is the last commit or more, and the keys written
        # since then are in _unsaved; together they are every key added.
        if key in self._pending or key in self._unsaved:
            return True
        return self._db.execute("SELECT 1 FROM seen WHERE key=?", (key,)).fetchone() is not None

    def add(self, key: bytes) -> None:
        # Beside a queue, counted and never committed here: the key must not become
        # durable before the request it lets through is queued; the push commits both.
        self._pending.add(key)
        self._len += 1
        self._note_write()

    def flush(self) -> None:
        """Write the pending keys (in key order: fewer B-tree pages touched per batch)."""
        if self._store.commits != self._unsaved_since:
            self._unsaved.clear()  # committed since they were written
            self._unsaved_since = self._store.commits
        if self._pending:
            self._store.write(
                "INSERT OR IGNORE INTO seen (key) VALUES (?)",
                [(k,) for k in sorted(self._pending)],
                many=True,
            )
            self._unsaved |= self._pending
            self._pending.clear()

    def keys(self) -> Iterator[bytes]:
        self.flush()
        self._store.current()
        # fetchall-free: a cursor of its own, read while the caller adds nothing.
        for (key,) in self._db.execute("SELECT key FROM seen"):
            yield bytes(key)

    def keys_after(self, after: bytes | None, limit: int) -> list[bytes]:
        """Up to ``limit`` keys above ``after``, in key order: one seek in the table's
        key order, so the seen filter grows a chunk at a time (``SeenSet._grow``)."""
        self.flush()
        self._store.current()
        rows = self._db.execute(
            "SELECT key FROM seen WHERE key > ? ORDER BY key LIMIT ?", (after or b"", limit)
        )
        return [bytes(key) for (key,) in rows]

    def __len__(self) -> int:
        return self._len
