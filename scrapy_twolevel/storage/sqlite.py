"""One SQLite file per JOBDIR crawl: per-host queues, leases, and the seen set.

Pending requests, the requests handed out but not yet finished (leases), and the keys of
every request seen share one file and one transaction stream, so a kill at any moment
leaves a consistent state: a key is durable only together with the queued request it
let through, and a request handed out stays in the file until the engine is done with
its response (and so until the requests it produced are queued).

Pending requests live on disk so a frontier of millions fits in bounded RAM: in memory
each host keeps only its queue length and a cache of its session head (the sum of its
next P qualities, for crawl-capability).

Rows are keyed by ``seq`` (the rowid), which grows with every push, so new rows are
appended to the table instead of landing at random places in a B-tree keyed by host; a
small index on ``(host, -quality)`` (SQLite appends the rowid to every index entry, so it
orders by ``(host, -quality, seq)``) makes "best of this host" one index seek. Once the
frontier outgrows SQLite's page cache, an insert costs about a fifth of what it costs in a
table clustered by ``(host, -quality, seq)``; a pop costs more, as a host's next row sits
on a page of its own, but less than the insert saved (``benchmarks/scheduler_overhead.py``
measures both).

A pop leases the row instead of deleting it: its host id is negated (one in-place update;
"best of this host" never sees it), and :meth:`SqliteStore.release` deletes it once the
request is finished. Reopening the file gives every lease its host back: those requests
were in flight when the crawl stopped and are served again. (Moving the row to a table of
its own would cost an insert and a delete per pop instead of one update.)

Seen keys (:class:`~.sqlite_seen.SqliteSeenStore`) are 16-byte blobs in a ``WITHOUT
ROWID`` table. New keys wait in a set in memory and are written in key order in the same
transaction as the frontier rows, just before each commit.

Durability is Scrapy's: rows reach the OS (``synchronous=OFF``: no fsync, like Scrapy's
own disk queues) at every commit: at most ``commit_every`` writes apart, at the first
write ``commit_interval`` seconds after the last commit, whenever the owner calls
:meth:`SqliteStore.commit_if_due` (the scheduler arms a timer for it), and when the crawl
stops. A killed process loses at most the writes since the last commit.

A full disk or an I/O error loses nothing and stalls nothing: every write since the last
commit is also kept in a redo list in memory. When a write or a commit fails, SQLite may
have rolled the whole transaction back; the store then opens a new one with
``cache_spill`` off (its pages stay in memory, so writes no longer touch the disk) and
replays the list, so reads see every write again. Commits are retried at each commit
time and the list is cleared by the first that succeeds. Until then a kill loses the
writes since the last commit, as always, and the list grows with the crawl's writes.
``on_error`` and ``on_recover`` tell the owner when writes start and stop failing. Only
when even the replay fails (a file that refuses every write) do reads raise
:class:`~scrapy_twolevel.errors.StoreUnavailable`, until a replay succeeds.

The file records what shaped it (``shape``: the host-key mode, whether rows are ordered by
quality), because rows queued under one host-key mode or order mean something else under
another. Reopening with a different shape raises :class:`ShapeMismatch` and changes
nothing.

Items pushed as ``bytes`` go to disk. Anything else (a request that could not be
encoded) stays in a small per-host memory queue, served before the disk rows and lost
on restart, as Scrapy's own scheduler does with unserializable requests.

Pure module: no Scrapy. Raises :class:`StateError` for a file that is not ours.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from .._version import __version__
from ..errors import ShapeMismatch, StateError, StoreUnavailable
from ..frontier.queues import FifoHostQueue, HostQueue, QualityHostQueue, pop_all
from .sqlite_seen import SqliteSeenStore

#: Format marker stored in the file; bump when the schema changes.
FORMAT = "scrapy_twolevel.frontier/4"
#: The meta row naming the release that last wrote the file (since 0.2.0), so that a
#: file this release cannot read names the release that can (docs/compat.rst).
VERSION_KEY = "written_by"
#: What a file without that row was written by: the only release that kept none.
UNRECORDED_VERSION = "0.1.0"
#: Prefix of the meta rows that hold the file's shape.
_SHAPE_PREFIX = "shape:"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS hosts (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS requests (
    seq INTEGER PRIMARY KEY, host INTEGER NOT NULL, negq REAL NOT NULL, data BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS requests_order ON requests (host, negq);
CREATE TABLE IF NOT EXISTS seen (key BLOB PRIMARY KEY) WITHOUT ROWID;
"""
#: Added to format 4 in place (a file without it gains it on open): the pages each host
#: with a budget has given, so a resumed crawl does not give it its whole budget again.
_PAGES = "CREATE TABLE IF NOT EXISTS pages (host INTEGER PRIMARY KEY, fetched INTEGER NOT NULL)"
#: Prefix of the meta rows that say how the seen keys were made.
_SEEN_PREFIX = "seen:"


def written_by(db: sqlite3.Connection) -> str:
    """The release that last wrote the file open as ``db``."""
    row = db.execute("SELECT value FROM meta WHERE key=?", (VERSION_KEY,)).fetchone()
    return str(row[0]) if row else UNRECORDED_VERSION


def _not_ours(path: Path, exc: Exception) -> StateError:
    return StateError(
        f"{path} is not a scrapy_twolevel state file ({exc}); it was left "
        "untouched. Use a fresh JOBDIR, or delete the file to start over."
    )


def check_format_marker(db: sqlite3.Connection, path: Path, expected: str, advice: str) -> None:
    """Raise :class:`StateError` unless ``db``'s ``meta`` table holds ``format = expected``.

    Run it before any PRAGMA: switching a foreign file to WAL would rewrite its header. A
    file that is not SQLite at all raises ``sqlite3.DatabaseError`` here instead.
    """
    row = db.execute("SELECT value FROM meta WHERE key='format'").fetchone()
    if row is None or row[0] != expected:
        found = row[0] if row else "no format marker"
        raise StateError(f"{path} holds {found!r}, expected {expected!r}: {advice}")


class SqliteStore:
    """The SQLite file behind every :class:`SqliteHostQueue` of one crawl."""

    def __init__(
        self,
        path: str | Path,
        *,
        cache_mb: int = 4,
        commit_every: int = 2000,
        commit_interval: float = 1.0,
        shape: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_error: Callable[[Exception], None] | None = None,
        on_recover: Callable[[int], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.on_error = on_error
        self.on_recover = on_recover
        # Writes since the last commit, replayed if a failure rolls the transaction back.
        self._redo: list[tuple[str, Any, bool]] = []
        self.failing = False  # a write or commit failed and no commit has succeeded since
        self.stale = False  # the replay failed too: reads would miss writes
        self.commits = 0
        existed = self.path.exists() and self.path.stat().st_size > 0
        self.db = sqlite3.connect(self.path, isolation_level=None)
        shape = dict(shape or {})
        try:
            if existed:
                # Before any PRAGMA: switching a foreign file to WAL would rewrite its header.
                self._check_format()
                self._check_shape(shape)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=OFF")
            self.db.execute(f"PRAGMA cache_size=-{int(cache_mb) * 1024}")
            if not existed:
                self.db.executescript(_SCHEMA)
                self.db.execute("INSERT INTO meta VALUES ('format', ?)", (FORMAT,))
                self.db.execute("INSERT INTO meta VALUES (?, ?)", (VERSION_KEY, __version__))
                self.db.executemany(
                    "INSERT INTO meta VALUES (?, ?)",
                    [(_SHAPE_PREFIX + key, value) for key, value in shape.items()],
                )
            self.db.execute(_PAGES)
        except sqlite3.DatabaseError as exc:
            self.db.close()
            raise _not_ours(self.path, exc) from exc
        except StateError:
            self.db.close()
            raise
        self._commit_every = commit_every
        self._commit_interval = commit_interval
        self._clock = clock
        self._last_commit = clock()
        self._uncommitted = 0
        self._before_commit: list[Callable[[], None]] = []
        self._version_recorded = not existed  # the written_by row (see commit())
        self._host_ids: dict[str, int] = dict(
            (key, hid) for hid, key in self.db.execute("SELECT id, key FROM hosts")
        )
        self._next_host_id = self._first_new_host_id = max(self._host_ids.values(), default=0) + 1
        self.db.execute("BEGIN")
        #: Requests that were leased when the file was last closed or killed.
        self.resumed_leases = self.leased
        if self.resumed_leases:
            self.write("UPDATE requests SET host = -host WHERE host < 0")
            self.commit()

    @classmethod
    def inspect(cls, path: str | Path, shape: Mapping[str, str] | None = None) -> None:
        """Check an existing file's format and shape without writing to it.

        Raises :class:`StateError` (or :class:`ShapeMismatch`) as opening it would; says
        nothing when the file is absent or cannot be opened read-only (opening it for real
        will then decide).
        """
        path = Path(path)
        if not path.exists() or path.stat().st_size == 0:
            return
        probe = cls.__new__(cls)
        probe.path = path
        try:
            probe.db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        except sqlite3.OperationalError:
            return
        try:
            probe._check_format()
            probe._check_shape(dict(shape or {}))
        except sqlite3.DatabaseError as exc:
            if isinstance(exc, sqlite3.OperationalError) and "no such table" not in str(exc):
                return  # locked, or a WAL file it may not read: inconclusive
            raise _not_ours(path, exc) from exc
        finally:
            probe.db.close()

    def _check_format(self) -> None:
        """Raise :class:`StateError` unless the file carries our format marker, naming the
        release that wrote it and this one.

        A file that is not SQLite at all raises ``sqlite3.DatabaseError`` here, which
        ``__init__`` reports.
        """
        row = self.db.execute("SELECT value FROM meta WHERE key='format'").fetchone()
        if row is not None and row[0] == FORMAT:
            return
        if row is None or not str(row[0]).startswith(FORMAT.rpartition("/")[0] + "/"):
            # no marker, or another kind's: not a frontier file of any release
            check_format_marker(
                self.db,
                self.path,
                FORMAT,
                "probably a file of another tool. It was left untouched; use a fresh JOBDIR.",
            )
        raise StateError(
            f"{self.path} was written by scrapy-twolevel {written_by(self.db)} (format "
            f"{row[0]!r}); this is scrapy-twolevel {__version__}, which reads {FORMAT!r}. "
            "The file was left untouched: finish that crawl with the release that started "
            "it, or use a fresh JOBDIR (docs/compat.rst)."
        )

    def _check_shape(self, shape: Mapping[str, str]) -> None:
        stored = dict(
            self.db.execute(
                "SELECT substr(key, ?), value FROM meta WHERE key LIKE ?",
                (len(_SHAPE_PREFIX) + 1, _SHAPE_PREFIX + "%"),
            )
        )
        for key, wanted in shape.items():
            # A key a file does not have holds "" (files written before the key existed).
            if stored.get(key, "") != wanted:
                raise ShapeMismatch(self.path, key, stored.get(key), wanted)

    def host_id(self, key: str) -> int:
        hid = self._host_ids.get(key)
        if hid is None:
            hid = self._next_host_id
            self._next_host_id += 1
            self.write("INSERT INTO hosts (id, key) VALUES (?, ?)", (hid, key))
            self._host_ids[key] = hid
        return hid

    # -- writes that survive a failing disk ------------------------------------

    def write(self, sql: str, params: Any = (), *, many: bool = False) -> None:
        """Run one write, kept for replay until the next commit; never raises for a
        failing disk (see the module docstring)."""
        self._redo.append((sql, params, many))
        if self.stale:
            return  # replayed with the rest by the next commit or read
        try:
            self._run(sql, params, many)
        except sqlite3.OperationalError as exc:
            self._failed(exc)

    def _run(self, sql: str, params: Any, many: bool) -> None:
        (self.db.executemany if many else self.db.execute)(sql, params)

    def _failed(self, exc: Exception) -> None:
        if not self.failing and self.on_error is not None:
            self.on_error(exc)
        self.failing = True
        self._replay()

    def _replay(self) -> bool:
        """Start a transaction over again with every write since the last commit."""
        try:
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            self.db.execute("PRAGMA cache_spill=OFF")
            self.db.execute("BEGIN")
            for sql, params, many in self._redo:
                self._run(sql, params, many)
        except sqlite3.OperationalError:
            self.stale = True
            return False
        self.stale = False
        return True

    def current(self) -> None:
        """Before a read: make sure it sees every write, or raise StoreUnavailable."""
        if self.stale and not self._replay():
            raise StoreUnavailable(
                f"{self.path} refuses writes and cannot show the {len(self._redo)} kept in "
                "memory; they are kept until it takes them."
            )

    def rows_of(self, host_id: int) -> int:
        """Pending rows of a host (none for one new in this run: no read needed)."""
        if host_id >= self._first_new_host_id:
            return 0
        self.current()
        row = self.db.execute("SELECT COUNT(*) FROM requests WHERE host=?", (host_id,))
        return int(row.fetchone()[0])

    def stored_hosts(self) -> Iterator[tuple[str, int]]:
        """``(host key, pending rows)`` for every host with rows on disk."""
        keys = {hid: key for key, hid in self._host_ids.items()}
        rows = self.db.execute("SELECT host, COUNT(*) FROM requests WHERE host > 0 GROUP BY host")
        for hid, count in rows:
            yield keys[hid], count

    def record_pages(self, host_key: str, fetched: int) -> None:
        """``host_key`` has given ``fetched`` pages (kept for hosts with a budget)."""
        self.write(
            "INSERT OR REPLACE INTO pages (host, fetched) VALUES (?, ?)",
            (self.host_id(host_key), fetched),
        )

    def pages(self) -> Iterator[tuple[str, int]]:
        """``(host key, pages given)`` as :meth:`record_pages` last recorded them."""
        keys = {hid: key for key, hid in self._host_ids.items()}
        for hid, fetched in self.db.execute("SELECT host, fetched FROM pages"):
            yield keys[hid], int(fetched)

    def max_seq(self) -> int:
        row = self.db.execute("SELECT MAX(seq) FROM requests").fetchone()
        return int(row[0] or 0)

    def counted(self) -> None:
        """One more write to commit, without committing now."""
        self._uncommitted += 1

    def wrote(self) -> None:
        """One more write; commit if enough writes or time have passed."""
        self._uncommitted += 1
        if (
            # While commits fail, retry by time only: each try replays every kept write.
            (self._uncommitted >= self._commit_every and not self.failing)
            or self._clock() - self._last_commit >= self._commit_interval
        ):
            self.commit()

    @property
    def uncommitted(self) -> int:
        """Writes since the last commit (what a kill would lose)."""
        return self._uncommitted

    def commit_if_due(self) -> float | None:
        """Commit if the interval has passed; return seconds until the next is due, or None.

        ``None`` means there is nothing left to commit.
        """
        if not self._uncommitted:
            return None
        wait = self._last_commit + self._commit_interval - self._clock()
        if wait <= 0:
            self.commit()
            return None
        return wait

    def before_commit(self, flush: Callable[[], None]) -> None:
        """Run ``flush`` inside every transaction, just before it commits."""
        self._before_commit.append(flush)

    def release(self, seq: int) -> None:
        """The leased request ``seq`` is finished: forget it."""
        self.write("DELETE FROM requests WHERE seq=?", (seq,))
        # Not committed here: releases run inside the pre-commit flush too.
        self.counted()

    @property
    def leased(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM requests WHERE host < 0").fetchone()[0])

    def seen_store(
        self, identity: Mapping[str, str], *, with_queue: bool = True
    ) -> SqliteSeenStore:
        """The seen set in this file; ``identity`` says how its keys are made.

        ``with_queue``: the file's queue is in use, and its pushes commit the keys (a key
        must not be committed before the request it let through). Otherwise adding keys
        commits by count and time like queue writes do.

        A file whose seen keys were made another way (another fingerprinter) raises
        :class:`ShapeMismatch`; a file without seen keys yet records ``identity``.
        """
        stored = dict(
            self.db.execute(
                "SELECT substr(key, ?), value FROM meta WHERE key LIKE ?",
                (len(_SEEN_PREFIX) + 1, _SEEN_PREFIX + "%"),
            )
        )
        if stored:
            for key, wanted in identity.items():
                if stored.get(key) != wanted:
                    raise ShapeMismatch(self.path, key, stored.get(key), wanted)
        else:
            self.write(
                "INSERT INTO meta VALUES (?, ?)",
                [(_SEEN_PREFIX + key, value) for key, value in identity.items()],
                many=True,
            )
            self.commit()
        return SqliteSeenStore(self, with_queue=with_queue)

    def commit(self) -> bool:
        """Write everything since the last commit; ``False`` if the disk refused it (the
        writes are kept, and the next commit tries again)."""
        for flush in self._before_commit:
            flush()
        if self._redo and not self._version_recorded:
            # With the first commit that writes, not at open: a check after the open (the
            # seen keys' recipe) may refuse the file, which must then be left unchanged.
            self.write("INSERT OR REPLACE INTO meta VALUES (?, ?)", (VERSION_KEY, __version__))
            self._version_recorded = True
        self._last_commit = self._clock()
        try:
            self.current()
            self.db.execute("COMMIT")
        except (sqlite3.OperationalError, StoreUnavailable) as exc:
            if not self.stale:
                self._failed(exc)
            return False
        saved = len(self._redo)
        self._redo.clear()
        self.commits += 1
        self.db.execute("BEGIN")
        self._uncommitted = 0
        if self.failing:
            self.failing = False
            self.db.execute("PRAGMA cache_spill=ON")
            if self.on_recover is not None:
                self.on_recover(saved)
        return True

    def queue(self, host_key: str, by_quality: bool) -> SqliteHostQueue:
        """:data:`~scrapy_twolevel.frontier.frontier.QueueFactory` for disk queues."""
        return SqliteHostQueue(self, host_key, by_quality)

    def close(self) -> None:
        """Commit and close; if the disk still refuses, the writes since the last commit
        are lost, as in a kill (a resumed crawl fetches their leases again)."""
        committed = self.commit()
        if not committed and self.on_error is not None:
            self.on_error(
                StoreUnavailable(f"{self.path}: {len(self._redo)} writes could not be saved")
            )
        if self.db.in_transaction:
            self.db.execute("ROLLBACK")
        self.db.close()


class Leased(bytes):
    """A popped disk row's data, knowing its ``seq`` (to :meth:`SqliteStore.release` it).

    A ``bytes``, so code that only wants the data need not know about leases.
    """

    seq: int

    def __new__(cls, seq: int, data: bytes) -> Leased:
        self = super().__new__(cls, data)
        self.seq = seq
        return self

    @property
    def data(self) -> bytes:
        return bytes(self)


class SqliteHostQueue:
    """One host's queue: rows in :class:`SqliteStore`, a head cache in memory."""

    __slots__ = (
        "_by_quality",
        "_head_last",
        "_head_size",
        "_head_sum",
        "_id",
        "_len",
        "_mem",
        "_store",
    )

    def __init__(self, store: SqliteStore, host_key: str, by_quality: bool) -> None:
        self._store = store
        self._id = store.host_id(host_key)
        self._by_quality = by_quality
        self._len = store.rows_of(self._id)
        self._mem: HostQueue | None = None
        self._head_size = 1
        # Sum of the head's qualities (None: recompute when asked) and the key of the head's
        # last row (None: the head is not full).
        self._head_sum: float | None = None
        self._head_last: tuple[float, int] | None = None

    def push(self, quality: float, seq: int, item: Any) -> bool:
        if not isinstance(item, bytes):
            if self._mem is None:
                self._mem = QualityHostQueue() if self._by_quality else FifoHostQueue()
                self._mem.set_head_size(self._head_size)
            self._mem.push(quality, seq, item)
            self._head_sum = None
            return True
        negq = -quality
        store = self._store
        store.write(
            "INSERT INTO requests (seq, host, negq, data) VALUES (?, ?, ?, ?)",
            (seq, self._id, negq, item),
        )
        store.wrote()
        self._len += 1
        if self._head_sum is None or (self._mem is not None and len(self._mem)) or store.failing:
            self._head_sum = None
            return True  # recomputed when next asked for
        # Keep the head sum up to date with at most a one-row lookup, instead of
        # re-reading the whole head: most pushes of a big crawl land behind it.
        last = self._head_last
        if last is None:  # head not full yet: this row joins it
            self._head_sum += max(quality, 0.0)
            if self._len >= self._head_size:
                self._head_last = self._nth_key(self._head_size - 1)
            return True
        if (negq, seq) < last:
            self._head_sum += max(quality, 0.0) - max(-last[0], 0.0)
            self._head_last = self._nth_key(self._head_size - 1)
            return True
        return False

    def _nth_key(self, offset: int) -> tuple[float, int]:
        self._store.current()
        row = self._store.db.execute(
            "SELECT negq, seq FROM requests WHERE host=? ORDER BY negq, seq LIMIT 1 OFFSET ?",
            (self._id, offset),
        ).fetchone()
        return (row[0], row[1])

    def pop(self) -> Any:
        if self._mem is not None and len(self._mem):
            self._head_sum = None
            return self._mem.pop()
        store = self._store
        store.current()
        exact = self._head_sum is not None and not self._mem and not store.failing
        # A head of one row (crawl-capability's for a host it knows nothing about: most
        # hosts of a broad crawl) is followed by the row that replaces it: read both.
        pair = exact and self._head_size == 1
        rows = store.db.execute(
            "SELECT negq, seq, data FROM requests WHERE host=? ORDER BY negq, seq LIMIT ?",
            (self._id, 2 if pair else 1),
        ).fetchall()
        negq, seq, data = rows[0]
        store.write("UPDATE requests SET host = -host WHERE seq=?", (seq,))
        store.wrote()
        self._len -= 1
        last = self._head_last
        if not exact:
            self._head_sum = None  # recomputed when next asked for
            self._head_last = None
        elif pair:
            following = rows[1] if len(rows) > 1 else None
            self._head_sum = max(-following[0], 0.0) if following else 0.0
            self._head_last = (following[0], following[1]) if following else None
        else:
            # The best row leaves the head and the first row behind it enters: one seek,
            # not a resum of the head (a session pops after every response). A head that
            # is not full holds every row: the others stay, nothing enters.
            assert self._head_sum is not None
            self._head_sum -= max(-negq, 0.0)
            if last is not None:
                self._extend_head(last, 1)
        return Leased(seq, bytes(data))

    def _extend_head(self, last: tuple[float, int], count: int) -> None:
        """Add the ``count`` rows behind the head's last row ``last`` to the head sum; the
        head is no longer full if fewer are left."""
        assert self._head_sum is not None
        rows = self._store.db.execute(
            "SELECT negq, seq FROM requests WHERE host=? AND (negq, seq) > (?, ?) "
            "ORDER BY negq, seq LIMIT ?",
            (self._id, last[0], last[1], count),
        ).fetchall()
        self._head_sum -= sum(negq for negq, _ in rows if negq < 0)
        self._head_last = (rows[-1][0], rows[-1][1]) if len(rows) == count else None

    def __len__(self) -> int:
        return self._len + (len(self._mem) if self._mem is not None else 0)

    def clear(self) -> list[Any]:
        """Its host was given up: every row goes in one statement (one by one, a host of a
        million rows held the reactor for seconds); those kept in memory are returned."""
        kept = [] if self._mem is None else pop_all(self._mem)
        if self._len:
            self._store.write("DELETE FROM requests WHERE host=?", (self._id,))
            self._store.wrote()
        self._len = 0
        self._head_sum = None
        self._head_last = None
        return kept

    def peek(self, n: int) -> list[tuple[float | None, Any]]:
        # Those kept in memory are popped first (see pop), then the rows, best first.
        found = self._mem.peek(n) if self._mem is not None else []
        if len(found) < n and self._len:
            self._store.current()
            rows = self._store.db.execute(
                "SELECT negq, data FROM requests WHERE host=? ORDER BY negq, seq LIMIT ?",
                (self._id, n - len(found)),
            ).fetchall()
            found += [(-negq if self._by_quality else None, bytes(data)) for negq, data in rows]
        return found

    def best_quality(self) -> float:
        if self._mem is not None and len(self._mem):
            return self._mem.best_quality()
        self._store.current()
        row = self._store.db.execute(
            "SELECT negq FROM requests WHERE host=? ORDER BY negq, seq LIMIT 1", (self._id,)
        ).fetchone()
        return -row[0] if row else 0.0

    def head_sum(self) -> float:
        if self._head_sum is None:
            self._store.current()
            rows = self._store.db.execute(
                "SELECT negq, seq FROM requests WHERE host=? ORDER BY negq, seq LIMIT ?",
                (self._id, self._head_size),
            ).fetchall()
            total = -sum(negq for negq, _ in rows if negq < 0)
            if self._mem is not None:
                total += self._mem.head_sum()
            self._head_sum = total
            self._head_last = (rows[-1][0], rows[-1][1]) if len(rows) == self._head_size else None
        return self._head_sum

    def set_head_size(self, size: int) -> None:
        """Called after every response: with a full head, only the rows between the old
        and the new size are read (one index seek from the head's last row)."""
        size = max(1, size)
        if size == self._head_size:
            return
        old, self._head_size = self._head_size, size
        if self._mem is not None:
            self._mem.set_head_size(size)
        last = self._head_last
        if last is None and size > old and self._head_sum is not None and not self._mem:
            return  # the head was not full: every row is in it already
        if self._head_sum is None or last is None or self._mem or self._store.failing:
            self._head_sum = None  # recomputed when next asked for
            self._head_last = None
            return
        self._store.current()
        if size > old:
            self._extend_head(last, size - old)
        else:
            rows = self._store.db.execute(
                "SELECT negq, seq FROM requests WHERE host=? AND (negq, seq) <= (?, ?) "
                "ORDER BY negq DESC, seq DESC LIMIT ?",
                (self._id, last[0], last[1], old - size + 1),
            ).fetchall()
            self._head_sum += sum(negq for negq, _ in rows[:-1] if negq < 0)
            self._head_last = (rows[-1][0], rows[-1][1])

    def close(self) -> None:
        """Rows stay on disk; only the memory part is dropped."""
        if self._mem is not None:
            self._mem.close()
