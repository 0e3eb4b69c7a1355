"""The distributed mode the hard way: several real ``scrapy crawl`` processes on one Redis.

One test web serves every node from its own process, so its counts are the ground truth:
how often each page was fetched, and whether a host ever had two requests in flight at
once (from any node). Nodes join late, leave with Ctrl-C, are killed with SIGKILL, and
are paused with SIGSTOP past their ttl. Waits are on conditions (server counts, Redis
membership, process state) with deadlines, never fixed sleeps.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from datetime import datetime
from pathlib import Path

import pytest
from crawl_helpers import (
    CASCADE,
    PROJECT,
    TTL,
    Node,
    fetched,
    last_line,
    refetches,
    scrapy_in_project,
    slow_web,
)
from helpers import start_private_redis, wait_until

from scrapy_twolevel.distributed.node import status
from scrapy_twolevel.distributed.registry import DEFAULT_BUCKETS
from scrapy_twolevel.testweb.web import HostProfile, generate_web

pytestmark = pytest.mark.redis

BUCKETS = DEFAULT_BUCKETS  # the nodes' TWOLEVEL_BUCKETS


def start_one_by_one(tmp_path, names, server, redis_url, crawl_id, **settings):
    """Nodes started in turn, each once the one before has joined: the first holds every
    bucket when the second joins, so the join's hand-over is exactly floor(M / 2)."""
    nodes = []
    for name in names:
        nodes.append(Node(tmp_path, name, server, redis_url, crawl_id, **settings))
        wait_until(lambda: "Joined crawl" in nodes[-1].log(), f"{name} to join")
    return nodes


def joins_while_held(server, node):
    """Wait until ``node`` has joined, with the web's answers held (``server.hold()`` was
    called before), then answer them: it joins while the crawl's work is still there,
    however slowly a loaded machine starts it."""
    wait_until(lambda: "Joined crawl" in node.log(), f"{node.name} to join")
    server.release()


def buckets(client, crawl_id, column="buckets_owned"):
    """Buckets per member node, as ``scrapy twolevel status`` reads them from Redis:
    ``buckets_owned`` (the table: the ground truth of ownership) or ``buckets_held`` (taken
    after their previous holder let go)."""
    return {node: row[column] for node, row in status(client, crawl_id)["nodes"].items()}


def responses(stats):
    return stats.get("downloader/response_count", 0)


def test_three_nodes_fetch_every_page_exactly_once(tmp_path, web_server, redis_crawl, redis_url):
    client, crawl_id = redis_crawl
    web = generate_web(
        12,
        25,
        seed=5,
        n_seeds=3,
        links_per_page=6,
        host_profiles=[HostProfile(connect_delay=0.002, response_delay=0.02)] * 12,
    )
    server = web_server(web)
    nodes = [Node(tmp_path, f"n{i}", server, redis_url, crawl_id) for i in range(3)]
    stats = [node.finished() for node in nodes]

    counts = fetched(server)
    assert counts == {page: 1 for page in web.reachable()}
    server_stats = server.stats()
    assert server_stats.overlapping_requests() == 0
    assert max(server_stats.max_concurrent_requests_per_host().values()) == 1
    assert sum(responses(s) for s in stats) == len(web.reachable())
    assert sum(s["twolevel/redis/routed_out"] for s in stats) > 0  # cross URLs went through
    assert sum(s["twolevel/redis/routed_in"] for s in stats) > 0
    assert all(s["twolevel/redis/buckets_taken"] > 0 for s in stats)

    # The crawl stays in Redis: a node started afterwards fetches nothing twice...
    again = Node(tmp_path, "again", server, redis_url, crawl_id).finished()
    assert responses(again) == 0
    assert fetched(server) == {page: 1 for page in web.reachable()}
    # ...until `scrapy twolevel reset` clears it; `status` shows it before and after.
    setting = f"TWOLEVEL_REDIS_URL={redis_url}"
    before = twolevel_command("status", crawl_id, setting, "--json")
    assert json.loads(before)["seen_keys"] == len(web.reachable())
    assert json.loads(before)["pending"] == 0
    assert json.loads(before)["nodes"] == {}  # all left
    assert "deleted" in twolevel_command("reset", crawl_id, setting)
    assert not list(client.scan_iter(f"twolevel:{crawl_id}:*"))
    assert "no nodes" in twolevel_command("status", crawl_id, setting)


def test_plain_start_urls_are_fetched_once_by_all_nodes_and_restarts(
    tmp_path, web_server, redis_crawl, redis_url
):
    """Scrapy makes start_urls dont_filter: each node used to fetch every start page, and
    every restart again (a chaos run fetched 114 start pages twice)."""
    _client, crawl_id = redis_crawl
    web = slow_web(hosts=8, pages=10, seed=9)
    server = web_server(web)
    plain = {"SPIDER_MIDDLEWARES": {"crawl_helpers.DontFilterStarts": 0}}
    nodes = [Node(tmp_path, f"n{i}", server, redis_url, crawl_id, **plain) for i in range(2)]
    for node in nodes:
        node.finished()
    assert fetched(server) == {page: 1 for page in web.reachable()}
    restarted = Node(tmp_path, "restarted", server, redis_url, crawl_id, **plain).finished()
    assert responses(restarted) == 0
    assert fetched(server) == {page: 1 for page in web.reachable()}


def twolevel_command(action, crawl_id, setting, *args):
    scrapy = Path(sys.executable).with_name("scrapy")
    proc = subprocess.run(
        [str(scrapy), "twolevel", action, "--crawl-id", crawl_id, *args, "-s", setting],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_node_started_mid_crawl_takes_a_share(tmp_path, web_server, redis_crawl, redis_url):
    client, crawl_id = redis_crawl
    web = slow_web()
    server = web_server(web)
    first = start_one_by_one(tmp_path, ["n0", "n1"], server, redis_url, crawl_id)
    # n1 holds its half (n0 drained and released it), so both give what the newcomer takes.
    half = {"n0": BUCKETS // 2, "n1": BUCKETS // 2}
    wait_until(lambda: buckets(client, crawl_id, "buckets_held") == half, "the hand-over to n1")
    wait_until(lambda: server.stats().total.responses_total >= 60, "60 responses")
    server.hold()
    late = Node(tmp_path, "late", server, redis_url, crawl_id)
    joins_while_held(server, late)
    stats = [node.finished() for node in first]
    late_stats = late.finished()

    assert fetched(server) == {page: 1 for page in web.reachable()}
    assert server.stats().overlapping_requests() == 0
    # The newcomer's share in the table is floor(M / 3) buckets...
    assert f"the table gives it {BUCKETS // 3} of {BUCKETS} buckets" in late.log()
    # ...given up by the two others, after the floor(M / 2) the first gave the second.
    # (At the crawl's end the first node to leave releases its buckets, uncounted, and a
    # node still running takes them: `taken` may exceed the share, `given` may not.)
    assert late_stats["twolevel/redis/buckets_taken"] >= BUCKETS // 3
    given = sum(s.get("twolevel/redis/buckets_given", 0) for s in stats)
    assert given == BUCKETS // 2 + BUCKETS // 3
    # ...with the requests already queued in them, and fetches its share.
    assert late_stats["twolevel/redis/loaded"] > 0
    assert responses(late_stats) > 0


def test_rebalancing_by_load_moves_buckets_without_a_double_fetch(
    tmp_path, web_server, redis_crawl, redis_url
):
    _, crawl_id = redis_crawl
    web = slow_web(seed=10)
    server = web_server(web)
    nodes = start_one_by_one(
        tmp_path,
        ["n0", "n1"],
        server,
        redis_url,
        crawl_id,
        TWOLEVEL_REBALANCE_INTERVAL=0.5,
        TWOLEVEL_REBALANCE_TOLERANCE=0,  # move whenever a bucket fits in the gap
    )
    stats = [node.finished() for node in nodes]

    assert fetched(server) == {page: 1 for page in web.reachable()}
    server_stats = server.stats()
    assert server_stats.overlapping_requests() == 0
    assert max(server_stats.max_concurrent_requests_per_host().values()) == 1
    # The leader (n0, the first by id) moved buckets while the crawl ran, through
    # hand-overs: beyond the join's floor(M / 2), held buckets were given up. (Not one per
    # move: a bucket moved back before its new holder took it was never held there.)
    moves = stats[0]["twolevel/redis/rebalanced"]
    assert moves > 0 and stats[1]["twolevel/redis/rebalanced"] == 0
    given = sum(s.get("twolevel/redis/buckets_given", 0) for s in stats)
    assert BUCKETS // 2 < given <= BUCKETS // 2 + moves
    assert "Rebalanced the crawl by pending requests" in nodes[0].log()


def test_graceful_leave_hands_buckets_over(tmp_path, web_server, redis_crawl, redis_url):
    client, crawl_id = redis_crawl
    web = slow_web(seed=8)
    server = web_server(web)
    server.hold()  # until the leaver node has joined: it needs 20 responses before the end
    stay = start_one_by_one(tmp_path, ["n0", "n1"], server, redis_url, crawl_id)
    leaver = Node(
        tmp_path,
        "leaver",
        server,
        redis_url,
        crawl_id,
        EXTENSIONS={"crawl_helpers.SignalAfterResponses": 1},
        SIGNAL_AFTER_RESPONSES="20,SIGINT",  # Ctrl-C: Scrapy's graceful stop
    )
    joins_while_held(server, leaver)
    assert leaver.wait() == 0, leaver.log()[-3000:]
    left = leaver.stats()
    # (Asked to leave after 40 responses, on a loaded CI machine the leaver once finished
    # its crawl, reason "finished", before its 40th: now 20.)
    assert left["finish_reason"] == "shutdown"
    # The leaver handed its buckets over as it left: the two that stay hold every one.
    # (Read now, from the table: at the crawl's end the first of them to leave hands its
    # buckets to the other too, so their stats cannot tell.)
    assert buckets(client, crawl_id) == {"n0": BUCKETS // 2, "n1": BUCKETS - BUCKETS // 2}
    stats = [node.finished() for node in stay]

    assert set(fetched(server)) == web.reachable()
    # Scrapy finishes the requests in progress before closing; the leaver commits them,
    # so nothing is fetched twice.
    assert refetches(fetched(server)) == 0
    assert server.stats().overlapping_requests() == 0
    assert all(s["twolevel/redis/buckets_taken"] > 0 for s in stats)
    assert responses(left) >= 20


def test_sigkill_mid_crawl_loses_nothing(tmp_path, web_server, redis_crawl, redis_url):
    client, crawl_id = redis_crawl
    web = slow_web(seed=9)
    server = web_server(web)
    server.hold()  # until the victim node has joined: it needs 40 responses before the end
    stay = start_one_by_one(tmp_path, ["n0", "n1"], server, redis_url, crawl_id)
    victim = Node(
        tmp_path,
        "victim",
        server,
        redis_url,
        crawl_id,
        EXTENSIONS={"crawl_helpers.KillAfterResponses": 1},
        KILL_AFTER_RESPONSES=40,
        LEASES_FILE=str(tmp_path / "victim.leases"),
    )
    joins_while_held(server, victim)
    assert victim.wait() == -signal.SIGKILL
    # Reaped once its heartbeat expired: the survivors hold every bucket (read from the
    # table now; at the crawl's end the first survivor to leave hands its own over).
    wait_until(lambda: set(buckets(client, crawl_id)) == {"n0", "n1"}, "the victim to be reaped")
    assert sum(buckets(client, crawl_id).values()) == BUCKETS
    stats = [node.finished() for node in stay]

    counts = fetched(server)
    assert set(counts) == web.reachable()  # no page lost
    # Fetched again at most: what the victim had handed out without committing its end
    # (in flight, being parsed, or finished since its last commit), counted as it died.
    outstanding = json.loads((tmp_path / "victim.leases").read_text())["leases"]
    assert refetches(counts) <= outstanding
    assert server.stats().overlapping_requests() == 0
    assert sum(s["twolevel/redis/reaped"] for s in stats) == 1


def test_sigstop_past_ttl_loses_buckets_and_rejoins(tmp_path, web_server, redis_crawl, redis_url):
    client, crawl_id = redis_crawl
    web = slow_web(seed=10)
    server = web_server(web)
    server.hold()  # until the paused node has joined: it needs 40 responses before the end
    stay = start_one_by_one(tmp_path, ["n0", "n1"], server, redis_url, crawl_id)
    paused = Node(
        tmp_path,
        "paused",
        server,
        redis_url,
        crawl_id,
        EXTENSIONS={"crawl_helpers.SignalAfterResponses": 1},
        SIGNAL_AFTER_RESPONSES="40,SIGSTOP",
        LEASES_FILE=str(tmp_path / "paused.leases"),
    )
    joins_while_held(server, paused)
    wait_until(lambda: _process_state(paused.proc.pid) == "T", "the node to stop itself")
    wait_until(lambda: "paused" not in buckets(client, crawl_id), "the paused node to be reaped")
    paused.proc.send_signal(signal.SIGCONT)
    stats = [node.finished() for node in stay]
    late = paused.finished()

    counts = fetched(server)
    at_pause = json.loads((tmp_path / "paused.leases").read_text())
    assert set(counts) == web.reachable()
    assert refetches(counts) <= at_pause["leases"]
    # A frozen process finishes the sends it had started when it wakes up: a request
    # already in its downloader at the pause may reach a host its new holder is fetching
    # (docs/distributed.rst, "Guarantees and limits"). Nothing else may overlap.
    assert server.stats().overlapping_requests() <= at_pause["downloading"]
    assert sum(s["twolevel/redis/reaped"] for s in stats) == 1
    # Woken up, it learnt it had been reaped: its requests in flight were dropped, not
    # committed (their pages belong to the new holders), and it joined again.
    assert late["twolevel/redis/rejoined"] == 1
    assert late["twolevel/redis/leases_dropped"] >= 1
    assert "This node was reaped" in paused.log()


def _process_state(pid):
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@pytest.mark.long
def test_redis_lost_mid_crawl_is_retried_and_loses_nothing(tmp_path, web_server):
    """A private Redis (the shared one serves other tests) is shut down mid-crawl, with its
    data saved, and started again: the node says so once, retries, and finishes."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data_dir = tmp_path / "redis"
    data_dir.mkdir()

    def start_redis():
        return start_private_redis(data_dir, port)

    web = slow_web(seed=11)
    server = web_server(web)
    redis_proc, client = start_redis()
    try:
        solo = Node(tmp_path, "solo", server, f"redis://127.0.0.1:{port}/0", "lost")
        wait_until(lambda: server.stats().total.responses_total >= 40, "40 responses")
        client.shutdown(save=True)
        redis_proc.wait(timeout=30)
        wait_until(lambda: "Cannot reach Redis" in solo.log(), "the node to notice")
        redis_proc, client = start_redis()
        stats = solo.finished()
    finally:
        redis_proc.kill()
        redis_proc.wait()

    counts = fetched(server)
    assert counts == {page: 1 for page in web.reachable()}
    assert solo.log().count("Cannot reach Redis at TWOLEVEL_REDIS_URL") == 1
    assert "reachable again" in solo.log()
    assert stats["twolevel/redis/sync_errors"] >= 1


def test_connections_dropped_every_half_second_lose_nothing(tmp_path, web_server):
    """The fault suite's dropped connections: a private Redis kills every client
    connection (CLIENT KILL TYPE normal) twice a second while two nodes crawl, so ticks
    fail at every step, after their commits too. Judged by the server: every page once,
    never two requests at a host, both nodes end by themselves."""

    redis_proc, client = start_private_redis(tmp_path / "redis")
    port = client.connection_pool.connection_kwargs["port"]
    web = slow_web(hosts=8, pages=20, seed=13)
    server = web_server(web)
    stop = threading.Event()
    kills = []

    def killer():
        while not stop.wait(0.5):  # the fault's cadence, not a synchronisation
            kills.append(client.execute_command("CLIENT KILL TYPE normal SKIPME yes"))

    thread = threading.Thread(target=killer, daemon=True)
    nodes = []
    try:
        url = f"redis://127.0.0.1:{port}/0"
        nodes = [Node(tmp_path, f"k{i}", server, url, "dropped") for i in range(2)]
        thread.start()
        stats = [node.finished() for node in nodes]
    finally:
        stop.set()
        thread.join()
        for node in nodes:  # a node left running would outlive the test
            if node.proc.poll() is None:
                node.proc.kill()
                node.proc.wait()
        redis_proc.kill()
        redis_proc.wait()
    assert sum(kills) > 0  # connections were dropped while they crawled
    assert fetched(server) == {page: 1 for page in web.reachable()}
    assert max(server.stats().max_concurrent_requests_per_host().values()) == 1
    assert all(s["finish_reason"] == "finished" for s in stats)


def test_redis_paused_past_the_ttl_loses_nothing_and_keeps_politeness(tmp_path, web_server):
    """The fault suite's paused Redis: CLIENT PAUSE for 1.5 ttl while two nodes crawl, so
    every alive key expires and, once Redis answers again, the nodes may reap each other
    before they beat. Judged by the server: no page lost, never two requests at a host,
    re-fetches only of the leases a reaped node dropped, both nodes end by themselves."""

    redis_proc, client = start_private_redis(tmp_path / "redis")
    port = client.connection_pool.connection_kwargs["port"]
    web = slow_web(hosts=8, pages=20, seed=17)
    server = web_server(web)
    try:
        url = f"redis://127.0.0.1:{port}/0"
        nodes = [Node(tmp_path, f"p{i}", server, url, "paused") for i in range(2)]
        wait_until(lambda: server.stats().total.responses_total >= 30, "30 responses")
        client.execute_command("CLIENT", "PAUSE", int(TTL * 1.5 * 1000), "ALL")
        stats = [node.finished() for node in nodes]
    finally:
        redis_proc.kill()
        redis_proc.wait()
    counts = fetched(server)
    assert set(counts) == web.reachable()  # nothing lost
    assert max(server.stats().max_concurrent_requests_per_host().values()) == 1
    held_back = sum(s.get("twolevel/redis/held_back", 0) for s in stats)
    assert held_back > 0  # the nodes stopped handing out requests while Redis was away
    # A node reaped on the way back drops its leases: only those may be fetched again.
    dropped = sum(s.get("twolevel/redis/leases_dropped", 0) for s in stats)
    assert refetches(counts) <= dropped, (refetches(counts), dropped)


def test_redis_restarted_empty_stops_every_node_with_a_reason(tmp_path, web_server):
    """The fault suite's Redis that loses its data (restarted without persistence): the
    nodes must not start the crawl afresh under its old id (every page fetched again);
    each stops with twolevel_redis_state_lost, and writes nothing to the new Redis."""
    data_dir = tmp_path / "redis"
    redis_proc, client = start_private_redis(data_dir)
    port = client.connection_pool.connection_kwargs["port"]
    web = slow_web(hosts=8, pages=20, seed=19)
    server = web_server(web)
    try:
        url = f"redis://127.0.0.1:{port}/0"
        nodes = start_one_by_one(tmp_path, ["e0", "e1"], server, url, "emptied")
        wait_until(lambda: server.stats().total.responses_total >= 30, "30 responses")
        client.shutdown(nosave=True)
        redis_proc.wait(timeout=30)
        redis_proc, client = start_private_redis(data_dir, port)  # empty: --save ""
        for node in nodes:
            assert node.wait() == 0, node.log()[-3000:]
        reasons = [node.stats()["finish_reason"] for node in nodes]
        left = sorted(k.decode() for k in client.scan_iter("twolevel:emptied:*"))
    finally:
        redis_proc.kill()
        redis_proc.wait()
    assert reasons == ["twolevel_redis_state_lost"] * 2
    assert all("gone from Redis" in node.log() for node in nodes)
    assert left == []  # no fresh crawl was started under the old id
    assert max(fetched(server).values()) == 1  # nothing fetched again


def test_wait_for_work_keeps_an_idle_node_open(tmp_path, web_server, redis_crawl, redis_url):
    _, crawl_id = redis_crawl
    web = generate_web(3, 5, seed=4)
    server = web_server(web)
    waiting = Node(
        tmp_path,
        "waiting",
        server,
        redis_url,
        crawl_id,
        TWOLEVEL_WAIT_FOR_WORK=3.0,
        EXTENSIONS={"crawl_helpers.FetchLog": 0},
        FETCH_LOG=str(tmp_path / "fetched.log"),
    )
    stats = waiting.finished()
    assert fetched(server) == {page: 1 for page in web.reachable()}
    log = (tmp_path / "fetched.log").read_text().splitlines()
    last_fetch = max(float(line.split()[0]) for line in log)
    finished = datetime.fromisoformat(stats["finish_time"]).timestamp()
    assert finished - last_fetch >= 3.0  # out of work, it waited for more before closing


def test_a_redis_that_evicts_keys_when_full_is_refused(tmp_path):
    """An evicted queue or seen log loses pages without a trace, and volatile-* policies
    evict the nodes' heartbeat keys first: a private Redis (the shared one serves other
    tests) with a memory cap and an evicting policy stops the crawl before it starts."""
    options = ("--maxmemory", "100mb", "--maxmemory-policy", "volatile-lru")
    server, client = start_private_redis(tmp_path / "redis", options=options)
    port = client.connection_pool.connection_kwargs["port"]
    try:
        proc = scrapy_in_project(
            "crawl", "testweb", "-s", "TWOLEVEL_TESTWEB_HOSTS=3",
            "-s", "TWOLEVEL_TESTWEB_PAGES_PER_HOST=3",
            "-s", f"TWOLEVEL_REDIS_URL=redis://127.0.0.1:{port}/0",
            timeout=120,
        )  # fmt: skip
    finally:
        server.kill()
        server.wait()
    assert proc.returncode != 0
    assert "evicts keys when full" in last_line(proc.stderr)
    assert "maxmemory-policy volatile-lru" in last_line(proc.stderr)
    assert not any(word in proc.stderr for word in CASCADE), proc.stderr[-3000:]
