"""``/metrics`` as Prometheus reads it: every exposition passes ``promtool check metrics``
(the parser and the naming lints of Prometheus itself, from Debian's ``prometheus``
package, which ``scripts/test.sh`` installs), and per-host series stop at ``max_hosts``
hosts (``TWOLEVEL_PROMETHEUS_MAX_HOSTS``), however many hosts the snapshot has.
"""

from __future__ import annotations

import re

import pytest
from helpers import FakeClock, promtool_check
from scrapy.utils.test import get_crawler

from scrapy_twolevel.config import SettingsError
from scrapy_twolevel.frontier import BreadthFirst, CostParams, TwoLevelFrontier
from scrapy_twolevel.frontier.failures import FailurePolicy
from scrapy_twolevel.live.extension import LiveView
from scrapy_twolevel.live.prometheus import render
from scrapy_twolevel.live.snapshot import snapshot
from scrapy_twolevel.live.web import LiveResource

# glue: each test starts promtool, or builds the extension with get_crawler (conftest.py).
pytestmark = pytest.mark.glue


def row(host: str, **figures: float) -> dict[str, object]:
    """A snapshot row with the fields ``/metrics`` reads (docs/watching.rst)."""
    base = {"queued": 1, "score": 0.5, "service_s": 0.25, "connection_s": 0.01}
    return {"host": host, **base, "fetched": 2, "refusals": 0, **figures}


#: A snapshot as the extension serves it, with host keys that need escaping (a quote, a
#: backslash, a newline) and a topic lane (``<topic>\x1f<host key>``, docs/architecture.rst).
SNAP = {
    "crawl": {"pending": 12, "hosts": 9, "pages": 40, "quality": 17.25, "in_flight": 3},
    "states": {"in session": 2, "waiting": 3, "ready": 2, "given up": 1, "idle": 1},
    "reasons": {"given up: failing": 1, "waiting: backoff": 1, "waiting: refused": 2},
    "hosts": [
        row("a.example", queued=3, fetched=7),
        row('q"uote.example', queued=3),
        row("back\\slash.example", refusals=2),
        row("new\nline.example"),
        row("news\x1fb.example", score=0.0),
    ],
}


def hosts_in(text: str) -> set[str]:
    return set(re.findall(r'\{host="((?:[^"\\]|\\.)*)"\}', text))


def test_a_snapshot_passes_promtool_and_reads_as_written():
    text = render(SNAP, max_hosts=50)
    assert promtool_check(text) == (0, "")
    lines = text.splitlines()
    assert "twolevel_pending_requests 12.0" in lines
    assert "twolevel_quality_gathered_total 17.25" in lines
    assert 'twolevel_hosts{state="given up"} 1.0' in lines
    assert 'twolevel_hosts_held{state="waiting",reason="refused"} 2.0' in lines
    assert 'twolevel_host_queued_requests{host="q\\"uote.example"} 3.0' in lines
    assert 'twolevel_host_refusals_total{host="back\\\\slash.example"} 2.0' in lines
    assert 'twolevel_host_pages_total{host="new\\nline.example"} 2.0' in lines
    assert hosts_in(text) == {
        "a.example",
        'q\\"uote.example',
        "back\\\\slash.example",
        "new\\nline.example",
        "news\x1fb.example",
    }
    # _total on counters and on counters only (promtool checks the first half).
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    assert types and all((kind == "counter") == n.endswith("_total") for n, kind in types.items())


def test_per_host_series_stop_at_max_hosts():
    """The first rows are kept (the snapshot puts hosts in session first, then the best by
    score); the crawl-wide series are all there whatever the cap."""
    capped = render(SNAP, max_hosts=2)
    assert promtool_check(capped) == (0, "")
    assert hosts_in(capped) == {"a.example", 'q\\"uote.example'}
    assert len(re.findall(r"^twolevel_host_score\{", capped, re.M)) == 2
    none = render(SNAP, max_hosts=0)
    assert promtool_check(none) == (0, "")
    assert "host=" not in none and "twolevel_hosts_known 9.0" in none.splitlines()


def test_a_frontier_snapshot_and_an_empty_one_pass_promtool():
    """A snapshot of a real frontier (a host refused, one backed off: the reasons), and
    what the extension serves before the scheduler opens (no frontier, no rows)."""
    clock = FakeClock(100.0)
    f = TwoLevelFrontier(
        BreadthFirst(),
        CostParams(),
        None,
        failures=FailurePolicy(session_failures=1, backoff=10.0, backoff_max=25.0),
        clock=clock,
        jitter=lambda: 0.0,
    )
    for host in ("refuser", "failing", "ok", 'odd"host\\name'):
        for i in range(3):
            f.push(host, 0.5 + i / 10, f"{host}/{i}")
    for _ in range(4):
        assert f.pop() is not None
    f.observe_refusal("refuser", retry_after=30.0)
    f.done("refuser")
    f.observe_failure("failing", elapsed=1.0, timeout=False)
    f.done("failing")
    clock.now = 100.5
    snap = snapshot(f, clock.now, crawl={"pages": 4, "quality": 2.5, "in_flight": 2})
    text = render(snap, max_hosts=50)
    assert promtool_check(text) == (0, "")
    assert 'twolevel_hosts_held{state="waiting",reason="backoff"} 1.0' in text.splitlines()
    assert 'odd\\"host\\\\name' in hosts_in(text)
    empty = {
        "crawl": {"pages": 0, "quality": 0.0, "in_flight": 0},
        "states": dict.fromkeys(SNAP["states"], 0),
        "reasons": {},
        "hosts": [],
    }
    assert promtool_check(render(empty, max_hosts=50)) == (0, "")


def test_the_setting_reaches_metrics_and_is_checked_at_start():
    settings = {"TWOLEVEL_WEB_PORT": 0, "TWOLEVEL_STATUS_INTERVAL": 0}
    assert LiveView.from_crawler(get_crawler(settings_dict=settings)).prometheus_hosts == 50
    view = LiveView.from_crawler(
        get_crawler(settings_dict={**settings, "TWOLEVEL_PROMETHEUS_MAX_HOSTS": "2"})
    )
    assert view.prometheus_hosts == 2
    with pytest.raises(SettingsError, match=r"TWOLEVEL_PROMETHEUS_MAX_HOSTS=-1 .*>= 0"):
        LiveView.from_crawler(
            get_crawler(settings_dict={**settings, "TWOLEVEL_PROMETHEUS_MAX_HOSTS": -1})
        )

    from twisted.web.test.requesthelper import DummyRequest

    resource = LiveResource(
        "t", lambda named: SNAP, lambda host: None, max_hosts=view.prometheus_hosts
    )
    request = DummyRequest([b"metrics"])
    request.path = b"/metrics"
    request.args = {b"token": [b"t"]}
    text = resource.render_GET(request).decode()
    assert hosts_in(text) == {"a.example", 'q\\"uote.example'}
