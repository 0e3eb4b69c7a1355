"""The crawler's own stalls (``frontier.lag``): a late tick is a stall, and the stalls
within a request's time bound how late its reply was read."""

from __future__ import annotations

import pytest
from helpers import FakeClock

from scrapy_twolevel.frontier.lag import KEEP, TICK, LoopStalls

pytestmark = pytest.mark.unit


def test_late_ticks_are_stalls_and_a_request_sees_its_part_of_them():
    clock = FakeClock()
    stalls = LoopStalls(clock)
    assert stalls.stalled(0.0) == 0.0  # not ticking: nothing known
    assert stalls.start() == TICK  # due at 0.02
    for at in (0.02, 0.045):  # on time, then 5 ms late (a loop at work, no stall)
        clock.now = at
        assert stalls.tick() == TICK
    # Due at 0.065, fired at 0.765: a callback held the loop 0.7 s. Then the ticks due at
    # 0.785 and 0.82 come 15 and 20 ms late: a loop saturated by shorter work.
    for at in (0.765, 0.8, 0.84):
        clock.now = at
        stalls.tick()
    clock.now = 0.85  # the next tick is due at 0.86: none is late now
    assert stalls.stalled(0.0) == pytest.approx(0.7 + 0.015 + 0.02)
    # A request sent at 0.5, mid-stall: only the 0.265 s after it held its reply.
    assert stalls.stalled(0.5) == pytest.approx(0.265 + 0.015 + 0.02)
    # One sent at 0.81 saw the last stall only; one sent after it, none.
    assert stalls.stalled(0.81) == pytest.approx(0.02)
    assert stalls.stalled(0.85) == 0.0
    # The loop is stalled now: the tick due at 0.86 has waited 1.36 - 0.86 = 0.5 s...
    clock.now = 1.36
    assert stalls.stalled(0.85) == pytest.approx(0.5)
    assert stalls.stalled(0.0) == pytest.approx(0.5 + 0.735)
    # ...but no request waited longer than its own time, 1.36 - 1.0.
    assert stalls.stalled(1.0) == pytest.approx(0.36)
    stalls.stop()
    assert stalls.stalled(0.0) == 0.0


def test_stalls_older_than_any_request_are_forgotten():
    clock = FakeClock()
    stalls = LoopStalls(clock)
    stalls.start()
    clock.now = 1.02  # a 1-s stall, ending at 1.02
    stalls.tick()
    clock.now = 1.03
    assert stalls.stalled(0.0) == pytest.approx(1.0)
    stalls.stop()  # the engine stopped; it starts again later
    clock.now = KEEP + 2.0
    stalls.start()
    clock.now += TICK
    stalls.tick()  # on time; the stall ended KEEP + 1 s ago: forgotten
    clock.now += 0.001
    assert stalls.stalled(0.0) == 0.0
