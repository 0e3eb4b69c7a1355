"""The start pacing middleware (start_pacing.py) in real crawls: while a long ``start()`` is
read, responses keep arriving; without it (``TWOLEVEL_START_SHARE = 1``), Scrapy's engine
reads ``start()`` without a reactor turn once the downloader is full, and on most machines
none arrive."""

from __future__ import annotations

import json

import pytest
from crawl_helpers import crawl_process

from scrapy_twolevel.testweb.web import HostProfile, generate_web

pytestmark = pytest.mark.crawl


def responses_while_start_is_read(tmp_path, share: float) -> tuple[int, int]:
    # More hosts with start requests than connections: the downloader fills up, and
    # Scrapy's engine then reads start() without a reactor turn.
    web = generate_web(
        40,
        3,
        seed=3,
        n_seeds=40,
        host_profiles=[HostProfile(response_delay=0.02) for _ in range(40)],
    )
    log = tmp_path / f"starts-{share}.json"
    proc, _ = crawl_process(
        tmp_path,
        web,
        {
            "ADDONS": {"scrapy_twolevel.Addon": 0},
            "CONCURRENT_REQUESTS": 8,
            "JOBDIR": str(tmp_path / f"job-{share}"),
            "TWOLEVEL_START_SHARE": share,
            "MANY_STARTS": 250,  # 40 seeds: 10,000 start requests, about a second to read
            "MANY_STARTS_LOG": str(log),
        },
        spider="crawl_helpers.ManyStartsSpider",
    )
    assert log.exists(), proc.stderr[-3000:]
    seen = json.loads(log.read_text())
    assert seen["start_ended"] is not None, "start() was read to its end"
    before = sum(t < seen["start_ended"] for t in seen["responses"])
    return before, len(seen["responses"])


def test_responses_keep_arriving_while_a_long_start_is_read(tmp_path):
    paced, _ = responses_while_start_is_read(tmp_path, 0.33)
    # Measured (16,000 start requests): 776 responses while start() was read paced, none
    # unpaced (TWOLEVEL_START_SHARE = 1, in 1.6 s); on a loaded CI machine, 11 unpaced.
    # The unpaced crawl is not asserted on: how many answers Scrapy's engine alone lets in
    # depends on the machine (on a slow one, in a fully loaded test run: 1,544 against
    # 1,878 paced), and it is Scrapy's behaviour, not this package's.
    assert paced >= 100
