"""The collector's young generation while a crawl is open (glue/collector.py): set when the
scheduler opens, Python's own put back when the last scheduler of the process closes."""

from __future__ import annotations

import gc

import pytest
from helpers import create_scheduler

from scrapy_twolevel.glue.collector import (
    COLLECTIONS_STAT,
    SECONDS_STAT,
    THRESHOLD_STAT,
    CollectorTuning,
)

pytestmark = pytest.mark.glue


class Stats:
    """What a Reporter offers the collector tuning: ``set`` and ``inc``."""

    def __init__(self) -> None:
        self.values: dict[str, float] = {}

    def set(self, key: str, value: float) -> None:
        self.values[key] = value

    def inc(self, key: str, count: int = 1) -> None:
        self.values[key] = self.values.get(key, 0) + count


@pytest.fixture
def python_threshold():
    """A threshold unlike ours and Python's default, put back after the test."""
    before = gc.get_threshold()
    gc.set_threshold(1234, 11, 12)
    yield (1234, 11, 12)
    gc.set_threshold(*before)


def test_scheduler_sets_the_young_threshold_while_open(python_threshold):
    scheduler, _ = create_scheduler()
    assert gc.get_threshold() == (50_000, 11, 12)  # the older generations are left alone
    assert scheduler.stats.get_value(THRESHOLD_STAT) == 50_000
    assert scheduler.stats.get_value(COLLECTIONS_STAT) == 0  # none since it opened
    scheduler.close("finished")
    assert gc.get_threshold() == python_threshold


def test_zero_leaves_pythons_threshold(python_threshold):
    scheduler, _ = create_scheduler({"TWOLEVEL_GC_THRESHOLD": 0})
    assert gc.get_threshold() == python_threshold
    assert scheduler.stats.get_value(THRESHOLD_STAT) == 1234
    scheduler.close("finished")
    assert gc.get_threshold() == python_threshold


def test_two_crawls_in_one_process_the_last_one_puts_it_back(python_threshold):
    first, second = CollectorTuning(20_000, Stats()), CollectorTuning(30_000, Stats())
    first.start()
    second.start()  # the process's threshold is the first one's
    assert gc.get_threshold() == (20_000, 11, 12)
    first.stop()
    assert gc.get_threshold() == (20_000, 11, 12)  # the second crawl is still open
    second.stop()
    assert gc.get_threshold() == python_threshold


def test_a_threshold_someone_else_set_meanwhile_is_kept(python_threshold):
    tuning = CollectorTuning(20_000, Stats())
    tuning.start()
    gc.set_threshold(999, 9, 9)
    tuning.stop()
    assert gc.get_threshold() == (999, 9, 9)


def test_collections_while_open_are_counted_and_timed(python_threshold):
    stats = Stats()
    tuning = CollectorTuning(20_000, stats)
    tuning.start()
    gc.collect()
    gc.collect(0)
    tuning.stop()
    gc.collect()  # after stop: not counted
    assert stats.values[COLLECTIONS_STAT] == 2
    assert stats.values[SECONDS_STAT] > 0
    assert stats.values[THRESHOLD_STAT] == 20_000


def test_a_crawl_never_closed_is_not_kept_alive_and_its_hold_ends_when_collected(
    python_threshold,
):
    """A scheduler opened and dropped without close (a test, a crash): the collector's
    callbacks do not keep it alive, and Python's threshold comes back when it is collected."""
    callbacks = list(gc.callbacks)
    tuning = CollectorTuning(20_000, Stats())
    tuning.start()
    assert gc.get_threshold() == (20_000, 11, 12)
    del tuning
    gc.collect()
    assert gc.get_threshold() == python_threshold
    gc.collect()  # a collection with no crawl open: the shared callback is idle
    survivor = CollectorTuning(20_000, Stats())
    survivor.start()
    survivor.stop()
    assert gc.callbacks == callbacks  # nothing left behind
