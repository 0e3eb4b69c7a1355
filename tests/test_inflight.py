"""InFlight: a handed-out request's two ends (its outcome; the engine done with it)."""

from __future__ import annotations

import pytest
from scrapy import Request

from scrapy_twolevel.glue.inflight import InFlight

pytestmark = pytest.mark.unit


class Recorder:
    """A lease holder that records what ended."""

    def __init__(self) -> None:
        self.ended: list[tuple[str, object]] = []

    def finished(self, request: Request, token: object) -> None:
        self.ended.append((request.url, token))


def test_outcome_frees_the_lane_once():
    inflight = InFlight(in_progress=lambda: None, in_downloader=lambda: None)
    request = Request("http://a.test/1")
    inflight.handed_out(request, "a.test")
    assert inflight.lane(request) == "a.test" and inflight.lanes_busy == 1
    assert inflight.outcome(request) == "a.test"
    assert inflight.outcome(request) is None  # a second report frees nothing
    assert inflight.lane(request) is None and inflight.lanes_busy == 0


def test_requests_that_left_the_downloader_without_an_outcome_are_released():
    downloader: set[Request] = set()
    inflight = InFlight(in_progress=lambda: None, in_downloader=lambda: downloader)
    kept, dropped = Request("http://a.test/1"), Request("http://b.test/1")
    inflight.handed_out(kept, "a.test")
    inflight.handed_out(dropped, "b.test")
    downloader.add(kept)
    assert inflight.release_dropped() == ["b.test"]
    assert inflight.lane(kept) == "a.test" and inflight.lane(dropped) is None
    blind = InFlight(in_progress=lambda: None, in_downloader=lambda: None)
    blind.handed_out(dropped, "b.test")
    assert blind.release_dropped() == []  # cannot tell: nothing is released


def test_leases_end_once_the_engine_is_done_and_not_before():
    engine: set[Request] = set()
    inflight = InFlight(in_progress=lambda: engine, in_downloader=lambda: None)
    jobdir, seeds = Recorder(), Recorder()
    first, second = Request("http://a.test/1"), Request("http://a.test/2")
    engine.update((first, second))
    inflight.lease(first, jobdir, 11)
    inflight.lease(first, seeds, "fetch-1")
    inflight.lease(second, jobdir, 12)
    inflight.collect()
    assert jobdir.ended == seeds.ended == []  # the engine still holds both
    engine.discard(first)
    inflight.collect()
    assert jobdir.ended == [("http://a.test/1", 11)]
    assert seeds.ended == [("http://a.test/1", "fetch-1")]
    assert list(inflight.held_by(jobdir)) == [(second, 12)]
    inflight.drop(jobdir)  # what it kept is gone: forgotten, not ended
    assert list(inflight.held_by(jobdir)) == []
    engine.clear()
    inflight.collect()
    assert jobdir.ended == [("http://a.test/1", 11)]


def test_without_an_engine_a_request_is_done_once_its_outcome_is_known():
    inflight = InFlight(in_progress=lambda: None, in_downloader=lambda: None)
    holder = Recorder()
    request = Request("http://a.test/1")
    inflight.handed_out(request, "a.test")
    inflight.lease(request, holder, 1)
    inflight.collect()
    assert holder.ended == []  # its outcome is not known yet
    inflight.outcome(request)
    inflight.collect()
    assert holder.ended == [("http://a.test/1", 1)]
