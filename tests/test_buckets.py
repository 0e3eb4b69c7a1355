"""The bucket table: hosts -> buckets -> nodes, and what joins, leaves and rebalances move."""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys

import pytest

from scrapy_twolevel.distributed.buckets import BucketTable, Move, bucket_of

pytestmark = pytest.mark.unit


def test_bucket_of_is_stable_and_spread() -> None:
    # Every node must put a host in the same bucket: no per-process hash seed.
    code = (
        "from scrapy_twolevel.distributed.buckets import bucket_of;"
        "print(bucket_of('example.com', 16384))"
    )
    answers = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2", "random")
    }
    assert answers == {str(bucket_of("example.com", 16384))}
    counts = [0] * 64
    for i in range(64_000):
        counts[bucket_of(f"h{i}.example", 64)] += 1
    assert min(counts) > 800 and max(counts) < 1200  # 1000 expected per bucket


def test_first_node_takes_every_bucket_then_joins_move_exactly_a_share() -> None:
    table = BucketTable(1000)
    moves = table.join("a")
    assert len(moves) == 1000 and {m.source for m in moves} == {None}
    table.check()
    # 1 -> 2: 500 move; 2 -> 3: floor(1000/3) = 333; 3 -> 4: 250. Only to the newcomer.
    for node, expected in (("b", 500), ("c", 333), ("d", 250)):
        before = {b: table.owner(b) for b in range(1000)}
        moves = table.join(node)
        table.check()
        assert len(moves) == expected
        assert {m.target for m in moves} == {node}
        changed = [b for b in range(1000) if table.owner(b) != before[b]]
        assert sorted(changed) == sorted(m.bucket for m in moves)
        counts = table.counts()
        assert max(counts.values()) - min(counts.values()) <= 1, counts
    assert table.counts() == {"a": 250, "b": 250, "c": 250, "d": 250}


def test_a_join_takes_the_fullest_donors_highest_buckets() -> None:
    # By hand: b takes a's top half; c's share is 3, taken one at a time from the
    # fullest donor (ties to the larger name): b's 9, then a's 4, then b's 8.
    table = BucketTable(10)
    table.join("a")
    assert [m.bucket for m in table.join("b")] == [9, 8, 7, 6, 5]
    assert [(m.bucket, m.source) for m in table.join("c")] == [(9, "b"), (4, "a"), (8, "b")]


def test_leave_moves_only_the_leavers_buckets_and_keeps_the_balance() -> None:
    table = BucketTable(1000)
    for node in "abcd":
        table.join(node)
    held = table.buckets_of("c")
    moves = table.leave("c")
    table.check()
    assert sorted(m.bucket for m in moves) == sorted(held)
    assert {m.source for m in moves} == {"c"}
    assert "c" not in table.nodes
    counts = table.counts()
    assert sum(counts.values()) == 1000
    assert max(counts.values()) - min(counts.values()) <= 1, counts
    with pytest.raises(ValueError, match="not in the table"):
        table.leave("c")
    with pytest.raises(ValueError, match="already in the table"):
        table.join("a")


def test_the_last_node_cannot_leave() -> None:
    table = BucketTable(10)
    table.join("a")
    with pytest.raises(ValueError, match="last node"):
        table.leave("a")


def test_random_joins_and_leaves_keep_every_bucket_owned_once() -> None:
    rng = random.Random(7)
    table = BucketTable(997)
    live: list[str] = []
    for step in range(200):
        if len(live) < 2 or (rng.random() < 0.55 and len(live) < 12):
            name = f"n{step}"
            n = len(live)
            moves = table.join(name)
            assert len(moves) == (997 if n == 0 else 997 // (n + 1))
            live.append(name)
        else:
            leaver = rng.choice(live)
            held = len(table.buckets_of(leaver))
            assert len(table.leave(leaver)) == held
            live.remove(leaver)
        table.check()
        counts = table.counts()
        assert max(counts.values()) - min(counts.values()) <= 1


def test_rebalance_by_measured_load_lowers_the_spread() -> None:
    table = BucketTable(400)
    for node in "abc":
        table.join(node)
    rng = random.Random(1)
    # Skewed load: node a's buckets are three times as busy.
    load = {b: (3.0 if table.owner(b) == "a" else 1.0) * rng.uniform(0.5, 1.5) for b in range(400)}

    def spread() -> float:
        per_node = [sum(load[b] for b in table.buckets_of(n)) for n in table.nodes]
        return (max(per_node) - min(per_node)) / statistics.mean(per_node)

    before = spread()
    moves = table.rebalance(load)
    table.check()
    assert moves and all(m.source != m.target for m in moves)
    assert before > 0.8 and spread() < 0.02, (before, spread())
    # A balanced table stays put, and max_moves bounds the work.
    assert table.rebalance(load) == []
    assert BucketTable(10).rebalance({}) == []


def test_rebalance_stops_within_the_tolerance() -> None:
    table = BucketTable(8)
    table.join("a")
    table.join("b")  # b: buckets 4-7 (the donor's highest)
    # a: 10 pending, b: 6; mean 8, gap 4 = half the mean.
    load = {0: 4.0, 1: 3.0, 2: 2.0, 3: 1.0, 4: 6.0}
    assert table.rebalance(load, tolerance=0.5) == []  # within it: nothing moves
    assert table.owner(1) == "a"
    # Below it: the bucket nearest half the gap (2: load 2) moves, leaving 8 and 8.
    moves = table.rebalance(load, tolerance=0.25)
    assert [(m.bucket, m.source, m.target) for m in moves] == [(2, "a", "b")]


def test_rebalance_respects_max_moves() -> None:
    table = BucketTable(100)
    table.join("a")
    table.join("b")
    load = {b: (5.0 if table.owner(b) == "a" else 1.0) for b in range(100)}
    assert len(table.rebalance(load, max_moves=3)) == 3


def test_json_round_trip_and_replayed_moves() -> None:
    table = BucketTable(50)
    table.join("a")
    moves = table.join("b")
    copy = BucketTable.from_json(table.to_json())
    assert [copy.owner(b) for b in range(50)] == [table.owner(b) for b in range(50)]
    # Another node replays the moves it reads instead of recomputing them.
    other = BucketTable(50)
    other.join("a")
    other.apply(moves)
    other.check()
    assert other.counts() == table.counts()
    assert Move(1, None, "a") == Move(1, None, "a")


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        '{"format": "other/1", "size": 1, "owner": [null]}',
        '{"format": "scrapy_twolevel.buckets/1", "size": 2, "owner": ["a"]}',
        '{"format": "scrapy_twolevel.buckets/1", "size": 1, "owner": [3]}',
        "[]",
    ],
)
def test_a_damaged_table_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"not a bucket table|disagree|owners must be"):
        BucketTable.from_json(text)
