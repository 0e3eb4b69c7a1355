"""A full disk under the JOBDIR stores, the recrawl history and the scheduler: nothing
lost, nothing stalled, back to normal after (the crawls: test_disk_faults_crawl.py).

The disk is made full for real, without root: ``RLIMIT_FSIZE`` set to the size of the
store's write-ahead log makes every write that would grow a file fail with ``EFBIG``
(``SIGXFSZ`` ignored), which SQLite reports as it reports a full disk. These tests do it
in this process for the few lines that need it.
"""

from __future__ import annotations

import resource
import signal
import sqlite3
from contextlib import contextmanager
from pathlib import Path

import pytest

from scrapy_twolevel.errors import StoreUnavailable
from scrapy_twolevel.frontier import CostParams, CrawlCapability, TwoLevelFrontier
from scrapy_twolevel.storage.recrawl_history import HistoryStore
from scrapy_twolevel.storage.sqlite import SqliteStore

pytestmark = pytest.mark.glue


@contextmanager
def full_disk_at(wal):
    """No file of this process may grow past ``wal``'s size while inside."""
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (wal.stat().st_size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def full_disk(store):
    """No file of this process may grow past the store's write-ahead log while inside."""
    return full_disk_at(store.path.with_name(store.path.name + "-wal"))


def key(i):
    return i.to_bytes(16, "big")


def filled_store(path, errors, recovered):
    """A store with 1,000 committed rows (a write-ahead log of about 1.2 MB) and their keys."""
    store = SqliteStore(
        path,
        commit_every=10**9,
        commit_interval=10**9,
        on_error=errors.append,
        on_recover=recovered.append,
    )
    seen = store.seen_store({"fingerprinter": "test"})
    queue = store.queue("a", by_quality=True)
    for i in range(1000):
        queue.push(float(i % 7), i, b"x" * 1000)
        seen.add(key(i))
    assert store.commit()
    return store, seen, queue


def test_a_full_disk_keeps_every_write_and_saves_them_when_it_frees(tmp_path):
    errors, recovered = [], []
    store, seen, a = filled_store(tmp_path / "f.sqlite3", errors, recovered)
    with full_disk(store):
        for i in range(1000, 1300):
            a.push(9.0, i, b"y" * 1000)  # better than every earlier row
            seen.add(key(i))
        b = store.queue("b", by_quality=True)
        b.push(1.0, 1300, b"b")
        popped = [a.pop() for _ in range(5)]
        store.release(popped[0].seq)
        store.release(popped[1].seq)
        assert store.commit() is False
        assert store.commit() is False  # still full: no raise, no second warning
        assert len(errors) == 1 and store.failing
        # Reads see every write, though none reached the disk.
        assert [p.seq for p in popped] == [1000, 1001, 1002, 1003, 1004]
        assert a.pop().seq == 1005
        assert len(a) == 1000 + 300 - 6 and len(b) == 1
        assert key(1299) in seen and key(999) in seen and key(5000) not in seen
    assert store.commit() is True
    assert not store.failing and len(recovered) == 1 and recovered[0] > 300
    store.close()
    reopened = SqliteStore(tmp_path / "f.sqlite3")
    # 4 leases (6 popped, 2 released) come back as pending rows.
    assert reopened.resumed_leases == 4
    assert dict(reopened.stored_hosts()) == {"a": 1000 + 300 - 2, "b": 1}
    assert len(reopened.seen_store({"fingerprinter": "test"})) == 1300
    reopened.close()


def test_stopping_while_the_disk_is_full_keeps_the_last_commit(tmp_path):
    """A crawl that stops (or is killed) before the disk frees loses the writes since the
    last commit, as any kill does, and nothing of the file before it."""
    errors, recovered = [], []
    store, seen, a = filled_store(tmp_path / "f.sqlite3", errors, recovered)
    with full_disk(store):
        for i in range(1000, 1100):
            a.push(9.0, i, b"y" * 1000)
            seen.add(key(i))
        a.pop()
        store.close()
    assert isinstance(errors[-1], StoreUnavailable) and not recovered
    reopened = SqliteStore(tmp_path / "f.sqlite3")
    assert reopened.resumed_leases == 0
    assert dict(reopened.stored_hosts()) == {"a": 1000}
    assert len(reopened.seen_store({"fingerprinter": "test"})) == 1000
    reopened.close()


def test_a_file_refusing_every_write_raises_on_reads_until_it_takes_them(tmp_path):
    """query_only stands for a file system gone read-only: even the replay fails, so reads
    of queued rows raise StoreUnavailable (the scheduler then hands out nothing), while
    the seen set still answers exactly; once writes work, everything is there."""
    errors, recovered = [], []
    store, seen, a = filled_store(tmp_path / "f.sqlite3", errors, recovered)
    store.db.execute("PRAGMA query_only=ON")
    a.push(9.0, 2000, b"new")
    seen.add(key(2000))
    assert store.commit() is False
    assert store.stale and len(errors) == 1
    with pytest.raises(StoreUnavailable):
        a.pop()
    assert key(2000) in seen and key(1) in seen and key(3000) not in seen
    store.db.execute("PRAGMA query_only=OFF")
    assert a.pop() == b"new"
    assert store.commit() is True and not store.stale
    store.close()


class FailingQueue:
    """A queue whose disk is gone: push and pop raise (unit test of the frontier's
    bookkeeping only)."""

    def __init__(self):
        self.items = []
        self.broken = False

    def push(self, quality, seq, item):
        if self.broken:
            raise sqlite3.OperationalError("disk I/O error")
        self.items.append(item)
        return True

    def pop(self):
        if self.broken:
            raise sqlite3.OperationalError("disk I/O error")
        return self.items.pop(0)

    def __len__(self):
        return len(self.items)

    def best_quality(self):
        return 1.0

    def head_sum(self):
        return float(len(self.items))

    def set_head_size(self, size):
        pass

    def close(self):
        pass


def test_a_queue_that_raises_leaves_its_host_ready_and_the_count_true():
    queues = {}

    def factory(host, by_quality):
        return queues.setdefault(host, FailingQueue())

    frontier = TwoLevelFrontier(CrawlCapability(), CostParams(), 2, queue_factory=factory)
    assert frontier.push("a", 1.0, "a1")
    queues["a"].broken = True
    with pytest.raises(sqlite3.OperationalError):
        frontier.push("a", 1.0, "a2")
    assert len(frontier) == 1  # the failed push is not counted
    with pytest.raises(sqlite3.OperationalError):
        frontier.pop()
    assert len(frontier) == 1  # nor is the failed pop
    queues["a"].broken = False
    assert frontier.pop() == ("a", "a1")  # the host was not left busy


def test_a_recrawl_history_the_disk_refuses_loses_observations_not_the_crawl(tmp_path):
    """The history file fills: its writes and commits raise nothing, what it could not
    take is counted once told, and it takes writes again once the disk frees."""
    errors = []
    history = HistoryStore(tmp_path / "h.sqlite3", on_error=errors.append)
    for i in range(2000):
        history.record_article(f"http://n.example/{i}", "s", float(i), None)
    history.commit()
    history.record_fetch("s", 1.0, 3)  # before the disk fills: lost with the rolled-back commit
    wal = Path(str(history.path) + "-wal")
    with full_disk_at(wal):
        for i in range(2000, 2400):
            assert history.record_article(f"http://n.example/{i}", "s", float(i), None) in (
                True,
                False,
            )
        history.commit()
        history.commit()
    assert len(errors) == 1 and history.lost >= 401
    history.record_fetch("s", 2.0, 1)
    history.commit()
    history.close()
    reopened = HistoryStore(tmp_path / "h.sqlite3")
    assert reopened.counts()["articles"] == 2000
    assert [at for _, at, _ in reopened.fetches(since=0)] == [2.0]
    reopened.close()


def test_a_link_found_on_a_seed_is_queued_though_the_history_refuses_it(tmp_path):
    """Recording the new link runs after the dupefilter marked it seen: if that write
    raised, the URL was lost for good (seen, never queued)."""
    from helpers import create_scheduler, dequeue_all
    from scrapy import Request

    from scrapy_twolevel import meta

    scheduler, crawler = create_scheduler(
        {
            "TWOLEVEL_RECRAWL": True,
            "TWOLEVEL_RECRAWL_HISTORY": str(tmp_path / "h.sqlite3"),
            "SPIDER_MIDDLEWARES": {"scrapy_twolevel.seeds.SeedMiddleware": 950},
        },
        tmp_path / "job",
    )
    history = scheduler.seeds.history
    history.db.execute("PRAGMA query_only=ON")  # every write now fails, for real
    found = Request("http://news.example/a/1", meta={meta.FOUND_ON_SEED: ["s", "run-1"]})
    assert scheduler.enqueue_request(found)
    assert [r.url for r in dequeue_all(scheduler, crawler)] == [found.url]
    history.db.execute("PRAGMA query_only=OFF")
    scheduler.close("finished")
    assert crawler.stats.get_value("twolevel/recrawl/history_lost") >= 1
