"""The record of requests a distributed node holds without a copy in Redis."""

import pytest

from scrapy_twolevel.distributed.local_only import LocalOnlyRequests

pytestmark = pytest.mark.unit


def test_counts_per_bucket_and_names_what_is_left():
    local = LocalOnlyRequests()
    local.add(3, "http://a/1")
    local.add(3, "http://a/1")  # a dont_filter refetch: two requests, one URL
    local.add(3, "http://a/2")
    local.add(7, "http://b/1")
    assert (local.count(3), local.count(7), local.count(9)) == (3, 1, 0)
    local.remove(3, "http://a/1")
    local.remove(3, "http://a/9")  # not recorded: nothing to take away
    local.remove(9, "http://a/1")
    assert local.count(3) == 2
    local.discard_bucket(7)
    assert local.count(7) == 0
    assert local.take_all() == ["http://a/1", "http://a/2"]
    assert local.take_all() == [] and local.count(3) == 0


def test_a_bucket_whose_requests_all_left_counts_zero():
    local = LocalOnlyRequests()
    local.add(1, "http://a/1")
    local.remove(1, "http://a/1")
    local.remove(1, "http://a/1")  # never below zero
    assert local.count(1) == 0 and local.take_all() == []
