"""The live view during a real crawl: ``/status.json`` and ``/metrics`` read over a real
socket while ``scrapy crawl`` runs against the test web, whose hosts fail (one refuses
connections, one resets them) and refuse requests (429 with ``Retry-After``), so hosts are
seen in session, waiting (and why) and given up. Requests without the token are refused.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from test_distributed_crawl import wait_until

from scrapy_twolevel.testweb.process import ServerProcess
from scrapy_twolevel.testweb.web import HostProfile, generate_web

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent / "example_project"


def get(url, headers=None):
    request = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(request, timeout=10) as reply:
        return reply.status, reply.headers.get("content-type"), reply.read()


def start_live_crawl(tmp_path, hosts=8, pages=25, response_delay=0.05):
    """A ``scrapy crawl testweb`` of the example project with ``TWOLEVEL_WEB_PORT=0``,
    against a test web served by its own process (its first host refuses connections, its
    second resets them, its last two refuse requests faster than one per 0.5 s with 429
    and ``Retry-After``); returns (process, log path, server)."""
    quick = HostProfile(connect_delay=0.002, response_delay=response_delay)
    limited = HostProfile(connect_delay=0.002, response_delay=0.01, min_interval=0.5)
    web = generate_web(
        hosts,
        pages,
        seed=31,
        n_seeds=hosts,
        links_per_page=4,
        host_profiles=[quick] * (hosts - 2) + [limited] * 2,
        failures={0: "refuse", 1: "reset"},
    )
    workdir = tmp_path / "server"
    workdir.mkdir()
    server = ServerProcess(web, workdir)
    log = tmp_path / "crawl.log"
    settings = {
        "EXTENSIONS": {},  # no embedded test web: the server above
        "TWOLEVEL_TESTWEB_SEEDS": ",".join(server.seeds),
        "TWOLEVEL_WEB_PORT": 0,
        "TWOLEVEL_STATUS_INTERVAL": 0.5,
        "CONCURRENT_REQUESTS": 4,
        "DOWNLOAD_TIMEOUT": 1,
        "RETRY_TIMES": 0,
        "TWOLEVEL_BACKOFF": 0.5,
        "TWOLEVEL_BACKOFF_MAX": 1.0,
        "TWOLEVEL_GIVE_UP_AFTER": 1.0,
        "ADDONS": {"scrapy_twolevel.Addon": 0},
    }
    cmd = [sys.executable, "-m", "scrapy.cmdline", "crawl", "testweb"]
    for key, value in settings.items():
        cmd += ["-s", f"{key}={value if isinstance(value, str) else json.dumps(value)}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(PROJECT)])}
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=PROJECT, stdout=subprocess.DEVNULL, stderr=out, env=env)
    return proc, log, server


def stop_live_crawl(proc, server):
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    server.stop()


def live_url(log):
    """The dashboard's URL, once the crawl has logged it: (base, token)."""
    found = {}

    def logged():
        found["match"] = re.search(r"Live view of this crawl: (\S+)", log.read_text())
        return found["match"]

    wait_until(logged, "the live view's URL in the log")
    base, token = found["match"].group(1).split("/?token=")
    return base, token


@pytest.fixture
def live_crawl(tmp_path):
    proc, log, server = start_live_crawl(tmp_path)
    try:
        yield proc, log
    finally:
        stop_live_crawl(proc, server)


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

    _status, kind, body = get(f"{base}/metrics", {"Authorization": f"Bearer {token}"})
    text = body.decode()
    assert kind.startswith("text/plain; version=0.0.4")
    assert re.search(r'^twolevel_hosts\{state="given up"\} [1-9]', text, re.M)
    assert re.search(r"^twolevel_pages_total [1-9]", text, re.M)
    _status, kind, page = get(f"{base}/?token={token}")
    assert kind.startswith("text/html") and b"status.json" in page

    for bad in (f"{base}/status.json", f"{base}/status.json?token=wrong", f"{base}/metrics"):
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
