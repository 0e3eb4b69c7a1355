"""SeenCacheDupeFilter as a Scrapy component: built from settings by Scrapy's own helpers,
fed real Requests, closed and reopened in a JOBDIR."""

from __future__ import annotations

import hashlib
import logging
import subprocess
import sys
import tempfile

import pytest
from scrapy import Request, Spider
from scrapy.utils.misc import build_from_crawler
from scrapy.utils.request import RequestFingerprinter
from scrapy.utils.test import get_crawler

from scrapy_twolevel import Addon
from scrapy_twolevel.config import SettingsError
from scrapy_twolevel.dupefilter import SeenCacheDupeFilter
from scrapy_twolevel.errors import StateError

pytestmark = pytest.mark.glue

PATH = "scrapy_twolevel.dupefilter.SeenCacheDupeFilter"


class QueryBlindFingerprinter:
    """A project's own fingerprinter: the query string does not make a page new."""

    def fingerprint(self, request):
        return request.url.split("?")[0].encode()


def make(settings=None, spider=Spider):
    crawler = get_crawler(spider, {"DUPEFILTER_CLASS": PATH, **(settings or {})})
    crawler.spider = spider("s")
    df = build_from_crawler(SeenCacheDupeFilter, crawler)
    df.open()
    return df, crawler


def urls(n, start=0):
    return [Request(f"http://h{i % 7}.test/p/{i}") for i in range(start, start + n)]


def test_new_then_seen_and_dont_filter_honoured():
    df, crawler = make()
    assert [df.request_seen(r) for r in urls(50)] == [False] * 50
    assert all(df.request_seen(r) for r in urls(50))
    again = Request("http://h0.test/p/0", dont_filter=True)
    assert df.request_seen(again) is False
    df.log(urls(1)[0], crawler.spider)
    df.close("finished")
    stats = crawler.stats.get_stats()
    assert stats["dupefilter/filtered"] == 1
    assert stats["twolevel/seen/urls"] == 50
    assert stats["twolevel/seen/tests"] == 100
    assert stats["twolevel/seen/cache_hits"] == 50  # the second round hit the cache
    assert stats["twolevel/seen/cache_hit_rate"] == 0.5


def test_temporary_store_is_removed_at_close_and_a_configured_path_kept(tmp_path):
    df, _ = make()
    temp = df._temp_path
    assert temp is not None and temp.exists()
    df.close("finished")
    assert not temp.exists()
    path = tmp_path / "seen.sqlite3"
    df, _ = make({"TWOLEVEL_SEEN_PATH": str(path)})
    df.request_seen(urls(1)[0])
    df.close("finished")
    assert path.exists()
    df, _ = make({"TWOLEVEL_SEEN_PATH": str(path)})
    assert df.request_seen(urls(1)[0]) is True
    df.close("finished")


def test_a_file_left_by_a_killed_crawl_is_removed_by_the_next(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the system's temporary dir
    killed = subprocess.Popen([sys.executable, "-c", "pass"])  # a crawl that is gone
    killed.wait()
    left = tmp_path / f"twolevel-seen-{killed.pid}-abcdefgh.sqlite3"
    left.write_bytes(b"\0" * 300_000)
    caplog.set_level(logging.INFO, logger="scrapy_twolevel.dupefilter")
    df, _ = make()
    assert not left.exists()
    assert df._temp_path is not None and df._temp_path.parent == tmp_path
    assert "Removed 1 seen-keys file(s), 0.3 MB" in caplog.text
    df.close("finished")
    assert list(tmp_path.iterdir()) == []


def test_projects_fingerprinter_is_used():
    df, _ = make({"REQUEST_FINGERPRINTER_CLASS": QueryBlindFingerprinter})
    assert df.request_seen(Request("http://a.test/x?utm=1")) is False
    assert df.request_seen(Request("http://a.test/x?utm=2")) is True
    assert df.identity["key"] == "blake2b16"  # not a digest: hashed to 16 bytes
    df.close("finished")


def test_jobdir_round_trip(tmp_path):
    settings = {"JOBDIR": str(tmp_path / "job")}
    df, _ = make(settings)
    for r in urls(300):
        df.request_seen(r)
    df.close("shutdown")
    df, crawler = make(settings)
    assert all(df.request_seen(r) for r in urls(300))
    assert not any(df.request_seen(r) for r in urls(10, start=300))
    df.close("finished")
    assert crawler.stats.get_value("twolevel/seen/urls") == 310


@pytest.mark.parametrize("mode", ["exact", "bloom-only"])
def test_distributed_mode_keeps_no_seen_key_in_jobdir_and_forgets_for_real(tmp_path, mode):
    """With JOBDIR, a node kept its keys in JOBDIR/twolevel/seen.*: forget() (a reaped
    node) reopened that same file, and keys a kill left there without having reached
    Redis filtered their URLs for good. Redis is the durable copy in this mode."""
    jobdir = tmp_path / "job"
    settings = {
        "JOBDIR": str(jobdir),
        "TWOLEVEL_REDIS_URL": "redis://127.0.0.1:6379/0",
        "TWOLEVEL_SEEN_PATH": str(tmp_path / "seen.sqlite3"),
        "TWOLEVEL_SEEN_MODE": mode,
    }
    df, _ = make(settings)
    assert not df.request_seen(urls(1)[0])
    assert df.request_seen(urls(1)[0])
    df.forget()
    assert not df.request_seen(urls(1)[0])  # a fresh start: no key survived
    df.close("shutdown")
    df, _ = make(settings)  # a restarted node too starts empty
    assert not df.request_seen(urls(1)[0])
    df.close("shutdown")
    assert not (jobdir / "twolevel").exists() and not (tmp_path / "seen.sqlite3").exists()


def test_corrupt_state_file_is_named_and_left_untouched(tmp_path):
    state = tmp_path / "job" / "twolevel" / "seen.sqlite3"
    state.parent.mkdir(parents=True)
    state.write_bytes(b"not sqlite at all" * 100)
    before = state.read_bytes()
    with pytest.raises(StateError, match=r"seen\.sqlite3 is not a scrapy_twolevel"):
        make({"JOBDIR": str(tmp_path / "job")})
    assert state.read_bytes() == before


def test_resuming_with_another_fingerprinter_is_refused(tmp_path):
    settings = {"JOBDIR": str(tmp_path / "job")}
    df, _ = make(settings)
    df.request_seen(urls(1)[0])
    df.close("shutdown")
    state = tmp_path / "job" / "twolevel" / "seen.sqlite3"
    before = state.read_bytes()
    with pytest.raises(StateError, match="REQUEST_FINGERPRINTER_CLASS"):
        make({**settings, "REQUEST_FINGERPRINTER_CLASS": QueryBlindFingerprinter})
    assert state.read_bytes() == before


def test_urls_that_collide_in_the_bloom_are_still_new(tmp_path):
    """Adversarial: URLs chosen so the filter says "maybe" for each; none is called seen."""
    df, crawler = make({"TWOLEVEL_SEEN_ERROR_RATE": 0.3, "TWOLEVEL_SEEN_INITIAL_CAPACITY": 1000})
    for r in urls(700):
        assert df.request_seen(r) is False
    bloom, key = df.seen.bloom, df._key
    colliding = []
    i = 10_000
    while len(colliding) < 100:
        r = Request(f"http://evil.test/{i}")
        if key(df.fingerprinter.fingerprint(r)) in bloom:
            colliding.append(r)
        i += 1
    assert [df.request_seen(r) for r in colliding] == [False] * 100
    assert all(df.request_seen(r) for r in colliding)
    df.close("finished")
    stats = crawler.stats.get_stats()
    assert stats["twolevel/seen/bloom_false_positives"] >= 100
    assert stats["twolevel/seen/urls"] == 800


def test_bloom_only_saves_its_filter_in_the_jobdir(tmp_path):
    settings = {"JOBDIR": str(tmp_path / "job"), "TWOLEVEL_SEEN_MODE": "bloom-only"}
    df, crawler = make(settings)
    new = sum(not df.request_seen(r) for r in urls(2000))
    df.close("shutdown")
    assert new >= 1990  # at a 0.01% error rate, a loss here is itself unlikely
    assert crawler.stats.get_value("twolevel/seen/store_lookups") == 0
    df, _ = make(settings)
    assert all(df.request_seen(r) for r in urls(2000))
    df.close("shutdown")
    bloom = tmp_path / "job" / "twolevel" / "seen.bloom"
    bloom.write_bytes(bloom.read_bytes()[:-10])
    with pytest.raises(StateError, match=r"seen\.bloom is not a scrapy_twolevel"):
        make(settings)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("TWOLEVEL_SEEN_MODE", "fast", "use one of: exact, bloom-only"),
        ("TWOLEVEL_SEEN_CACHE_POLICY", "fifo", "use one of: lru, clock, random, static"),
        ("TWOLEVEL_SEEN_ERROR_RATE", 0.9, r"out of range; it must be a number in \[0\.000001,"),
        ("TWOLEVEL_SEEN_CACHE_SIZE", "2.5", "is not an integer"),
        ("TWOLEVEL_SEEN_BLOOM", "rbloom", "use one of: builtin, pybloom-live"),
    ],
)
def test_invalid_settings_name_the_setting(name, value, message):
    with pytest.raises(SettingsError, match=f"{name}=.*{message}"):
        make({name: value})


def test_pybloom_live_backend_is_exact_too():
    df, _ = make({"TWOLEVEL_SEEN_BLOOM": "pybloom-live", "TWOLEVEL_SEEN_INITIAL_CAPACITY": 1000})
    # Grows three times: full at 1000, 1500 and 2250 keys (capacities 1500, 2250, 3375).
    assert not any(df.request_seen(r) for r in urls(3000))
    assert all(df.request_seen(r) for r in urls(3000))
    assert df.seen.counters.rebuilds == 3
    df.close("finished")


def test_addon_sets_the_dupefilter_unless_the_project_chose_one():
    crawler = get_crawler(Spider, {"ADDONS": {Addon: 0}})
    assert crawler.settings["DUPEFILTER_CLASS"] == PATH
    crawler = get_crawler(
        Spider, {"ADDONS": {Addon: 0}, "DUPEFILTER_CLASS": "scrapy.dupefilters.BaseDupeFilter"}
    )
    assert crawler.settings["DUPEFILTER_CLASS"] == "scrapy.dupefilters.BaseDupeFilter"


def test_keys_of_scrapys_fingerprints_are_their_prefix():
    df, crawler = make()
    request = urls(1)[0]
    fp = crawler.request_fingerprinter.fingerprint(request)
    assert df._key(fp) == fp[:16] and len(fp) == 20 == hashlib.sha1().digest_size
    df.close("finished")


def test_keys_remembered_by_url_are_the_fingerprints_own():
    """The URL memo answers only where Scrapy's fingerprint depends on the URL alone."""
    df, crawler = make()
    fingerprinter = crawler.request_fingerprinter

    def key_of(request):
        return fingerprinter.fingerprint(request)[:16]

    url = "http://a.test/p?b=2&a=1#frag"
    plain = Request(url)
    assert df.request_key(plain) == key_of(plain)
    again = Request(url)
    assert df.request_key(again) == key_of(again) and df._memo.hits == 1
    # Not from the memo: each differs from the plain GET's key, as its fingerprint does.
    for other in (
        Request(url, method="POST"),
        Request(url, body=b"x=1"),
    ):
        assert df.request_key(other) == key_of(other) != key_of(plain)
    # verbatim_url changes the fingerprint from Scrapy 2.17 on (before, it is ignored);
    # the memo is bypassed either way.
    verbatim = Request(url, meta={"verbatim_url": True})
    assert df.request_key(verbatim) == key_of(verbatim)
    assert df._memo.hits == 1
    df.close("finished")
    assert crawler.stats.get_value("twolevel/seen/url_key_hits") == 1


@pytest.mark.parametrize(
    "url",
    [
        "http://a.test/",
        "http://A.TEST:8080/x/../y/./z?b=2&a=1&a=0#frag",
        "https://bücher.example/straße?q=größe&leer=",
        "http://a.test/%7euser/a%2fb?x=%20y+z&x=1",
        "http://a.test/path;params?q",
        "http://user:pw@a.test/p?\u00e9=\u00e9",
        "http://[::1]:8000/p",
    ],
)
def test_keys_computed_from_the_url_equal_scrapys_fingerprint(url):
    """The URL fingerprint is Scrapy's recipe without its per-request cache: for every
    kind of URL it must give Scrapy's own bytes."""
    df, crawler = make()
    first, second = Request(url), Request(url)
    assert df.request_key(first) == crawler.request_fingerprinter.fingerprint(second)[:16]
    assert df.request_key(second) == df.request_key(first) and df._memo.hits == 2
    df.close("finished")


def test_a_scrapy_with_another_fingerprint_recipe_gets_its_fingerprinter_asked(monkeypatch):
    """If Scrapy's recipe changes, the probe URLs disagree and no key is computed from the
    URL: the fingerprinter is called for every request, as for a project's own."""
    from scrapy_twolevel import _engine

    assert _engine.url_fingerprint_function(RequestFingerprinter()) is not None
    monkeypatch.setattr(_engine, "_GET_FINGERPRINT_HEAD", '{"method": "GET", "url": ')
    assert _engine.url_fingerprint_function(RequestFingerprinter()) is None
    df, crawler = make()
    assert df._memo is None
    request = Request("http://a.test/p")
    assert df.request_key(request) == crawler.request_fingerprinter.fingerprint(request)[:16]
    df.close("finished")


class LanguageFingerprinter(RequestFingerprinter):
    """A project's subclass of Scrapy's fingerprinter: one page per Accept-Language. It
    inherits Scrapy's private ``_fingerprint``, which the URL memo used to be keyed on."""

    def fingerprint(self, request):
        return super().fingerprint(request) + request.headers.get("Accept-Language", b"")


def test_a_fingerprinter_subclass_gets_no_url_memo_and_its_keys_count_headers():
    df, _ = make({"REQUEST_FINGERPRINTER_CLASS": LanguageFingerprinter})
    assert df._memo is None
    url = "http://a.test/page"
    english = Request(url, headers={"Accept-Language": "en"})
    german = Request(url, headers={"Accept-Language": "de"})
    assert df.request_seen(english) is False
    assert df.request_seen(german) is False  # was dropped: the memo's key of the URL alone
    assert df.request_seen(Request(url, headers={"Accept-Language": "de"})) is True
    df.close("finished")


def test_a_projects_fingerprinter_gets_no_url_memo():
    df, _ = make({"REQUEST_FINGERPRINTER_CLASS": QueryBlindFingerprinter})
    assert df._memo is None
    df.close("finished")


#: URLs near the edge of ``is_canonical``: each either takes the shortcut and is returned
#: unchanged by ``canonicalize_url``, or is handed to it.
EDGE_URLS = (
    "http://h1.broad.test:8123/p/42",
    "https://a.example/",
    "http://a.example",
    "HTTP://a.example/",
    "http://A.example/",
    "http://a.example:80/",
    "http://a.example:0080/",
    "http://a.example:65535/x",
    "http://a.example:65536/x",
    "http://a.example:99999/x",
    "http://a.example/a/./b",
    "http://a.example/a/../b",
    "http://a.example/a/..",
    "http://a.example/.well-known/x",
    "http://a.example/a//b",
    "http://a.example/~user/a-b_c.d",
    "http://a.example/a%7Eb",
    "http://a.example/a?b=1",
    "http://a.example/a#b",
    "http://a..example/",
    "http://-a.example/",
    "http://xn--bcher-kva.example/",
    "http://xn--a.example/",
    "http://" + "a" * 70 + ".example/",
    "http://1.2.3.4/p",
    "http://a.example/a b",
    "ftp://a.example/",
)


def test_urls_taken_as_canonical_are_those_canonicalize_url_leaves_alone():
    """The shortcut in the URL fingerprint may only skip ``canonicalize_url`` where it
    would return the URL unchanged: checked on edge cases and on 20,000 URLs drawn from
    an alphabet that reaches every branch; the key is Scrapy's fingerprint."""
    import random

    from w3lib.url import canonicalize_url

    from scrapy_twolevel._engine import _get_fingerprint, is_canonical

    taken = 0
    rng = random.Random(7)
    alphabet = "aZ09.-_~/%:?#@ .."
    drawn = [
        rng.choice(("http://", "https://", "Http://"))
        + "".join(rng.choice("ab1.-X") for _ in range(rng.randint(1, 6)))
        + rng.choice(("", ":80", ":8080", ":070000", ":"))
        + "/"
        + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        for _ in range(20_000)
    ]
    fingerprinter = RequestFingerprinter()
    for url in EDGE_URLS + tuple(drawn):
        if is_canonical(url):
            taken += 1
            assert canonicalize_url(url) == url, url
            assert _get_fingerprint(url) == fingerprinter.fingerprint(Request(url)), url
    assert is_canonical(EDGE_URLS[0]) and not is_canonical("http://a.example/a/./b")
    assert not is_canonical("http://a.example:65536/x") and not is_canonical("http://a.example")
    assert taken > 500  # the draw reaches the shortcut, not only the slow path
