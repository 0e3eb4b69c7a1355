"""Running crawls in processes (test-web crawls, the example project's ``scrapy`` commands,
nodes of a distributed crawl, a crawl with its live view), and components those crawls load.

The components (middlewares, extensions) are found by the crawl through ``PYTHONPATH``,
which :func:`crawl_process` and :class:`Node` point at this folder.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

from helpers import wait_until
from scrapy.exceptions import IgnoreRequest

from scrapy_twolevel._engine import requests_in_downloader, requests_in_progress, wake_engine
from scrapy_twolevel.testweb.process import ServerProcess
from scrapy_twolevel.testweb.spider import CrawlResult
from scrapy_twolevel.testweb.web import HostProfile, generate_web

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent / "example_project"

#: The three components a crash-safe crawl runs with (tests/test_crash.py, test_disk_faults.py).
SAFE = {
    "SCHEDULER": "scrapy_twolevel.scheduler.TwoLevelScheduler",
    "DOWNLOADER_MIDDLEWARES": {"scrapy_twolevel.middleware.HostMetricsMiddleware": 950},
    "DUPEFILTER_CLASS": "scrapy_twolevel.dupefilter.SeenCacheDupeFilter",
}


def free_port():
    """A TCP port free on loopback now (for a crawl that must be resumed on the same URLs)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def crawl_process(
    tmp_path,
    web,
    settings,
    *,
    port=0,
    interrupt_after=None,
    extra_seeds=(),
    timeout=120,
    spider=None,
):
    """Run ``python -m scrapy_twolevel.testweb crawl`` on ``web``; return (process, output).

    The test web and Scrapy share one reactor in the child, over real loopback sockets.
    """
    web_file = tmp_path / f"web-{os.urandom(4).hex()}.json"
    web_file.write_text(web.to_json())
    out = tmp_path / f"result-{os.urandom(4).hex()}.json"
    cmd = [sys.executable, "-m", "scrapy_twolevel.testweb", "crawl", "--web", str(web_file)]
    cmd += ["--output", str(out), "--port", str(port)]
    if spider is not None:
        cmd += ["--spider", spider]
    if interrupt_after is not None:
        cmd += ["--interrupt-after", str(interrupt_after)]
    for url in extra_seeds:
        cmd += ["--extra-seed", url]
    for name, value in settings.items():
        cmd += ["--set", f"{name}={json.dumps(value)}"]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
    }
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    return proc, out


def crawl(tmp_path, web, settings, **kwargs) -> CrawlResult:
    """Run one crawl (see :func:`crawl_process`); it must succeed. Return its result."""
    proc, out = crawl_process(tmp_path, web, settings, **kwargs)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return CrawlResult.from_dict(json.loads(out.read_text()))


def read_log(path):
    """``[(time, url), ...]`` from a :class:`FetchLog` file."""
    rows = []
    for line in path.read_text().splitlines():
        stamp, url = line.split(" ", 1)
        rows.append((float(stamp), url))
    return rows


def scrapy_in_project(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """``scrapy ARGS`` in the example project (``scrapy crawl news``, ``scrapy recrawl
    train``, ...), as a user runs it; its output captured."""
    return subprocess.run(
        [str(Path(sys.executable).with_name("scrapy")), *args],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ),
    )


#: What start-up failures' cascades used to end with, or put in the middle, before the real
#: message (tests/test_startup.py).
CASCADE = ("Engine slot not assigned", "DispatcherKeyError", "Scraper slot not assigned")


def last_line(text: str) -> str:
    return [line for line in text.splitlines() if line.strip()][-1]


def scrapy_crawl_command(spider, settings):
    """``python -m scrapy.cmdline crawl SPIDER -s NAME=VALUE ...`` (values JSON unless a
    string), and the environment that finds the example project and these components."""
    cmd = [sys.executable, "-m", "scrapy.cmdline", "crawl", spider]
    for key, value in settings.items():
        cmd += ["-s", f"{key}={value if isinstance(value, str) else json.dumps(value)}"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), str(PROJECT)])}
    return cmd, env


# -- a distributed crawl: nodes, each a `scrapy crawl` process, on one Redis ---------------

#: A node's TWOLEVEL_NODE_TTL: how long a silent node keeps its buckets.
TTL = 4.0
SYNC_INTERVAL = 0.05
CONCURRENCY = 4
RESPONSE_DELAY = 0.1


def slow_web(hosts=16, pages=30, seed=7):
    """A web slow enough (0.1 s per response) for nodes to join and fail mid-crawl."""
    return generate_web(
        hosts,
        pages,
        seed=seed,
        n_seeds=4,
        links_per_page=6,
        host_profiles=[HostProfile(connect_delay=0.002, response_delay=RESPONSE_DELAY)] * hosts,
    )


#: Every node process started by the running test: the ``reap_nodes`` fixture (conftest)
#: kills those still running when the test ends, so a failed test leaves none behind.
STARTED_NODES: list[Node] = []


class Node:
    """One ``scrapy crawl testweb`` process of the example project, as a node of a crawl
    (``spider``: another of its spiders; ``server=None``: the settings name the site)."""

    def __init__(
        self,
        tmp_path,
        name,
        server,
        redis_url,
        crawl_id,
        spider="testweb",
        env=None,
        piped_log=False,
        **settings,
    ):
        """``env``: more environment variables; ``piped_log``: the log reaches its file
        through a pipe (written by this process), so a file size limit set inside the
        node (:class:`DiskFull`) does not cut it."""
        self.name = name
        self.stats_file = tmp_path / f"{name}.stats.json"
        self.log_file = tmp_path / f"{name}.log"
        extensions = {"crawl_helpers.StatsFile": 0, **settings.pop("EXTENSIONS", {})}
        if server is not None:
            settings["TWOLEVEL_TESTWEB_SEEDS"] = ",".join(server.seeds)
        values = {
            "EXTENSIONS": extensions,  # no embedded test web: every node crawls `server`
            "STATS_FILE": str(self.stats_file),
            "TWOLEVEL_REDIS_URL": redis_url,
            "TWOLEVEL_CRAWL_ID": crawl_id,
            "TWOLEVEL_NODE_ID": name,
            "TWOLEVEL_NODE_TTL": TTL,
            "TWOLEVEL_SYNC_INTERVAL": SYNC_INTERVAL,
            "CONCURRENT_REQUESTS": CONCURRENCY,
            "LOG_LEVEL": "INFO",
            # Buckets move by joins and leaves only, so tests can count them (the
            # rebalance test turns it on).
            "TWOLEVEL_REBALANCE_INTERVAL": 0,
            **settings,
        }
        cmd, env_base = scrapy_crawl_command(spider, values)
        env = {**env_base, **(env or {})}
        self.copier = None
        with open(self.log_file, "w") as log:
            self.proc = subprocess.Popen(
                cmd,
                cwd=PROJECT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE if piped_log else log,
                env=env,
            )
        STARTED_NODES.append(self)
        if piped_log:
            self.copier = threading.Thread(target=self._copy_log, daemon=True)
            self.copier.start()

    def _copy_log(self):
        with open(self.log_file, "ab", buffering=0) as log:
            for line in self.proc.stderr:
                log.write(line)

    def wait(self, timeout=120):
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.reap()  # here: not left for a later test's garbage collection
            raise AssertionError(f"{self.name} did not finish:\n{self.log()[-3000:]}") from None
        self._close_log()
        return code

    def log(self):
        return self.log_file.read_text()

    def reap(self):
        """Kill the process if it still runs, and wait for it."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._close_log()

    def _close_log(self):
        """With ``piped_log``: the copier has written the whole log; the pipe is closed."""
        if self.copier is not None:
            self.copier.join(timeout=30)
            self.proc.stderr.close()

    def stats(self):
        assert self.stats_file.exists(), f"{self.name} wrote no stats:\n{self.log()[-3000:]}"
        return json.loads(self.stats_file.read_text())

    def finished(self):
        assert self.wait() == 0, self.log()[-3000:]
        stats = self.stats()
        assert stats["finish_reason"] == "finished", stats
        assert "Traceback" not in self.log(), self.log()[-3000:]
        return stats


def fetched(server):
    """How often the test web served each page."""
    return server.stats().fetch_counts()


def refetches(counts):
    return sum(counts.values()) - len(counts)


# -- a crawl with its live view ------------------------------------------------------------


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
    cmd, env = scrapy_crawl_command("testweb", settings)
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


class InternalsProbe:
    """Checks, inside a real crawl, the two Scrapy internals scrapy_twolevel relies on."""

    def __init__(self, crawler):
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def process_request(self, request, spider=None):
        stats = self.crawler.stats
        stats.inc_value("probe/requests")
        active = requests_in_downloader(self.crawler)
        if active is not None and request in active:
            stats.inc_value("probe/in_downloader")
        in_progress = requests_in_progress(self.crawler)
        if in_progress is not None and request in in_progress:
            stats.inc_value("probe/in_progress")
        if wake_engine(self.crawler):
            stats.inc_value("probe/woke_engine")


class PoolKeyProbe:
    """Downloader middleware: counts responses (``probe/pool_direct``) for which Scrapy's
    connection pool holds an idle connection under ``(scheme, host, port, bind address)``, the
    key ``_engine.pooled_connections`` looks up first."""

    def __init__(self, crawler):
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def process_response(self, request, response, spider=None):
        from urllib.parse import urlsplit

        handlers = self.crawler.engine.downloader.handlers._handlers
        pool = handlers["http"]._pool._connections
        parts = urlsplit(request.url)
        server = (b"http", parts.hostname.encode(), parts.port or 80)
        # Scrapy 2.19 adds the bind address ((host, 0) for DOWNLOAD_BIND_ADDRESS's string,
        # or None) to Twisted's key; before, none.
        bind = self.crawler.settings.get("DOWNLOAD_BIND_ADDRESS")
        bind = (bind, 0) if isinstance(bind, str) else bind
        if pool.get((*server, bind)) or pool.get(server):
            self.crawler.stats.inc_value("probe/pool_direct")
        return response


class DropSomePaths:
    """Raises IgnoreRequest before download for paths in DROP_PATHS (like OffsiteMiddleware)."""

    def __init__(self, paths):
        self.paths = set(paths)

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.settings.getlist("DROP_PATHS"))

    def process_request(self, request, spider=None):
        if request.url.split("/", 3)[-1] in self.paths:
            raise IgnoreRequest(f"dropped {request.url}")


class SignalAfterResponses:
    """Extension: send this crawl process SIGNAL_AFTER_RESPONSES = [count, signal name]
    (SIGSTOP, SIGINT, ...) once, after that many responses (and SIGNAL_DELAY seconds more,
    if set): a pause or a graceful stop at a known point of the crawl, decided inside it.
    With LEASES_FILE set, a distributed node first records what it holds
    (:func:`record_leases`)."""

    def __init__(self, count, signame, crawler=None):
        self.count = count
        self.signame = signame
        self.crawler = crawler
        self.seen = 0

    @staticmethod
    def read(settings):
        count, signame = settings.getlist("SIGNAL_AFTER_RESPONSES")
        return int(count), signame

    @classmethod
    def from_crawler(cls, crawler):
        import scrapy.signals

        ext = cls(*cls.read(crawler.settings), crawler)
        crawler.signals.connect(ext.response_received, signal=scrapy.signals.response_received)
        return ext

    def response_received(self, **kwargs):
        self.seen += 1
        if self.seen != self.count:
            return
        delay = self.crawler.settings.getfloat("SIGNAL_DELAY") if self.crawler else 0.0
        if delay:  # a moment between responses: mid-tick, mid-parse, mid-download
            from twisted.internet import reactor

            reactor.callLater(delay, self.fire)
        else:
            self.fire()

    def fire(self):
        import os
        import signal

        record_leases(self.crawler)
        os.kill(os.getpid(), getattr(signal, self.signame))


class KillAfterResponses(SignalAfterResponses):
    """Extension: SIGKILL this crawl process after KILL_AFTER_RESPONSES responses.

    A kill -9 at a known point of the crawl, decided inside the crawl (no sleeping in the
    test): nothing is flushed or closed, as after a crash.
    """

    @staticmethod
    def read(settings):
        return settings.getint("KILL_AFTER_RESPONSES"), "SIGKILL"


class DiskFull:
    """Extension: the JOBDIR file's disk is full from DISK_FULL = [after, until] responses
    (until 0: never freed). A real write failure, without root: RLIMIT_FSIZE is set to the
    size of the file's write-ahead log (or of the one file DISK_FULL_FILE, an absolute
    glob, names), so no write may grow it (nor any file of this process past that size);
    SIGXFSZ is ignored, so writes fail with EFBIG as on a full disk. The counts are
    disk_full/filled and /freed in the crawl's stats."""

    def __init__(self, crawler):
        self.crawler = crawler
        self.after, self.until = (int(x) for x in crawler.settings.getlist("DISK_FULL"))
        self.pattern = crawler.settings.get("DISK_FULL_FILE")  # a glob; None: the JOBDIR's
        self.seen = 0

    @property
    def wal(self):
        if self.pattern is None:
            return Path(self.crawler.settings["JOBDIR"]) / "twolevel" / "frontier.sqlite3-wal"
        (found,) = Path("/").glob(self.pattern.lstrip("/"))
        return found

    @classmethod
    def from_crawler(cls, crawler):
        import scrapy.signals

        ext = cls(crawler)
        crawler.signals.connect(ext.response_received, signal=scrapy.signals.response_received)
        return ext

    def response_received(self, **kwargs):
        import resource
        import signal

        self.seen += 1
        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        if self.seen == self.after:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (self.wal.stat().st_size, hard))
            self.crawler.stats.set_value("disk_full/filled", self.seen)
        elif self.seen == self.until:
            resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
            self.crawler.stats.set_value("disk_full/freed", self.seen)


class DontFilterStarts:
    """Spider middleware: start requests with ``dont_filter=True``, as Scrapy's own
    ``Spider.start()`` makes them from plain ``start_urls``."""

    async def process_start(self, start):
        async for item in start:
            yield item.replace(dont_filter=True) if hasattr(item, "dont_filter") else item


class UnencodableSameHost:
    """Spider middleware: every other request a callback yields for its response's own
    host carries an object in its meta, so it cannot be encoded (no copy in Redis, in the
    distributed mode); counted in the stat ``unencodable/made``."""

    def __init__(self, stats):
        self.stats = stats
        self.n = 0

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.stats)

    async def process_spider_output(self, response, result, spider=None):
        from urllib.parse import urlsplit

        host = urlsplit(response.url).hostname
        async for item in result:
            if hasattr(item, "dont_filter") and urlsplit(item.url).hostname == host:
                self.n += 1
                if self.n % 2:
                    item.meta["unencodable"] = object()
                    self.stats.inc_value("unencodable/made")
            yield item


def record_leases(crawler):
    """Write to LEASES_FILE (if set), as JSON: ``leases``, how many requests the distributed
    node has handed out without committing their end (what the other nodes fetch again if
    it dies now), and ``downloading``, how many are inside its downloader (what it may
    still send after a pause)."""
    if crawler is None or not crawler.settings.get("LEASES_FILE"):
        return
    from scrapy_twolevel.view import view_of

    view = view_of(crawler)
    status = None if view is None else view.cluster_status()
    assert status is not None, "LEASES_FILE is for a node of a distributed crawl"
    downloading = len(requests_in_downloader(crawler) or ())
    record = {"leases": status["leases_outstanding"], "downloading": downloading}
    Path(crawler.settings["LEASES_FILE"]).write_text(json.dumps(record))


class StatsFile:
    """Extension: write the crawl's stats as JSON to STATS_FILE when the spider closes."""

    def __init__(self, crawler, path):
        self.crawler = crawler
        self.path = path

    @classmethod
    def from_crawler(cls, crawler):
        import scrapy.signals

        ext = cls(crawler, crawler.settings["STATS_FILE"])
        crawler.signals.connect(ext.spider_closed, signal=scrapy.signals.spider_closed)
        return ext

    def spider_closed(self, spider, reason):
        stats = dict(self.crawler.stats.get_stats())
        stats["finish_reason"] = reason
        Path(self.path).write_text(json.dumps(stats, default=str))


class FetchLog:
    """Extension: append ``<time> <url>`` for every response downloaded (redirects
    included) to FETCH_LOG, unbuffered.

    What a crawl fetched survives a SIGKILL of the crawl (the server's counts die with
    it). Enable it before :class:`KillAfterResponses` so the fatal response is logged.
    """

    def __init__(self, path):
        import os

        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    @classmethod
    def from_crawler(cls, crawler):
        import scrapy.signals

        ext = cls(crawler.settings["FETCH_LOG"])
        crawler.signals.connect(ext.response_downloaded, signal=scrapy.signals.response_downloaded)
        return ext

    def response_downloaded(self, response, **kwargs):
        import os
        import time

        os.write(self.fd, f"{time.time():.6f} {response.url}\n".encode())


class TagTopicByHost:
    """Spider middleware: ``meta["twolevel_topic"]`` from the request's host
    (TOPIC_OF_HOST: address -> topic), on start requests and on the callback's output."""

    def __init__(self, topic_of_host):
        self.topic_of_host = topic_of_host

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.settings.getdict("TOPIC_OF_HOST"))

    def _tag(self, item):
        from urllib.parse import urlsplit

        from scrapy import Request

        if isinstance(item, Request) and "twolevel_topic" not in item.meta:
            topic = self.topic_of_host.get(urlsplit(item.url).hostname)
            if topic is not None:
                item.meta["twolevel_topic"] = topic
        return item

    async def process_start(self, start):
        async for item in start:
            yield self._tag(item)

    async def process_spider_output(self, response, result, spider=None):
        async for item in result:
            yield self._tag(item)


class FlagHomePagesDropItems:
    """Spider middleware (nearest the spider): drops the callback's items, and marks home
    pages (path ``/``) relevant with ``response.meta["twolevel_relevant"]`` instead."""

    async def process_spider_output(self, response, result, spider=None):
        from urllib.parse import urlsplit

        from scrapy import Request

        if urlsplit(response.url).path == "/":
            response.meta["twolevel_relevant"] = True
        async for item in result:
            if isinstance(item, Request):
                yield item


class CountRequests:
    """Spider middleware: counts in ``count/<COUNT_REQUESTS_STAT>`` the requests a
    callback's output carries where it is enabled (its order says where)."""

    def __init__(self, stats, name):
        self.stats = stats
        self.key = f"count/{name}"

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.stats, crawler.settings.get("COUNT_REQUESTS_STAT", "requests"))

    async def process_spider_output(self, response, result, spider=None):
        async for item in result:
            if hasattr(item, "dont_filter"):
                self.stats.inc_value(self.key)
            yield item


class CountDropped:
    """Extension: counts ``request_dropped`` signals in the stat ``count/request_dropped``."""

    def __init__(self, stats):
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler):
        import scrapy.signals

        ext = cls(crawler.stats)
        crawler.signals.connect(ext.dropped, signal=scrapy.signals.request_dropped)
        return ext

    def dropped(self, request, spider):
        self.stats.inc_value("count/request_dropped")


class DontFilterHomePages:
    """Spider middleware: every link a callback yields to the home page of a host in
    DONT_FILTER_HOSTS (addresses) is ``dont_filter``, so each is fetched again (counted in
    ``count/dont_filter``)."""

    def __init__(self, stats, hosts):
        self.stats = stats
        self.hosts = set(hosts)

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.stats, crawler.settings.getlist("DONT_FILTER_HOSTS"))

    async def process_spider_output(self, response, result, spider=None):
        from urllib.parse import urlsplit

        async for item in result:
            if hasattr(item, "dont_filter"):
                url = urlsplit(item.url)
                if url.hostname in self.hosts and url.path in ("", "/"):
                    self.stats.inc_value("count/dont_filter")
                    item = item.replace(dont_filter=True)
            yield item


class FilesForPages:
    """Spider middleware: each test-web page yields an item whose ``file_urls`` are
    ``FILES_PER_PAGE`` (default 2) files on its host, for the Files pipeline to download
    (out of band: through ``engine.download_async``, not the scheduler); with
    ``FILES_AS_IMAGES``, ``image_urls`` of PNG images for the Images pipeline."""

    def __init__(self, per_page, images):
        self.per_page = per_page
        self.field, self.suffix = ("image_urls", ".png") if images else ("file_urls", ".bin")

    @classmethod
    def from_crawler(cls, crawler):
        settings = crawler.settings
        return cls(settings.getint("FILES_PER_PAGE", 2), settings.getbool("FILES_AS_IMAGES"))

    async def process_spider_output(self, response, result, spider=None):
        from urllib.parse import urlsplit

        from scrapy_twolevel.testweb.web import FILES_PREFIX

        async for item in result:
            yield item
        if response.status == 200 and "html" in response.headers.get("Content-Type", b"").decode():
            url = urlsplit(response.url)
            name = url.path.strip("/").replace("/", "-") or "index"
            base = f"{url.scheme}://{url.netloc}{FILES_PREFIX}{name}"
            yield {self.field: [f"{base}-{k}{self.suffix}" for k in range(self.per_page)]}


class EngineStatusProbe:
    """Extension: at the 5th response, Scrapy's own ``get_engine_status`` (what ``est()``
    in the telnet console prints); each check's value goes into stats as ``est/<check>``."""

    def __init__(self, crawler):
        self.crawler = crawler
        self.responses = 0

    @classmethod
    def from_crawler(cls, crawler):
        import scrapy.signals

        ext = cls(crawler)
        crawler.signals.connect(ext.response, signal=scrapy.signals.response_received)
        return ext

    def response(self, **kwargs):
        from scrapy.utils.engine import get_engine_status

        self.responses += 1
        if self.responses == 5:
            for check, value in get_engine_status(self.crawler.engine):
                self.crawler.stats.set_value(f"est/{check}", str(value))


class HeaderFingerprinter:
    """A project's ``RequestFingerprinter`` subclass: one page per ``Accept-Language``."""

    def __new__(cls, crawler=None):
        from scrapy.utils.request import RequestFingerprinter

        class _Fingerprinter(RequestFingerprinter):
            def fingerprint(self, request):
                lang = request.headers.get("Accept-Language", b"")
                return super().fingerprint(request) + lang

        return _Fingerprinter(crawler)


class TwoLanguages:
    """Spider middleware: each request a callback yields is yielded twice, once per
    ``Accept-Language`` (en, de), both with ``dont_filter`` left off: a fingerprinter that
    counts the header must let both through (``count/languages`` counts the copies)."""

    def __init__(self, stats):
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.stats)

    async def process_spider_output(self, response, result, spider=None):
        async for item in result:
            if hasattr(item, "dont_filter") and b"Accept-Language" not in item.headers:
                for lang in ("en", "de"):
                    self.stats.inc_value("count/languages")
                    yield item.replace(headers={"Accept-Language": lang})
            else:
                yield item


class OpaqueHttpHandler:
    """A download handler that is not Scrapy's HTTP/1.1 one, as a plug-in's would be: it
    downloads through one, kept where the metrics middleware cannot see its connections."""

    lazy = False

    def __init__(self, crawler):
        from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
        from scrapy.utils.misc import build_from_crawler

        self._hidden = build_from_crawler(HTTP11DownloadHandler, crawler)

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    async def download_request(self, request, spider=None):
        return await self._hidden.download_request(request)

    async def close(self):
        await self._hidden.close()


def _async_download_handlers():
    from inspect import iscoroutinefunction

    from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler

    return iscoroutinefunction(HTTP11DownloadHandler.download_request)


if not _async_download_handlers():  # Scrapy 2.13: handlers return Deferreds, with a spider

    class OpaqueHttpHandler(OpaqueHttpHandler):
        def download_request(self, request, spider=None):
            return self._hidden.download_request(request, spider)

        def close(self):
            return self._hidden.close()


class ThroughLocalProxy:
    """Downloader middleware (order below HttpProxyMiddleware's 750): starts Twisted's
    forward proxy on a free loopback port and sends every request through it
    (``meta["proxy"]``); ``count/proxied`` counts them."""

    def __init__(self, crawler):
        from twisted.internet import reactor
        from twisted.web import http, proxy

        class Factory(http.HTTPFactory):
            def buildProtocol(self, addr):
                return proxy.Proxy()

        self.stats = crawler.stats
        self.port = reactor.listenTCP(0, Factory(), interface="127.0.0.1")
        self.url = f"http://127.0.0.1:{self.port.getHost().port}"

    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler)

    def process_request(self, request, spider=None):
        request.meta["proxy"] = self.url
        self.stats.inc_value("count/proxied")


class ManyStarts:
    """A test-web spider whose ``start()`` yields its seeds, then ``MANY_STARTS`` copies of
    each (a query string the server ignores); it notes when ``start()`` ended and when each
    copy's response arrived (``MANY_STARTS_LOG``: JSON at close), and closes itself at the
    first response after ``start()`` ended."""

    @staticmethod
    def spider():  # built lazily: the crawl's process imports Scrapy first
        import time

        import scrapy
        from scrapy.exceptions import CloseSpider

        from scrapy_twolevel.testweb.spider import TestWebSpider

        class ManyStartsSpider(TestWebSpider):
            name = "many_starts"

            async def start(self):
                self.responses, self.start_ended = [], None
                self.start_begun = time.monotonic()
                seeds = list(self.start_urls)
                for i in range(self.settings.getint("MANY_STARTS")):
                    for url in seeds:
                        yield scrapy.Request(f"{url}?copy={i}", callback=self.copy)
                self.start_ended = time.monotonic()

            def copy(self, response):
                self.responses.append(time.monotonic())
                if self.start_ended is not None:
                    raise CloseSpider("start read")

            def closed(self, reason):
                Path(self.settings["MANY_STARTS_LOG"]).write_text(
                    json.dumps(
                        {
                            "start_begun": self.start_begun,
                            "start_ended": self.start_ended,
                            "responses": self.responses,
                        }
                    )
                )

        return ManyStartsSpider


ManyStartsSpider = ManyStarts.spider()


class StallProbe:
    """Downloader middleware after the host metrics one: holds the crawler's event loop
    ``STALL`` seconds (busy, as a long callback does) in the fifth request's
    ``process_request``, after its time started, and records the stall each measurement
    carries (``Measurement.lag``, in ms): the stalled request's (``probe/stalled_lag_ms``)
    with its whole time (``probe/stalled_time_ms``), and measurements whose request still
    holds the middleware's note (``probe/lag_keys_left``)."""

    STALL = 0.5

    def __init__(self, crawler):
        self.crawler = crawler
        self.requests = 0
        self.stalled = None
        self.stalled_at = 0.0

    @classmethod
    def from_crawler(cls, crawler):
        from scrapy_twolevel.signals import host_measured

        probe = cls(crawler)
        crawler.signals.connect(probe.measured, signal=host_measured)
        return probe

    def process_request(self, request, spider=None):
        import time

        self.requests += 1
        if self.requests == 5:
            self.stalled, self.stalled_at = request, time.monotonic()
            end = self.stalled_at + self.STALL
            while time.monotonic() < end:
                pass

    def measured(self, request, measurement=None, **kwargs):
        import time

        from scrapy_twolevel import meta as meta_keys

        stats = self.crawler.stats
        if meta_keys.HEADERS_LAG in request.meta:
            stats.inc_value("probe/lag_keys_left")
        if measurement is None:
            return
        stats.inc_value("probe/measured")
        if request is self.stalled:
            stats.set_value("probe/stalled_lag_ms", round(measurement.lag * 1000))
            took = time.monotonic() - self.stalled_at
            stats.set_value("probe/stalled_time_ms", round(took * 1000))
