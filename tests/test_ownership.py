"""The distributed mode's bucket ownership on its own (distributed/ownership.py): no Redis,
no Scrapy. What a node holds, which queued copies are stale, when a bucket moving away
may be released, and what a reaped node forgets."""

from __future__ import annotations

import pytest

from scrapy_twolevel.distributed.inbox import Entry
from scrapy_twolevel.distributed.ownership import Ownership

pytestmark = pytest.mark.unit


def test_a_bucket_held_again_gets_a_new_generation_and_old_copies_go_stale():
    own = Ownership()
    first = own.take(3)
    assert own.holds(3) and own.admits(3) and own.generation(3) == first
    assert own.is_current(3, first, stored=True)
    assert own.give_away(frozenset()) == [3]  # the table gives it elsewhere: it drains
    assert not own.holds(3) and own.still_ours(3) and own.draining == 1
    # A copy in Redis is the next holder's now; one kept here only is still ours to fetch.
    assert not own.is_current(3, first, stored=True)
    assert own.is_current(3, first, stored=False)
    assert own.release_drained() == [3] and own.draining == 0
    second = own.take(3)
    assert second == first + 1
    assert not own.is_current(3, first, stored=False)  # from the earlier holding
    assert own.is_current(3, second, stored=True)


def test_a_loading_bucket_is_held_but_admits_nothing_yet():
    own = Ownership()
    own.take(1)
    own.loading.add(1)  # the loader adds its seen keys and requests in slices
    assert own.holds(1) and not own.admits(1) and own.still_ours(1)
    own.loading.discard(1)
    assert own.admits(1)


def test_a_draining_bucket_is_released_once_its_leases_and_local_requests_are_done():
    own = Ownership()
    own.take(0)
    own.take(1)
    own.lease(0)
    own.local_only.add(1, "http://h/unencodable")
    assert own.give_away(frozenset()) == [0, 1]
    assert own.release_drained() == []  # a request in flight on 0, one kept here on 1
    own.lease_ended(0)
    assert own.release_drained() == [0]
    assert own.leased == 0
    own.local_only.remove(1, "http://h/unencodable")
    assert own.release_drained() == [1]


def test_a_final_release_lets_every_draining_bucket_go():
    own = Ownership()
    own.take(0)
    own.lease(0)
    own.give_away(frozenset())
    assert own.release_drained(final=True) == [0]
    assert not own.still_ours(0)


def test_entries_wait_for_their_bucket_once_and_move_on_with_it():
    own = Ownership()
    entry = Entry(b"1-0", "h.example", b"{}")
    own.give_away(frozenset({2}))  # the table gives 2 here; not held yet
    own.park(2, entry)
    own.park(2, entry)  # read again after a failed tick: kept once
    assert own.parked == {2: [entry]}
    assert own.parked_elsewhere() == []  # 2 is still owned here
    own.give_away(frozenset())  # 2 went to another node before it arrived
    assert own.parked_elsewhere() == [entry] and own.parked == {}


def test_a_reaped_node_forgets_everything_it_held():
    own = Ownership()
    own.take(0)
    own.take(1)
    own.lease(0)
    own.local_only.add(1, "http://h/a")
    own.loading.add(1)
    own.park(3, Entry(b"1-0", "h", b""))
    held, leases, lost = own.forget()
    assert (sorted(held), leases, lost) == ([0, 1], 1, 1)
    assert not own.holds(0) and not own.still_ours(1)
    assert (own.held, own.draining, own.leased, own.loading, own.parked) == (0, 0, 0, set(), {})
