"""The fault suite's kill -9 at random moments: nodes with a JOBDIR each are killed and
restarted under the same node id while the crawl goes on.

Real ``scrapy crawl`` processes on the shared Redis, one test web whose server counts are
the judge (see test_distributed_crawl.py). Each kill comes after a drawn number of the
victim's responses plus a drawn delay, so it lands mid-download, mid-parse or mid-tick;
the victim first records its leases (what it handed out and had not committed), the
only pages that may be fetched twice.
"""

from __future__ import annotations

import json
import random
import signal

import pytest
from crawl_helpers import Node, fetched, live_url, refetches, slow_web
from helpers import wait_until

pytestmark = pytest.mark.redis


#: Kills per node id over the run (each restart of a node id gets the next one).
KILLS = {"c0": 2, "c1": 1, "c2": 0}


@pytest.mark.long
def test_kill_9_at_random_moments_and_restarts_under_the_same_id(
    tmp_path, web_server, redis_crawl, redis_url
):
    _client, crawl_id = redis_crawl
    rng = random.Random(2126)
    web = slow_web(hosts=16, pages=40, seed=21)
    server = web_server(web)
    plain = {"crawl_helpers.DontFilterStarts": 0}  # Scrapy's start_urls: dont_filter
    leases = []

    def start(node_id, incarnation):
        settings = {
            "JOBDIR": str(tmp_path / f"job-{node_id}"),  # the same one at every restart
            "TWOLEVEL_NODE_ID": node_id,
            "SPIDER_MIDDLEWARES": plain,
        }
        if incarnation < KILLS[node_id]:
            leases.append(tmp_path / f"{node_id}.{incarnation}.leases")
            settings.update(
                EXTENSIONS={"crawl_helpers.KillAfterResponses": 1},
                KILL_AFTER_RESPONSES=rng.randint(10, 40),
                SIGNAL_DELAY=round(rng.uniform(0.0, 0.25), 3),
                LEASES_FILE=str(leases[-1]),
            )
        name = f"{node_id}.{incarnation}"
        return Node(tmp_path, name, server, redis_url, crawl_id, **settings)

    running = {node_id: start(node_id, 0) for node_id in KILLS}
    incarnations = dict.fromkeys(KILLS, 0)
    finished, killed = [], 0
    while running:
        wait_until(
            lambda: any(n.proc.poll() is not None for n in running.values()),
            "a node to exit",
            timeout=180,
        )
        for node_id, node in list(running.items()):
            code = node.proc.poll()
            if code == -signal.SIGKILL:
                killed += 1
                incarnations[node_id] += 1
                running[node_id] = start(node_id, incarnations[node_id])
            elif code is not None:
                finished.append(node)
                del running[node_id]
    assert killed == sum(KILLS.values())  # every kill came before its node ran out of work
    for node in finished:
        assert node.finished()["finish_reason"] == "finished"

    counts = fetched(server)
    assert set(counts) == web.reachable()  # no page lost
    held = sum(json.loads(path.read_text())["leases"] for path in leases)
    assert refetches(counts) <= held, (refetches(counts), held)
    assert all(counts[page] == 1 for page in web.seeds)  # start pages once, restarts too
    assert server.stats().overlapping_requests() == 0
    assert max(server.stats().max_concurrent_requests_per_host().values()) == 1


def test_a_node_whose_disk_fills_then_frees_loses_nothing(
    tmp_path, web_server, redis_crawl, redis_url
):
    """The disk under a node's files fills mid-crawl and frees later (RLIMIT_FSIZE set to
    the seen keys' file, the one file this mode writes as it crawls: see
    :class:`crawl_helpers.DiskFull`); its JOBDIR is there too. The node keeps its new
    keys in memory, says so, saves them once the disk frees, and the crawl loses
    nothing: every page fetched once, one request per host."""
    _client, crawl_id = redis_crawl
    web = slow_web(hosts=8, pages=30, seed=23)
    server = web_server(web)
    tmp = tmp_path / "tmp-d0"
    tmp.mkdir()
    full = Node(
        tmp_path,
        "d0",
        server,
        redis_url,
        crawl_id,
        env={"TMPDIR": str(tmp)},  # where its seen keys' file is made
        piped_log=True,  # its log is not limited by its file size limit
        JOBDIR=str(tmp / "job"),
        EXTENSIONS={"crawl_helpers.DiskFull": 0},
        DISK_FULL="20,90",
        DISK_FULL_FILE=str(tmp / "twolevel-seen-*.sqlite3-wal"),
    )
    other = Node(tmp_path, "d1", server, redis_url, crawl_id)
    stats = full.finished()
    other.finished()

    assert (stats["disk_full/filled"], stats["disk_full/freed"]) == (20, 90)
    assert stats["twolevel/seen/store_failures"] == 1  # the fault hit, and was reported
    assert "takes writes again" in full.log()
    assert fetched(server) == {page: 1 for page in web.reachable()}
    assert max(server.stats().max_concurrent_requests_per_host().values()) == 1


def lost_at_leave(node, server, web):
    """The pages a node names in its log as dropped when it left (requests that cannot
    be encoded, still queued at a Ctrl-C), and how many it counted."""
    page_of = {web.url(page, server.port): page for page in range(len(web.pages))}
    named = set()
    for line in node.log().splitlines():
        if "were still queued when this node left" in line:
            urls = line.split("link to it again: ", 1)[1].split(". Keep callbacks")[0]
            named |= {page_of[url] for url in urls.split(" and ")[0].split(", ")}
    return named, node.stats().get("twolevel/redis/local_only_lost", 0)


def test_requests_that_cannot_be_encoded_are_not_lost_when_buckets_move(
    tmp_path, web_server, redis_crawl, redis_url
):
    """Half the same-host links carry an object in their meta (no copy in Redis): they
    stay in their node's memory, and a bucket that moves (a node joins mid-crawl, then
    one leaves with Ctrl-C) is released only once they were fetched. Those still queued
    at the Ctrl-C are dropped, counted and named in the leaving node's log: a page is
    missing only if it is one of them (and no other node found a link to it again)."""
    _client, crawl_id = redis_crawl
    web = slow_web(hosts=12, pages=30, seed=29)
    server = web_server(web)
    odd = {"SPIDER_MIDDLEWARES": {"crawl_helpers.UnencodableSameHost": 0}}
    first = Node(tmp_path, "u0", server, redis_url, crawl_id, **odd)
    wait_until(lambda: "Joined crawl" in first.log(), "u0 to join")
    wait_until(lambda: server.stats().total.responses_total >= 40, "40 responses")
    leaver = Node(
        tmp_path,
        "u1",
        server,
        redis_url,
        crawl_id,
        EXTENSIONS={"crawl_helpers.SignalAfterResponses": 1},
        SIGNAL_AFTER_RESPONSES="30,SIGINT",
        **odd,
    )
    stay = first.finished()
    assert leaver.wait() == 0, leaver.log()[-3000:]
    left = leaver.stats()

    assert left["finish_reason"] == "shutdown"  # it left mid-crawl, handing buckets over
    made = stay.get("unencodable/made", 0) + left.get("unencodable/made", 0)
    kept = stay.get("twolevel/redis/kept_local", 0) + left.get("twolevel/redis/kept_local", 0)
    assert made > 0 and kept > 0
    assert stay.get("twolevel/redis/unroutable", 0) + left.get("twolevel/redis/unroutable", 0) == 0
    named, lost = lost_at_leave(leaver, server, web)
    missing = web.reachable() - set(fetched(server))
    assert len(missing) <= lost  # every page lost was counted
    assert len(named) == min(lost, 20)  # and named, up to 20
    assert lost > 20 or missing <= named
    assert max(server.stats().max_concurrent_requests_per_host().values()) == 1


def test_a_node_stopped_with_ctrl_c_names_the_unencodable_requests_it_loses(
    tmp_path, web_server, redis_crawl, redis_url
):
    """Scrapy's graceful stop does not wait for queued requests, and one that cannot be
    encoded has no copy in Redis: a node stopped early drops those it still has queued.
    It counts and names them; a node started later fetches everything else, and those
    it finds links to again, so the pages missing are among the ones named."""
    _client, crawl_id = redis_crawl
    web = slow_web(hosts=6, pages=30, seed=31)
    server = web_server(web)
    odd = {"SPIDER_MIDDLEWARES": {"crawl_helpers.UnencodableSameHost": 0}}
    early = Node(
        tmp_path,
        "w0",
        server,
        redis_url,
        crawl_id,
        EXTENSIONS={"crawl_helpers.SignalAfterResponses": 1},
        SIGNAL_AFTER_RESPONSES="12,SIGINT",
        **odd,
    )
    assert early.wait() == 0, early.log()[-3000:]
    assert early.stats()["finish_reason"] == "shutdown"
    Node(tmp_path, "w1", server, redis_url, crawl_id, **odd).finished()

    named, lost = lost_at_leave(early, server, web)
    missing = web.reachable() - set(fetched(server))
    assert lost > 0  # 12 pages of 6 hosts, half their same-host links unencodable
    assert len(named) == min(lost, 20) and len(missing) <= lost
    assert lost > 20 or missing <= named
    assert max(fetched(server).values()) == 1


def test_the_live_view_of_a_distributed_node_shows_the_bucket_table(
    tmp_path, web_server, redis_crawl, redis_url
):
    """Two nodes with the dashboard on: each node's ``/status.json`` names the crawl and
    the node, and shows the table of its last tick (both nodes, every bucket once)."""
    import urllib.request

    from scrapy_twolevel.distributed.registry import DEFAULT_BUCKETS as BUCKETS

    _client, crawl_id = redis_crawl
    web = slow_web(hosts=8, pages=20, seed=43)
    server = web_server(web)
    live = {
        "EXTENSIONS": {"scrapy_twolevel.live.extension.LiveView": 500},
        "TWOLEVEL_WEB_PORT": 0,
    }
    server.hold()  # until both nodes are in: the crawl cannot end before it is looked at
    nodes = [Node(tmp_path, f"v{i}", server, redis_url, crawl_id, **live) for i in range(2)]
    for node in nodes:
        wait_until(lambda node=node: "Joined crawl" in node.log(), f"{node.name} to join")
    found = {}
    base, token = live_url(nodes[0].log_file)

    def both_in_table():
        with urllib.request.urlopen(f"{base}/status.json?token={token}", timeout=10) as r:
            found["cluster"] = json.loads(r.read())["cluster"]
        return len(found["cluster"]["buckets_owned"]) == 2

    wait_until(both_in_table, "both nodes in v0's table")
    cluster = found["cluster"]
    assert (cluster["crawl_id"], cluster["node"]) == (crawl_id, "v0")
    assert sum(cluster["buckets_owned"].values()) == BUCKETS
    assert 0 <= cluster["buckets_held_here"] <= BUCKETS
    assert cluster["inbox_depth"] >= 0
    assert set(cluster["buckets_moving"]) == {"draining", "loading"}
    server.release()
    for node in nodes:
        node.finished()
    assert fetched(server) == {page: 1 for page in web.reachable()}
