"""One contract for every per-host queue backend: memory and SQLite (closed and reopened)."""

from __future__ import annotations

import sqlite3

import pytest
from helpers import FakeClock

import scrapy_twolevel
from scrapy_twolevel.errors import ShapeMismatch, StateError
from scrapy_twolevel.frontier import (
    CostParams,
    CrawlCapability,
    FifoHostQueue,
    Measurement,
    QualityHostQueue,
    TwoLevelFrontier,
)
from scrapy_twolevel.storage.sqlite import SqliteStore, written_by

PAGE = Measurement(
    latency=0.01, new_connection=False, served_on_connection=2, closed_by_server=False
)

pytestmark = pytest.mark.unit


class MemoryBackend:
    def __init__(self, tmp_path):
        pass

    def queue(self, host, by_quality=True):
        return QualityHostQueue()

    def close(self):
        pass


class SqliteBackend:
    def __init__(self, tmp_path):
        self.path = tmp_path / "f.sqlite3"
        self.store = SqliteStore(self.path, commit_every=3)

    def queue(self, host, by_quality=True):
        return self.store.queue(host, by_quality)

    def reopen(self):
        self.store.close()
        self.store = SqliteStore(self.path)

    def close(self):
        self.store.close()


@pytest.fixture(params=[MemoryBackend, SqliteBackend], ids=["memory", "sqlite"])
def backend(request, tmp_path):
    b = request.param(tmp_path)
    yield b
    b.close()


def items(q):
    return [q.pop() for _ in range(len(q))]


def test_order_best_first_then_fifo(backend):
    q = backend.queue("h")
    for seq, quality in enumerate([1.0, 5.0, 3.0, 5.0]):
        q.push(quality, seq, f"{seq}".encode())
    assert len(q) == 4
    assert q.best_quality() == 5.0
    assert items(q) == [b"1", b"3", b"2", b"0"]
    assert len(q) == 0


@pytest.mark.parametrize("by_quality", [True, False])
def test_peek_shows_what_pop_would_return_and_takes_nothing(backend, by_quality):
    q = backend.queue("h", by_quality) if isinstance(backend, SqliteBackend) else (
        QualityHostQueue(block_size=2) if by_quality else FifoHostQueue()
    )  # fmt: skip
    qualities = [1.0, 5.0, 3.0, 5.0, 0.5, 4.0, 2.0]  # blocks of 2: lower blocks too
    for seq, quality in enumerate(qualities):
        q.push(quality, seq, f"{seq}".encode())
    peeked = q.peek(5)
    assert len(q) == 7 and q.peek(0) == [] and len(q.peek(100)) == 7
    popped = items(q)
    assert [item for _, item in peeked] == popped[:5]
    expected = [qualities[int(item)] if by_quality else None for item in popped[:5]]
    assert [quality for quality, _ in peeked] == expected


def test_head_sum_tracks_pushes_pops_and_head_size(backend):
    q = backend.queue("h")
    q.set_head_size(2)
    q.push(2.0, 1, b"a")
    assert q.head_sum() == 2.0
    q.push(4.0, 2, b"b")
    assert q.head_sum() == 6.0
    q.push(1.0, 3, b"c")  # below the head: sum unchanged
    assert q.head_sum() == 6.0
    q.push(9.0, 4, b"d")  # enters the head, pushes 2.0 out
    assert q.head_sum() == 13.0
    assert q.pop() == b"d"
    assert q.head_sum() == 6.0
    q.set_head_size(3)
    assert q.head_sum() == 7.0


@pytest.mark.parametrize(
    ("head_size", "qualities", "sums"),
    [
        # A head that holds every row: the others stay, nothing enters (-1 counts as 0).
        (8, [3.0, -1.0, 5.0, 2.0], [10.0, 5.0, 2.0, 0.0, 0.0]),
        # A head of one row: the next best row takes its place.
        (1, [2.0, 7.0, -3.0, 4.0], [7.0, 4.0, 2.0, 0.0, 0.0]),
    ],
)
def test_the_head_sum_stays_exact_as_rows_are_popped(backend, head_size, qualities, sums):
    q = backend.queue("h")
    q.set_head_size(head_size)
    for seq, quality in enumerate(qualities):
        q.push(quality, seq, f"{seq}".encode())
    assert q.head_sum() == sums[0]
    for expected in sums[1:]:
        q.pop()
        assert q.head_sum() == expected
    assert len(q) == 0


@pytest.mark.parametrize("head_size", [1, 8])
def test_a_pop_reads_its_row_and_what_the_head_needs_in_one_statement(tmp_path, head_size):
    """The head's sum is known after a pop without reading the head again: for a head
    that holds every row (a host of a few URLs, most of a broad crawl's) it is the popped
    quality off it; a head of one row (crawl-capability's for a host it knows nothing
    about) is followed by the row that takes its place, read with the popped one."""
    store = SqliteStore(tmp_path / "f.sqlite3")
    q = store.queue("h", True)
    q.set_head_size(head_size)
    for seq in range(3):
        q.push(float(seq), seq, f"{seq}".encode())
    assert q.head_sum() == (2.0 if head_size == 1 else 3.0)
    statements: list[str] = []
    store.db.set_trace_callback(statements.append)
    assert q.pop() == b"2" and q.head_sum() == 1.0
    assert q.pop() == b"1" and q.head_sum() == 0.0
    store.db.set_trace_callback(None)
    assert [s.split()[0] for s in statements] == ["SELECT", "UPDATE"] * 2
    store.close()


def test_clear_empties_the_queue_and_returns_what_the_store_must_be_told(backend):
    q = backend.queue("h")
    for seq in range(5):
        q.push(float(seq), seq, f"{seq}".encode())
    kept = object()  # not encodable: kept in memory even on disk
    q.push(9.0, 5, kept)
    cleared = q.clear()
    assert len(q) == 0 and q.pop is not None
    assert q.best_quality() == 0.0 and q.head_sum() == 0.0
    if isinstance(backend, SqliteBackend):
        assert cleared == [kept]  # the rows went in the file
    else:
        assert cleared == [kept, b"4", b"3", b"2", b"1", b"0"]  # best first, as popped
    assert len(backend.queue("other")) == 0


def test_a_host_given_up_on_disk_loses_its_rows_in_one_statement(tmp_path):
    """Row by row (a lease, then a delete, per row) a host with a million queued URLs held
    the reactor for seconds. Here a host with a budget of one page gives it."""
    store = SqliteStore(tmp_path / "f.sqlite3")
    f = TwoLevelFrontier(
        CrawlCapability(), CostParams(), 2, queue_factory=store.queue, budget=lambda host: 1
    )
    for i in range(200):
        f.push("h", float(i), f"{i}".encode())
    f.push("other", 1.0, b"o")
    lane, _ = f.pop()
    assert lane == "h"
    statements = []
    store.db.set_trace_callback(statements.append)
    f.observe("h", PAGE)  # its one page: given up, its 199 queued rows dropped
    store.db.set_trace_callback(None)
    writes = [s for s in statements if s.split()[0] in ("DELETE", "UPDATE", "INSERT")]
    assert len(writes) == 1 and writes[0].startswith("DELETE FROM requests WHERE host=")
    assert len(f) == 1 and f.hosts_at_budget == 1 and f.dropped_budget == 199
    store.commit()
    assert dict(store.stored_hosts()) == {"other": 1}
    store.close()


def test_sqlite_queue_survives_reopen(tmp_path):
    backend = SqliteBackend(tmp_path)
    q = backend.queue("h")
    for seq in range(10):
        q.push(float(seq % 3), seq, str(seq).encode())
    finished = q.pop()
    assert finished == b"2" and finished.seq == 2
    backend.store.release(finished.seq)
    in_flight = q.pop()
    assert in_flight == b"5"
    backend.reopen()
    # The released request is gone; the one still leased is queued again.
    assert backend.store.resumed_leases == 1
    assert dict(backend.store.stored_hosts()) == {"h": 9}
    assert backend.store.max_seq() == 9
    q2 = backend.queue("h")
    assert len(q2) == 9
    assert items(q2) == [b"5", b"8", b"1", b"4", b"7", b"0", b"3", b"6", b"9"]
    backend.close()


def test_frontier_resumes_from_sqlite_with_nothing_lost(tmp_path):
    params = CostParams()
    store = SqliteStore(tmp_path / "f.sqlite3")
    f = TwoLevelFrontier(CrawlCapability(), params, 2, queue_factory=store.queue)
    for i in range(30):
        f.push(f"h{i % 4}", float(i), f"{i}".encode())
    first = [f.pop() for _ in range(2)]
    for host, item in first:
        f.done(host)
        store.release(item.seq)  # finished: not served again
    f.close()
    store.close()

    store = SqliteStore(tmp_path / "f.sqlite3")
    f = TwoLevelFrontier(CrawlCapability(), params, 2, queue_factory=store.queue)
    f.restore((k for k, _ in store.stored_hosts()), store.max_seq())
    assert len(f) == 28
    f.push("h9", 1.0, b"new")
    rest = []
    while len(f):
        popped = f.pop()
        assert popped is not None
        rest.append(popped[1])
        f.done(popped[0])
    store.close()
    got = sorted([item for _, item in first] + rest)
    assert got == sorted([f"{i}".encode() for i in range(30)] + [b"new"])


def test_unencodable_items_stay_in_memory_and_come_first(tmp_path):
    store = SqliteStore(tmp_path / "f.sqlite3")
    q = store.queue("h", True)
    q.push(1.0, 1, b"disk")
    obj = object()
    q.push(0.0, 2, obj)
    assert len(q) == 2
    assert q.pop() is obj
    assert q.pop() == b"disk"
    store.close()


def test_corrupt_file_is_reported_and_left_untouched(tmp_path):
    path = tmp_path / "f.sqlite3"
    path.write_bytes(b"this is not sqlite at all" * 100)
    before = path.read_bytes()
    with pytest.raises(StateError, match=r"f\.sqlite3 is not a scrapy_twolevel state file"):
        SqliteStore(path)
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("marker", "found"), [(None, "no format marker"), ("somebody-else/3", "somebody-else/3")]
)
def test_a_sqlite_file_of_another_tool_is_reported_and_untouched(tmp_path, marker, found):
    path = tmp_path / "f.sqlite3"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    if marker is not None:
        db.execute("INSERT INTO meta VALUES ('format', ?)", (marker,))
    db.commit()
    db.close()
    before = path.read_bytes()
    with pytest.raises(StateError, match=f"{path} holds '{found}'.*another tool"):
        SqliteStore(path)
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("marker", "version", "named"),
    [
        ("scrapy_twolevel.frontier/2", None, "0.1.0"),  # no version row: 0.1.0 wrote it
        ("scrapy_twolevel.frontier/9", "7.1.0", "7.1.0"),
    ],
)
def test_a_file_of_another_format_names_the_release_that_wrote_it_and_this_one(
    tmp_path, marker, version, named
):
    path = tmp_path / "f.sqlite3"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    db.execute("INSERT INTO meta VALUES ('format', ?)", (marker,))
    if version is not None:
        db.execute("INSERT INTO meta VALUES ('written_by', ?)", (version,))
    db.commit()
    db.close()
    before = path.read_bytes()
    expected = (
        f"{path} was written by scrapy-twolevel {named} (format '{marker}'); this is "
        f"scrapy-twolevel {scrapy_twolevel.__version__}, which reads "
        "'scrapy_twolevel.frontier/4'. The file was left untouched"
    )
    with pytest.raises(StateError) as caught:
        SqliteStore(path)
    assert str(caught.value).startswith(expected)
    assert path.read_bytes() == before


def test_the_file_records_the_release_that_last_wrote_it(tmp_path):
    path = tmp_path / "f.sqlite3"
    SqliteStore(path).close()
    db = sqlite3.connect(path)
    assert written_by(db) == scrapy_twolevel.__version__
    # As 0.1.0 left its files: no version row; opening it for writing records this release.
    db.execute("DELETE FROM meta WHERE key = 'written_by'")
    db.commit()
    assert written_by(db) == "0.1.0"
    db.close()
    SqliteStore(path).close()  # opened and closed without a write: left as it was
    db = sqlite3.connect(path)
    assert written_by(db) == "0.1.0"
    db.close()
    store = SqliteStore(path)
    store.queue("h", True).push(1.0, 1, b"r")
    store.close()
    db = sqlite3.connect(path)
    assert written_by(db) == scrapy_twolevel.__version__
    db.close()


def test_sqlite_head_sum_stays_exact_under_random_pushes_and_pops(tmp_path):
    import random

    rng = random.Random(3)
    store = SqliteStore(tmp_path / "f.sqlite3")
    q = store.queue("h", True)
    q.set_head_size(4)
    mirror = []  # (quality, seq)
    for seq in range(600):
        if mirror and rng.random() < 0.3:
            mirror.sort(key=lambda e: (-e[0], e[1]))
            assert q.pop() == str(mirror.pop(0)[1]).encode()
        else:
            quality = rng.choice([rng.uniform(-1, 3), 1.0])
            q.push(quality, seq, str(seq).encode())
            mirror.append((quality, seq))
        if rng.random() < 0.5:  # ask often, so the incremental path is exercised
            best = sorted(mirror, key=lambda e: (-e[0], e[1]))[:4]
            assert q.head_sum() == pytest.approx(sum(max(x, 0) for x, _ in best), abs=1e-9)
    store.close()


def test_disk_frontier_keeps_pending_items_out_of_python_memory(tmp_path):
    """RAM bounded by hosts, not by pending requests: items live in SQLite."""
    import tracemalloc

    store = SqliteStore(tmp_path / "f.sqlite3", cache_mb=1)
    f = TwoLevelFrontier(CrawlCapability(), CostParams(), 16, queue_factory=store.queue)
    payload = b"x" * 200  # about the size of an encoded request
    for i in range(200):  # create the hosts first: their cost is per host, not per item
        f.push(f"h{i}", 0.5, payload)
    tracemalloc.start()
    before, _ = tracemalloc.get_traced_memory()
    for i in range(40_000):
        f.push(f"h{i % 200}", (i % 97) / 97, payload)
    after, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(f) == 40_200
    # 40,000 items of 200 bytes would be > 8 MB in memory; allow 10 bytes per item
    # for allocator slack and the ranking heap.
    assert after - before < 400_000
    store.close()


def _committed_rows(path):
    """What another process (or a resumed crawl after a kill) would read."""
    reader = sqlite3.connect(path)
    try:
        return reader.execute("SELECT COUNT(*) FROM requests").fetchone()[0]
    finally:
        reader.close()


def test_writes_are_committed_within_the_commit_interval(tmp_path):
    clock = FakeClock()
    path = tmp_path / "f.sqlite3"
    store = SqliteStore(path, commit_every=1000, commit_interval=1.0, clock=clock)
    queue = store.queue("h", True)
    queue.push(1.0, 1, b"a")
    queue.push(1.0, 2, b"b")
    assert store.uncommitted == 2 and _committed_rows(path) == 0
    clock.now = 0.4
    assert store.commit_if_due() == pytest.approx(0.6)  # not due yet: wait 0.6 s more
    assert _committed_rows(path) == 0
    clock.now = 1.0
    assert store.commit_if_due() is None and _committed_rows(path) == 2
    assert store.commit_if_due() is None  # nothing left to commit
    clock.now = 2.5
    queue.push(1.0, 3, b"c")  # the first write after an interval commits at once
    assert store.uncommitted == 0 and _committed_rows(path) == 3
    store.close()


def test_resuming_with_another_shape_raises_and_leaves_the_file(tmp_path):
    path = tmp_path / "f.sqlite3"
    store = SqliteStore(path, shape={"mode": "hostname"})
    store.queue("h", True).push(1.0, 1, b"a")
    store.close()
    before = path.read_bytes()
    with pytest.raises(ShapeMismatch, match=r"mode='hostname', but this crawl has mode='ip'"):
        SqliteStore(path, shape={"mode": "ip"})
    assert path.read_bytes() == before
    store = SqliteStore(path, shape={"mode": "hostname"})
    assert len(store.queue("h", True)) == 1
    store.close()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_head_sum_stays_exact_as_the_head_size_changes_after_every_response(tmp_path, kind):
    """The session length follows the host's estimate, so the head size changes after
    responses; each change reads only the entries between the old and the new size (no
    whole-head resum), and the sum must stay exact under pushes, pops and resizes."""
    import random

    rng = random.Random(7)
    store = None
    if kind == "sqlite":
        store = SqliteStore(tmp_path / "f.sqlite3")
        q = store.queue("h", True)
    else:
        q = QualityHostQueue(block_size=4)  # many blocks: ranks cross block boundaries
    size = 1
    mirror = []  # (quality, seq)
    for seq in range(1500):
        roll = rng.random()
        if mirror and roll < 0.25:
            mirror.sort(key=lambda e: (-e[0], e[1]))
            assert q.pop() == str(mirror.pop(0)[1]).encode()
        elif roll < 0.45:
            size = max(1, size + rng.choice([-7, -2, -1, 1, 1, 2, 5, 30]))
            q.set_head_size(size)
        else:
            quality = rng.choice([rng.uniform(-1, 3), 1.0, 2.0])
            q.push(quality, seq, str(seq).encode())
            mirror.append((quality, seq))
        best = sorted(mirror, key=lambda e: (-e[0], e[1]))[:size]
        assert q.head_sum() == pytest.approx(sum(max(x, 0) for x, _ in best), abs=1e-6)
    if store is not None:
        store.close()


def test_pages_given_survive_reopen_and_older_files_gain_the_table(tmp_path):
    path = tmp_path / "f.sqlite3"
    store = SqliteStore(path)
    store.record_pages("a.example", 2)
    store.record_pages("a.example", 3)  # the latest count replaces the last
    store.record_pages("b.example", 1)
    store.commit()
    store.close()
    store = SqliteStore(path)
    assert dict(store.pages()) == {"a.example": 3, "b.example": 1}
    store.db.execute("DROP TABLE pages")  # a format-4 file from before the table
    store.commit()
    store.close()
    store = SqliteStore(path)
    assert dict(store.pages()) == {}
    store.record_pages("c.example", 4)
    store.commit()
    store.close()
    assert dict(SqliteStore(path).pages()) == {"c.example": 4}
