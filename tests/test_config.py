"""Settings are validated once, at start-up, with messages naming setting and valid values."""

from __future__ import annotations

import pytest
from scrapy import Spider
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from scrapy_twolevel import Addon
from scrapy_twolevel.config import DEFAULTS, TwoLevelConfig
from scrapy_twolevel.frontier import Policy
from scrapy_twolevel.scheduler import TwoLevelScheduler

MIDDLEWARE = {"scrapy_twolevel.middleware.HostMetricsMiddleware": 950}


def config(**settings):
    return TwoLevelConfig.from_settings(Settings(settings))


def test_defaults_match_the_documented_table():
    cfg = config()
    assert cfg.policy == DEFAULTS["TWOLEVEL_POLICY"] == "crawl-capability"
    assert cfg.max_open_hosts == 16  # CONCURRENT_REQUESTS
    assert cfg.cost.default_requests_per_connection == 50
    assert cfg.cost.keepalive_speedup == 1.2
    assert cfg.cost.alpha == 0.8
    assert cfg.cost.default_connection_time == 0.01
    assert cfg.cost.default_response_time == 0.01
    assert cfg.quality == "priority"
    assert cfg.host_key == "hostname"


def test_max_open_hosts_follows_concurrent_requests():
    assert config(CONCURRENT_REQUESTS=64).max_open_hosts == 64
    assert config(CONCURRENT_REQUESTS=64, TWOLEVEL_MAX_OPEN_HOSTS=8).max_open_hosts == 8


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("TWOLEVEL_POLICY", "fastest", "use one of: breadth-first, performance-first"),
        ("TWOLEVEL_MAX_OPEN_HOSTS", 0, "an integer >= 1"),
        ("TWOLEVEL_DEFAULT_REQUESTS_PER_CONNECTION", -5, "a number >= 1"),
        ("TWOLEVEL_KEEPALIVE_SPEEDUP", 0, r"a number > 0 \(p\)"),
        ("TWOLEVEL_KEEPALIVE_SPEEDUP", -1.2, r"a number > 0 \(p\)"),
        ("TWOLEVEL_EWMA_ALPHA", 1.0, r"in \[0, 1\)"),
        ("TWOLEVEL_EWMA_ALPHA", -0.1, r"in \[0, 1\)"),
        ("TWOLEVEL_EWMA_ALPHA", "abc", "is not a number"),
        ("TWOLEVEL_DEFAULT_CONNECTION_TIME", -1, "seconds >= 0"),
        ("TWOLEVEL_DEFAULT_RESPONSE_TIME", 0, "seconds > 0"),
        ("TWOLEVEL_DEFAULT_RESPONSE_TIME", float("nan"), "seconds > 0"),
        ("TWOLEVEL_HOST_KEY", "port", "use one of: hostname, domain, ip"),
        ("TWOLEVEL_QUALITY", "meta:", "'priority', 'meta:<key>'"),
        ("TWOLEVEL_STATS_TOP_HOSTS", -1, "an integer >= 0"),
    ],
)
def test_invalid_settings_name_the_setting_and_the_rule(name, value, message):
    with pytest.raises(ValueError, match=rf"{name}=.*{message}"):
        config(**{name: value})


def test_scheduler_refuses_to_start_on_invalid_settings():
    crawler = get_crawler(Spider, {"TWOLEVEL_POLICY": "nope", "DOWNLOADER_MIDDLEWARES": MIDDLEWARE})
    with pytest.raises(ValueError, match="TWOLEVEL_POLICY='nope'"):
        TwoLevelScheduler.from_crawler(crawler)


@pytest.mark.parametrize("policy", ["performance-first", "crawl-capability"])
def test_policy_needing_metrics_without_middleware_shows_the_line_to_add(policy):
    crawler = get_crawler(Spider, {"TWOLEVEL_POLICY": policy})
    with pytest.raises(
        ValueError, match=r'"scrapy_twolevel.middleware.HostMetricsMiddleware": 950'
    ):
        TwoLevelScheduler.from_crawler(crawler)


@pytest.mark.parametrize("policy", ["breadth-first", "quality-first"])
def test_policies_without_metrics_start_without_middleware(policy):
    crawler = get_crawler(Spider, {"TWOLEVEL_POLICY": policy})
    assert TwoLevelScheduler.from_crawler(crawler).policy.name == policy


class HalfQuality(Policy):
    name = "half"

    def score(self, queue, estimate, params):
        return queue.best_quality() / 2


def test_custom_policy_by_import_path():
    crawler = get_crawler(Spider, {"TWOLEVEL_POLICY": f"{__name__}.HalfQuality"})
    assert isinstance(TwoLevelScheduler.from_crawler(crawler).policy, HalfQuality)


def test_custom_policy_that_is_not_a_policy_is_refused():
    crawler = get_crawler(Spider, {"TWOLEVEL_POLICY": "collections.OrderedDict"})
    with pytest.raises(ValueError, match=r"not a subclass of scrapy_twolevel\.frontier\.Policy"):
        TwoLevelScheduler.from_crawler(crawler)
    crawler = get_crawler(Spider, {"TWOLEVEL_POLICY": "no.such.Module"})
    with pytest.raises(ImportError, match=r"TWOLEVEL_POLICY='no\.such\.Module' cannot be imported"):
        TwoLevelScheduler.from_crawler(crawler)


def test_quality_import_path_errors_at_start_up():
    crawler = get_crawler(
        Spider, {"TWOLEVEL_QUALITY": "no.such.func", "DOWNLOADER_MIDDLEWARES": MIDDLEWARE}
    )
    with pytest.raises(ImportError, match=r"TWOLEVEL_QUALITY='no\.such\.func'"):
        TwoLevelScheduler.from_crawler(crawler)


def test_addon_sets_scheduler_and_middleware():
    crawler = get_crawler(Spider, {"ADDONS": {Addon: 0}})
    assert crawler.settings["SCHEDULER"] == "scrapy_twolevel.scheduler.TwoLevelScheduler"
    mws = crawler.settings.getwithbase("DOWNLOADER_MIDDLEWARES")
    assert mws["scrapy_twolevel.middleware.HostMetricsMiddleware"] == 950
    # And the default policy (crawl-capability) is satisfied.
    assert TwoLevelScheduler.from_crawler(crawler).policy.name == "crawl-capability"


def test_project_setting_beats_addon():
    crawler = get_crawler(Spider, {"ADDONS": {Addon: 0}, "SCHEDULER": "my.Scheduler"})
    assert crawler.settings["SCHEDULER"] == "my.Scheduler"
