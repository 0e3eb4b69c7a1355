"""The start pacing middleware (start_pacing.py) in real crawls: while a long ``start()`` is
read, responses keep arriving; without it (``TWOLEVEL_START_SHARE = 1``), Scrapy's engine
reads ``start()`` without a reactor turn whenever the downloader is full, and far fewer
arrive."""

from __future__ import annotations

import json

import pytest
from crawl_helpers import crawl_process

from scrapy_twolevel.testweb.web import HostProfile, generate_web

pytestmark = pytest.mark.crawl


def responses_while_start_is_read(tmp_path, share: float) -> tuple[int, int]:
    web = generate_web(
        4, 3, seed=3, host_profiles=[HostProfile(response_delay=0.005) for _ in range(4)]
    )
    log = tmp_path / f"starts-{share}.json"
    proc, _ = crawl_process(
        tmp_path,
        web,
        {
            "ADDONS": {"scrapy_twolevel.Addon": 0},
            "CONCURRENT_REQUESTS": 2,
            "TWOLEVEL_START_SHARE": share,
            "MANY_STARTS": 4000,  # 4 seeds: 16,000 start requests, a second or more to read
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
    unpaced, _ = responses_while_start_is_read(tmp_path, 1.0)
    # Measured: 436 against 106 alone, ~1,100 against ~200 with two more crawls running.
    assert paced >= 2 * unpaced
    assert paced >= 50
