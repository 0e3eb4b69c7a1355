"""Topic selection on a virtual clock: round robin, slices, preemption, quotas, persistence,
and the shared host lock of :class:`TopicFrontier` (pure data structures, no Scrapy)."""

from __future__ import annotations

import re

import pytest
from helpers import FakeClock

from scrapy_twolevel.frontier import BreadthFirst, CostParams, Measurement, TwoLevelFrontier
from scrapy_twolevel.frontier.topic_frontier import (
    DEFAULT_TOPIC,
    TopicFrontier,
    TopicSelector,
    TopicSpec,
    parse_topics,
    split_lane,
    topic_lane,
)

pytestmark = pytest.mark.unit


def serve(selector: TopicSelector, ready: set[str], n: int) -> list[str]:
    """Serve ``n`` requests; each goes to the first topic in order that is ``ready``."""
    out = []
    for _ in range(n):
        topic = next(t for t in selector.order() if t in ready)
        selector.served(topic)
        out.append(topic)
    return out


def test_round_robin_slices_within_a_class():
    selector = TopicSelector([TopicSpec("a", slice=3), TopicSpec("b", slice=2)], FakeClock())
    assert serve(selector, {"a", "b"}, 10) == list("aaabbaaabb")
    assert selector.state["a"].turns == 2 and selector.state["b"].turns == 2
    assert selector.state["a"].pages == 6


def test_a_topic_that_cannot_serve_is_skipped_and_the_next_is_charged():
    selector = TopicSelector([TopicSpec("a", slice=3), TopicSpec("b", slice=2)], FakeClock())
    assert serve(selector, {"b"}, 3) == list("bbb")  # a has nothing ready
    assert selector.state["b"].turns == 1 and selector.state["b"].remaining == 1
    assert selector.state["a"].remaining == 3  # not charged


def test_higher_class_preempts_and_the_preempted_topic_resumes_its_slice():
    selector = TopicSelector(
        [TopicSpec("low", priority=2, slice=4), TopicSpec("high", priority=1, slice=2)], FakeClock()
    )
    assert serve(selector, {"low"}, 2) == ["low", "low"]
    # High gets work: it is served first, at once, and the running low topic is preempted.
    assert serve(selector, {"low", "high"}, 3) == ["high", "high", "high"]
    assert selector.state["low"].preemptions == 1
    # High has nothing left: low finishes the 2 requests left of its slice, then a new turn.
    assert serve(selector, {"low"}, 3) == ["low"] * 3
    assert selector.state["low"].turns == 1
    assert selector.state["low"].remaining == 3


def test_quota_met_shrinks_the_slice_until_the_period_ends():
    clock = FakeClock()
    selector = TopicSelector(
        [TopicSpec("busy", slice=8, quota=2, period=10.0), TopicSpec("other", slice=8)], clock
    )
    selector.relevant("busy")
    assert selector.state["busy"].slice_len == 8
    selector.relevant("busy")  # quota met: a quarter of the slice
    assert selector.state["busy"].slice_len == 2
    assert serve(selector, {"busy", "other"}, 4) == ["busy", "busy", "other", "other"]
    clock.now = 10.5  # a new period: the full slice again, and the count restarts
    selector.served("busy")
    assert selector.state["busy"].slice_len == 8
    assert selector.state["busy"].relevant_in_period == 0
    assert selector.state["busy"].quota_met == 1


def test_state_round_trips_through_its_dict():
    clock = FakeClock()
    specs = [TopicSpec("a", slice=3, quota=1, period=100), TopicSpec("b", slice=5)]
    selector = TopicSelector(specs, clock)
    serve(selector, {"a", "b"}, 4)
    selector.relevant("a")
    clock.now = 30.0
    saved = selector.to_dict()
    restored = TopicSelector(specs, FakeClock())
    restored.restore(saved)
    assert list(restored.order()) == list(selector.order())
    for name in ("a", "b"):
        before, after = selector.state[name], restored.state[name]
        assert (after.remaining, after.slice_len, after.pages, after.turns) == (
            before.remaining,
            before.slice_len,
            before.pages,
            before.turns,
        )
    assert restored.state["a"].period_start == -30.0  # 30 s into its period, on the new clock
    with pytest.raises(ValueError, match="not a saved topic state"):
        restored.restore({"topics": {"a": {}}})


def test_parse_topics_defaults_and_errors():
    specs = {s.name: s for s in parse_topics({"news": {"priority": 0, "slice": 4}, "ref": None})}
    assert specs["news"] == TopicSpec("news", priority=0, slice=4)
    assert specs["ref"] == TopicSpec("ref")
    assert DEFAULT_TOPIC in specs  # requests without a topic go there
    for raw, message in (
        ({"x": {"slice": 0}}, "slice=0 is not valid"),
        ({"x": {"prio": 1}}, "unknown field"),
        ({"x": {"period": -1}}, "period=-1 is not valid"),
        ({"x": {"quota": True}}, "quota=True is not valid"),
        ([1], "must be a dict"),
    ):
        with pytest.raises(ValueError, match=message):
            parse_topics(raw)


def frontier_for(specs):
    selector = TopicSelector(specs, FakeClock())
    return TopicFrontier.build(
        selector,
        lambda name, lock, sequence: TwoLevelFrontier(
            BreadthFirst(), CostParams(), None, host_lock=lock, lock_owner=name, sequence=sequence
        ),
    )


def test_a_host_is_open_in_one_topic_at_a_time():
    frontier = frontier_for([TopicSpec("a", slice=10), TopicSpec("b", slice=10)])
    for topic in ("a", "b"):
        for i in range(2):
            assert frontier.push(topic_lane(topic, "shared.example"), 0.0, f"{topic}{i}")
    lane, item = frontier.pop()
    assert split_lane(lane) == ("a", "shared.example") and item == "a0"
    # b's only host is open (busy) in a: b cannot serve, a's host is busy too.
    assert frontier.pop() is None
    frontier.done(lane)
    assert frontier.pop()[1] == "a1"  # a's session goes on
    frontier.done(lane)  # a's queue is empty: its session ends, the host is free
    lane, item = frontier.pop()
    assert split_lane(lane) == ("b", "shared.example") and item == "b0"
    assert len(frontier) == 1


def urgent_and_bulk(clock, max_open_hosts=None):
    """Topics ``urgent`` (class 0) and ``bulk`` (class 1) on ``clock``, waits unjittered."""
    selector = TopicSelector([TopicSpec("urgent", priority=0), TopicSpec("bulk", priority=1)])
    return TopicFrontier.build(
        selector,
        lambda name, lock, sequence: TwoLevelFrontier(
            BreadthFirst(),
            CostParams(),
            max_open_hosts,
            host_lock=lock,
            lock_owner=name,
            sequence=sequence,
            clock=clock,
            jitter=lambda: 0.0,
        ),
    )


def test_a_hosts_gap_holds_in_every_topic():
    """A host's Crawl-delay (2 s) after a response in one topic: another topic's request
    for the same host used to go at once, as soon as the first topic's session ended."""
    clock = FakeClock()
    frontier = urgent_and_bulk(clock)
    frontier.set_min_gap("h.example", 2.0)
    for i in range(2):
        frontier.push(topic_lane("bulk", "h.example"), 0.0, f"b{i}")
    lane, _ = frontier.pop()  # sent at 0
    frontier.push(topic_lane("urgent", "h.example"), 0.0, "u0")
    clock.now = 0.5
    frontier.observe(
        lane,
        Measurement(
            latency=0.5,
            elapsed=0.5,
            new_connection=True,
            served_on_connection=1,
            closed_by_server=False,
        ),
    )
    frontier.done(lane)
    clock.now = 0.6
    assert frontier.pop() is None  # the urgent topic too waits for the gap
    assert frontier.frontiers["urgent"].host("h.example").wait_reason == "delay"
    clock.now = 2.0
    lane, item = frontier.pop()
    assert (split_lane(lane), item) == (("urgent", "h.example"), "u0")


def test_an_urgent_host_out_of_its_gap_is_served_before_any_lower_topic():
    """What the urgent topic waits for is its own hosts' gaps, never the lower topics:
    the moment its host's Crawl-delay has passed, the next place is the urgent topic's,
    whatever the lower topics have queued (issue 32's urgent-topic check)."""
    clock = FakeClock()
    frontier = urgent_and_bulk(clock, max_open_hosts=2)
    frontier.set_min_gap("u.example", 1.0)
    for i in range(2):
        frontier.push(topic_lane("urgent", "u.example"), 0.0, f"u{i}")
    for i in range(20):
        frontier.push(topic_lane("bulk", f"b{i % 4}.example"), 0.0, f"b{i}")
    lane, item = frontier.pop()
    assert item == "u0"
    frontier.observe(
        lane,
        Measurement(
            latency=0.1,
            elapsed=0.1,
            new_connection=True,
            served_on_connection=1,
            closed_by_server=False,
        ),
    )
    frontier.done(lane)  # u.example waits out its gap until 1.0
    served = []
    while clock.now < 1.0:
        popped = frontier.pop()
        if popped is not None:
            served.append(popped[1])
            frontier.done(popped[0])
        clock.now = round(clock.now + 0.1, 6)
    assert served and all(item.startswith("b") for item in served)
    lane, item = frontier.pop()  # 1.0: the gap has passed
    assert item == "u1"


def test_topic_frontier_serves_the_urgent_topic_first():
    frontier = frontier_for([TopicSpec("bulk", priority=2), TopicSpec("urgent", priority=1)])
    for i in range(3):
        frontier.push(topic_lane("bulk", f"h{i}.example"), 0.0, f"bulk{i}")
    assert frontier.pop()[1] == "bulk0"
    frontier.push(topic_lane("urgent", "u.example"), 0.0, "urgent")
    assert frontier.pop()[1] == "urgent"
    assert frontier.selector.state["bulk"].preemptions == 1


def test_topics_come_from_the_setting_or_the_spider_attribute():
    from scrapy.settings import Settings

    from scrapy_twolevel.config import SettingsError, topic_specs

    class Spider:
        twolevel_topics = {"a": {"priority": 0}}

    assert topic_specs(Settings(), None) is None
    from_spider = topic_specs(Settings(), Spider)
    assert [s.name for s in from_spider] == ["a", DEFAULT_TOPIC]
    # The setting wins; on the command line it is JSON.
    from_json = topic_specs(Settings({"TWOLEVEL_TOPICS": '{"b": {"slice": 2}}'}), Spider)
    assert from_json[0] == TopicSpec("b", slice=2)
    with pytest.raises(SettingsError, match=re.escape("TWOLEVEL_TOPICS='{b' is not valid JSON")):
        topic_specs(Settings({"TWOLEVEL_TOPICS": "{b"}))
    with pytest.raises(SettingsError, match=r"Bad\.twolevel_topics is not valid: topic 'x'"):

        class Bad:
            twolevel_topics = {"x": {"slice": -1}}

        topic_specs(Settings(), Bad)
