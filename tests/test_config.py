"""Settings are validated once, at start-up, with messages naming setting and valid values."""

from __future__ import annotations

import pytest
from scrapy import Spider
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler

from scrapy_twolevel import Addon
from scrapy_twolevel.config import DEFAULTS, SettingsError, TwoLevelConfig
from scrapy_twolevel.frontier import Policy
from scrapy_twolevel.glue.preflight import unknown_settings
from scrapy_twolevel.middleware import HostMetricsMiddleware
from scrapy_twolevel.scheduler import TwoLevelScheduler

pytestmark = pytest.mark.glue

MIDDLEWARE = {"scrapy_twolevel.middleware.HostMetricsMiddleware": 950}


def config(**settings):
    return TwoLevelConfig.from_settings(Settings(settings))


def start(crawler):
    """Build and open the scheduler as the engine does; settings errors come from open()."""
    scheduler = TwoLevelScheduler.from_crawler(crawler)
    spider = Spider.from_crawler(crawler, name="s")
    scheduler.open(spider)
    return scheduler


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
    assert cfg.commit_interval == 1.0
    assert cfg.failures.session_failures == 2
    assert cfg.failures.backoff == 30.0
    assert cfg.failures.backoff_max == 600.0
    assert cfg.failures.failed_sessions == 3


def test_max_open_hosts_follows_concurrent_requests():
    assert config(CONCURRENT_REQUESTS=64).max_open_hosts == 64
    assert config(CONCURRENT_REQUESTS="64").max_open_hosts == 64  # -s passes strings
    assert config(CONCURRENT_REQUESTS=64, TWOLEVEL_MAX_OPEN_HOSTS=8).max_open_hosts == 8


def test_concurrent_requests_zero_means_no_limit_as_in_scrapy():
    assert config(CONCURRENT_REQUESTS=0).max_open_hosts is None
    assert config(CONCURRENT_REQUESTS=0, TWOLEVEL_MAX_OPEN_HOSTS=4).max_open_hosts == 4


@pytest.mark.parametrize("value", [2.7, True, "2.5", "eight"])
def test_concurrent_requests_must_be_an_integer(value):
    with pytest.raises(SettingsError, match=rf"CONCURRENT_REQUESTS={value!r} is not an integer"):
        config(CONCURRENT_REQUESTS=value)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("TWOLEVEL_POLICY", "fastest", "use one of: breadth-first, performance-first"),
        ("TWOLEVEL_MAX_OPEN_HOSTS", 0, "out of range; it must be an integer >= 1"),
        ("TWOLEVEL_MAX_OPEN_HOSTS", "2.5", "is not an integer"),
        ("TWOLEVEL_MAX_OPEN_HOSTS", True, "is not an integer"),
        ("TWOLEVEL_MAX_OPEN_HOSTS", 2.7, "is not an integer"),
        ("TWOLEVEL_DEFAULT_REQUESTS_PER_CONNECTION", -5, "a number >= 1"),
        ("TWOLEVEL_KEEPALIVE_SPEEDUP", 0, r"a number > 0 \(p\)"),
        ("TWOLEVEL_KEEPALIVE_SPEEDUP", -1.2, r"a number > 0 \(p\)"),
        ("TWOLEVEL_EWMA_ALPHA", 1.0, r"in \[0, 1\)"),
        ("TWOLEVEL_EWMA_ALPHA", -0.1, r"in \[0, 1\)"),
        ("TWOLEVEL_EWMA_ALPHA", "abc", "is not a number"),
        ("TWOLEVEL_DEFAULT_CONNECTION_TIME", -1, "seconds >= 0"),
        ("TWOLEVEL_DEFAULT_RESPONSE_TIME", 0, "seconds > 0"),
        ("TWOLEVEL_DEFAULT_RESPONSE_TIME", float("nan"), "is not finite; it must be seconds > 0"),
        ("TWOLEVEL_IDLE_TIMEOUT", float("inf"), "is not finite"),
        ("TWOLEVEL_IDLE_TIMEOUT", "inf", "is not finite"),
        ("TWOLEVEL_IDLE_TIMEOUT", True, "is not a number"),
        ("TWOLEVEL_COMMIT_INTERVAL", 0, "seconds > 0"),
        ("TWOLEVEL_SESSION_FAILURES", 0, "an integer >= 1"),
        ("TWOLEVEL_BACKOFF", -1, "seconds >= 0"),
        ("TWOLEVEL_FAILED_SESSIONS", 1.5, "is not an integer"),
        ("TWOLEVEL_HOST_KEY", "port", "use one of: hostname, domain"),
        ("TWOLEVEL_HOST_KEY", "ip", "'ip' was removed: .* Use 'hostname' .* or 'domain'"),
        ("TWOLEVEL_QUALITY", "meta:", "'priority', 'meta:<key>'"),
        ("TWOLEVEL_STATS_TOP_HOSTS", -1, "an integer >= 0"),
        ("TWOLEVEL_GC_THRESHOLD", -1, r"an integer >= 0 \(0: Python's own\)"),
        ("TWOLEVEL_GC_THRESHOLD", 2.5, "is not an integer"),
        ("TWOLEVEL_GIVE_UP_AFTER", -1, "seconds >= 0"),
        ("TWOLEVEL_HOST_DELAY", "soon", "is not a number"),
        ("TWOLEVEL_CRAWL_DELAY", "maybe", "use True or False"),
        ("TWOLEVEL_REFUSAL_CODES", [200], "HTTP status codes from 400 to 599"),
        ("TWOLEVEL_REFUSAL_CODES", "429,abc", "HTTP status codes from 400 to 599"),
        ("TWOLEVEL_REFUSAL_RETRIES", -1, "an integer >= 0"),
        ("TWOLEVEL_RETRY_AFTER_MAX", 0, "seconds > 0"),
        ("TWOLEVEL_HOST_BUDGET", -5, r"pages >= 0 \(0: no budget\)"),
        ("TWOLEVEL_HOST_BUDGETS", {"*.x": -1}, "a dict of host patterns to page budgets"),
        ("TWOLEVEL_HOST_BUDGETS", "{not json", "a dict of host patterns to page budgets"),
    ],
)
def test_invalid_settings_name_the_setting_and_the_rule(name, value, message):
    with pytest.raises(SettingsError, match=rf"{name}=.*{message}"):
        config(**{name: value})


def test_politeness_settings_read_from_the_command_line():
    """``-s NAME=...`` passes strings; each reads as the documented value."""
    got = config(
        TWOLEVEL_REFUSAL_CODES="503, 429",
        TWOLEVEL_HOST_BUDGETS='{"*.example.com": 5}',
        TWOLEVEL_HOST_BUDGET="100",
        TWOLEVEL_CRAWL_DELAY="false",
    )
    assert got.refusal_codes == (429, 503) and not got.crawl_delay
    budget = got.budget()
    assert budget is not None and (budget("a.example.com"), budget("b.org")) == (5, 100)
    assert config().budget() is None  # no budget: the frontier counts nothing


def test_backoff_max_below_backoff_is_refused():
    with pytest.raises(SettingsError, match=r"TWOLEVEL_BACKOFF_MAX=5 .* >= TWOLEVEL_BACKOFF"):
        config(TWOLEVEL_BACKOFF=10, TWOLEVEL_BACKOFF_MAX=5)


def test_unknown_settings_are_found_with_the_closest_valid_name():
    names = ["TWOLEVEL_POLCY", "TWOLEVEL_POLICY", "TWOLEVEL_TESTWEB_HOSTS", "TWOLEVEL_XYZZY", "X"]
    assert unknown_settings(names) == [
        ("TWOLEVEL_POLCY", "TWOLEVEL_POLICY"),
        ("TWOLEVEL_XYZZY", None),
    ]


def test_scheduler_warns_once_about_a_misspelled_setting(caplog):
    crawler = get_crawler(
        Spider, {"TWOLEVEL_POLCY": "breadth-first", "DOWNLOADER_MIDDLEWARES": MIDDLEWARE}
    )
    start(crawler)
    warnings = [r.getMessage() for r in caplog.records if "TWOLEVEL_POLCY" in r.getMessage()]
    assert warnings == ["Unknown setting TWOLEVEL_POLCY is ignored; did you mean TWOLEVEL_POLICY?"]


def test_scheduler_refuses_to_start_on_invalid_settings():
    crawler = get_crawler(Spider, {"TWOLEVEL_POLICY": "nope", "DOWNLOADER_MIDDLEWARES": MIDDLEWARE})
    with pytest.raises(SettingsError, match="TWOLEVEL_POLICY='nope'"):
        start(crawler)


@pytest.mark.parametrize("policy", ["performance-first", "crawl-capability"])
def test_policy_needing_metrics_without_middleware_shows_the_line_to_add(policy):
    crawler = get_crawler(Spider, {"TWOLEVEL_POLICY": policy})
    with pytest.raises(
        SettingsError, match=r'"scrapy_twolevel.middleware.HostMetricsMiddleware": 950'
    ):
        start(crawler)


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
    with pytest.raises(SettingsError, match=r"not a subclass of scrapy_twolevel\.frontier\.Policy"):
        start(crawler)
    crawler = get_crawler(Spider, {"TWOLEVEL_POLICY": "no.such.Module"})
    with pytest.raises(
        SettingsError, match=r"TWOLEVEL_POLICY='no\.such\.Module' cannot be imported"
    ):
        start(crawler)


def test_quality_import_path_errors_at_start_up():
    crawler = get_crawler(
        Spider, {"TWOLEVEL_QUALITY": "no.such.func", "DOWNLOADER_MIDDLEWARES": MIDDLEWARE}
    )
    with pytest.raises(SettingsError, match=r"TWOLEVEL_QUALITY='no\.such\.func'"):
        start(crawler)


def test_addon_sets_scheduler_and_middleware():
    crawler = get_crawler(Spider, {"ADDONS": {Addon: 0}})
    assert crawler.settings["SCHEDULER"] == "scrapy_twolevel.scheduler.TwoLevelScheduler"
    mws = crawler.settings.getwithbase("DOWNLOADER_MIDDLEWARES")
    assert mws[HostMetricsMiddleware] == 950
    # And the default policy (crawl-capability) is satisfied.
    assert TwoLevelScheduler.from_crawler(crawler).policy.name == "crawl-capability"


def test_project_setting_beats_addon():
    crawler = get_crawler(Spider, {"ADDONS": {Addon: 0}, "SCHEDULER": "my.Scheduler"})
    assert crawler.settings["SCHEDULER"] == "my.Scheduler"


@pytest.mark.parametrize(
    "key", [HostMetricsMiddleware, "scrapy_twolevel.middleware.HostMetricsMiddleware"]
)
def test_addon_keeps_the_projects_own_order_for_the_middleware(key):
    crawler = get_crawler(Spider, {"ADDONS": {Addon: 0}, "DOWNLOADER_MIDDLEWARES": {key: None}})
    mws = crawler.settings.getwithbase("DOWNLOADER_MIDDLEWARES")
    assert list(mws.values()).count(950) == 0
    assert mws[key] is None


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("TWOLEVEL_REBALANCE_INTERVAL", -1, r"seconds >= 0 \(0: never\)"),
        ("TWOLEVEL_REBALANCE_INTERVAL", "often", "is not a number"),
        ("TWOLEVEL_REBALANCE_TOLERANCE", -0.1, "a number >= 0"),
        # A ":" would make `scrapy twolevel reset news` delete crawl "news:eu" too.
        ("TWOLEVEL_CRAWL_ID", "news:eu", "without spaces or any of"),
        ("TWOLEVEL_NODE_ID", "node*", "without spaces or any of"),
    ],
)
def test_invalid_cluster_settings_name_the_setting_and_the_rule(name, value, message):
    from scrapy.settings import Settings

    from scrapy_twolevel.config import ClusterConfig

    settings = Settings({"TWOLEVEL_REDIS_URL": "redis://127.0.0.1:6379/0", name: value})
    with pytest.raises(SettingsError, match=rf"{name}=.*{message}"):
        ClusterConfig.from_settings(settings)
    defaults = ClusterConfig.from_settings(Settings())
    assert (defaults.rebalance_interval, defaults.rebalance_tolerance) == (30.0, 0.25)


def test_every_setting_is_documented_in_the_settings_page() -> None:
    from pathlib import Path

    page = (Path(__file__).parents[1] / "docs" / "settings.rst").read_text(encoding="utf-8")
    missing = [name for name in DEFAULTS if f"``{name}``" not in page]
    assert not missing


def test_every_documented_default_is_the_tables() -> None:
    """The settings page's Default column, read back, is the default in config.py."""
    import ast
    import re
    from pathlib import Path

    page = (Path(__file__).parents[1] / "docs" / "settings.rst").read_text(encoding="utf-8")
    wrong = {}
    for name, default in DEFAULTS.items():
        row = re.search(rf"``{name}``\n\s+- ``([^`]*)``", page)
        documented = ast.literal_eval(row[1]) if row else "(no row)"
        if documented != default or type(documented) is bool is not type(default):
            wrong[name] = (documented, default)
    assert wrong == {}
