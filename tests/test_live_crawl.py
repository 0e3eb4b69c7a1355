"""The live view during a real crawl: ``/status.json`` and ``/metrics`` read over a real
socket while ``scrapy crawl`` runs against the test web, whose hosts fail (one refuses
connections, one resets them) and refuse requests (429 with ``Retry-After``), so hosts are
seen in session, waiting (and why) and given up. Requests without the token are refused.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from crawl_helpers import live_url, start_live_crawl, stop_live_crawl
from helpers import promtool_check, wait_until

import scrapy_twolevel
from scrapy_twolevel.testweb.web import HostProfile, generate_web, host_address

pytestmark = pytest.mark.crawl

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent / "example_project"


def get(url, headers=None):
    request = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(request, timeout=10) as reply:
        return reply.status, reply.headers.get("content-type"), reply.read()


@pytest.fixture
def live_crawl(tmp_path):
    proc, log, server = start_live_crawl(tmp_path)
    try:
        yield proc, log
    finally:
        stop_live_crawl(proc, server)


@pytest.mark.long
def test_status_and_metrics_show_each_state_and_need_the_token(live_crawl):
    proc, log = live_crawl
    base, token = live_url(log)
    seen_states, seen_reasons = set(), set()

    def look():
        status, kind, body = get(f"{base}/status.json?token={token}")
        assert status == 200 and kind == "application/json"
        snap = json.loads(body)
        seen_states.update(s for s, n in snap["states"].items() if n)
        seen_reasons.update(snap["reasons"])
        return {"in session", "waiting", "given up"} <= seen_states and proc.poll() is None

    wait_until(look, "hosts in session, waiting and given up", timeout=90)
    assert "given up: failing" in seen_reasons
    assert seen_reasons & {"waiting: backoff", "waiting: refused"}

    # A host given up has nothing queued, so it is in the table only when asked for
    # (the dashboard's "show host" box): with its state, why, and its failures by kind.
    dead = host_address(0)  # refuses every connection
    rows = {}

    def given_up():
        _status, _kind, body = get(f"{base}/status.json?token={token}&host={dead}")
        rows.update({row["host"]: row for row in json.loads(body)["hosts"]})
        return rows[dead]["state"] == "given up"

    wait_until(given_up, f"{dead} given up", timeout=90)
    assert rows[dead]["why"] == "failing"
    assert rows[dead]["failures"].get("down", 0) >= 1 and rows[dead]["fetched"] == 0
    assert set(rows[dead]["failures"]) <= {"down", "slow", "broken"}

    # Its page: the failures in its story (times before now), its row, an empty queue.
    _status, kind, body = get(f"{base}/host.json?token={token}&host={dead}")
    detail = json.loads(body)
    assert kind == "application/json" and detail["host"] == dead
    assert detail["row"]["state"] == "given up" and detail["queued_pages"] == []
    failed = [e for e in detail["timeline"] if e["kind"] == "failed"]
    assert failed and {e["detail"] for e in failed} <= {"down", "slow", "broken"}
    assert all(e["at_s"] <= 0 for e in detail["timeline"])
    assert [e["at_s"] for e in detail["timeline"]] == sorted(e["at_s"] for e in detail["timeline"])
    # A host that serves: its sessions, and the URLs its queue hands out next.
    snap = json.loads(get(f"{base}/status.json?token={token}")[2])
    crawl = snap["crawl"]
    assert crawl["errors"] >= len(failed) and crawl["pages_per_s_overall"] > 0
    assert snap["history"] and all(len(point) == 4 for point in snap["history"])
    served = max(snap["hosts"], key=lambda row: row["fetched"])
    detail = json.loads(get(f"{base}/host.json?token={token}&host={served['host']}")[2])
    kinds = {e["kind"] for e in detail["timeline"]}
    assert "session" in kinds and "page" not in kinds, kinds  # pages: in the sessions
    assert all(p["url"].startswith(f"http://{served['host']}:") for p in detail["queued_pages"])
    with pytest.raises(urllib.error.HTTPError) as unknown:
        get(f"{base}/host.json?token={token}&host=nowhere.test")
    assert unknown.value.code == 404
    unknown.value.close()

    _status, kind, body = get(f"{base}/metrics", {"Authorization": f"Bearer {token}"})
    text = body.decode()
    assert kind.startswith("text/plain; version=0.0.4")
    assert re.search(r'^twolevel_hosts\{state="given up"\} [1-9]', text, re.M)
    assert re.search(r"^twolevel_pages_total [1-9]", text, re.M)
    # The failing hosts' failed requests, as the dashboard counts them.
    assert re.search(r"^twolevel_failed_requests_total [1-9]", text, re.M)
    assert re.search(r"^twolevel_refused_requests_total \d", text, re.M)
    assert promtool_check(text) == (0, "")  # what Prometheus itself parses and lints
    _status, kind, page = get(f"{base}/?token={token}")
    assert kind.startswith("text/html") and b"status.json" in page

    for bad in (
        f"{base}/status.json",
        f"{base}/status.json?token=wrong",
        f"{base}/metrics",
        f"{base}/host.json?host={dead}",
    ):
        with pytest.raises(urllib.error.HTTPError) as refused:
            get(bad)
        assert refused.value.code == 403
        refused.value.close()
    assert base.startswith("http://127.0.0.1:")  # loopback only, by default

    assert proc.wait(timeout=120) == 0
    text = log.read_text()
    assert "Frontier: " in text and "given up" in text  # the periodic status line
    # Failing hosts make Scrapy log their download errors; nothing of ours may fail.
    assert not re.search(r"\[scrapy_twolevel[^\]]*\] ERROR|Unhandled error", text), text[-3000:]
    assert "scrapy_twolevel/live" not in text


def test_twolevel_status_reads_the_jobdir_of_a_crawl_killed_with_9(tmp_path):
    """``scrapy twolevel status SPIDER -s JOBDIR=...`` on a crawl killed mid-way: its
    pending requests (leases included) and the hosts with the most, read-only, so the
    crawl still resumes and fetches every page."""
    from crawl_helpers import SAFE, crawl, crawl_process, free_port, read_log

    web = generate_web(
        6, 20, seed=37, n_seeds=2, links_per_page=5,
        host_profiles=[HostProfile(connect_delay=0.002, response_delay=0.04)] * 6,
    )  # fmt: skip
    jobdir = tmp_path / "job"
    settings = {
        **SAFE,
        "JOBDIR": str(jobdir),
        "CONCURRENT_REQUESTS": 2,
        "TWOLEVEL_COMMIT_INTERVAL": 0.1,  # committed before the kill
    }
    port = free_port()
    log = tmp_path / "fetched.log"
    settings["FETCH_LOG"] = str(log)  # what each run fetched, surviving the kill
    killed = {
        **settings,
        "EXTENSIONS": {"crawl_helpers.FetchLog": 0, "crawl_helpers.KillAfterResponses": 1},
        "KILL_AFTER_RESPONSES": 25,
    }
    proc, _ = crawl_process(tmp_path, web, killed, port=port)
    assert proc.returncode == -9, proc.stderr[-3000:]

    def status(*extra):
        scrapy = Path(sys.executable).with_name("scrapy")
        done = subprocess.run(
            [str(scrapy), "twolevel", "status", "testweb", "-s", f"JOBDIR={jobdir}", *extra],
            cwd=PROJECT, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    report = json.loads(status("--json"))
    assert report["pending"] > 0 and report["hosts_with_requests"] >= 1
    assert (
        sum(row["queued"] for row in report["hosts"]) + report["without_host"] == report["pending"]
    )
    assert report["seen_keys"] >= 25  # every page fetched was let through by a seen key
    assert report["written_by"] == scrapy_twolevel.__version__
    assert report["hosts"] == sorted(report["hosts"], key=lambda r: (-r["queued"], r["host"]))
    text = status()
    assert f"{report['pending']} requests pending" in text
    assert report["hosts"][0]["host"] in text
    assert f"written by scrapy-twolevel {scrapy_twolevel.__version__}" in text

    resumed = {**settings, "EXTENSIONS": {"crawl_helpers.FetchLog": 0}}
    final = crawl(tmp_path, web, resumed, port=port)  # untouched by status: it resumes
    assert final.crawl_stats["finish_reason"] == "finished"
    assert final.crawl_stats["twolevel/leases_resumed"] == report["leased"]
    page_of = {web.url(page, port): page for page in range(len(web.pages))}
    assert {page_of[url] for _, url in read_log(log)} == web.reachable()


def test_twolevel_status_on_a_jobdir_without_a_crawl_says_so(tmp_path):
    scrapy = Path(sys.executable).with_name("scrapy")
    done = subprocess.run(
        [str(scrapy), "twolevel", "status", "-s", f"JOBDIR={tmp_path}"],
        cwd=PROJECT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert "no scrapy_twolevel crawl has used this JOBDIR" in done.stdout


def test_status_shows_the_planned_seed_refetches_of_a_recrawl(tmp_path):
    """The news spider (``TWOLEVEL_RECRAWL`` on a sped-up clock): ``/status.json`` lists
    both seeds' next refetches, soonest first, once they were fetched and planned."""
    log = tmp_path / "news.log"
    cmd = [str(Path(sys.executable).with_name("scrapy")), "crawl", "news"]
    for setting in (
        f"JOBDIR={tmp_path / 'job'}",
        f"TWOLEVEL_RECRAWL_TIME_ORIGIN={time.time()}",
        "TWOLEVEL_RECRAWL_DURATION=8",
        "TWOLEVEL_WEB_PORT=0",
    ):
        cmd += ["-s", setting]
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=PROJECT, stdout=subprocess.DEVNULL, stderr=out)
    try:
        base, token = live_url(log)
        found = {}

        def planned():
            found["seeds"] = json.loads(get(f"{base}/status.json?token={token}")[2]).get("seeds")
            return found["seeds"] and len(found["seeds"]) == 2

        wait_until(planned, "both seeds planned", timeout=30)
        seeds = found["seeds"]
        assert {row["seed"] for row in seeds} == {"news/day", "news/night"}
        assert seeds[0]["due_in_s"] <= seeds[1]["due_in_s"]
        assert all(row["interval_s"] is None or row["interval_s"] > 0 for row in seeds)
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
