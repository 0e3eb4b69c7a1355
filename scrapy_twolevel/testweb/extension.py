"""Serve the test web inside a normal ``scrapy crawl`` and print a summary at the end.

Used by ``example_project`` (the README's demo): enable :class:`EmbeddedTestWeb` in
``EXTENSIONS`` and the crawl serves a generated web on loopback, seeds
:class:`~.spider.TestWebSpider` with it, and ends with what the *server* saw: pages fetched
(and fetched again), errors, quality gathered, time, connections, politeness.

With ``JOBDIR`` the extension keeps ``JOBDIR/testweb.json``: the port, the web's identity
and one record per run. A resumed crawl serves the same web on the same port, because the
requests waiting in the JOBDIR name it, and its summary counts pages over all runs.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.job import job_dir

from .process import write_atomically
from .web import generate_web

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector

    from .server import TestWebServer

__all__ = [
    "DEFAULTS",
    "STATE_FILE",
    "STATE_FORMAT",
    "SUMMARY_FORMAT",
    "EmbeddedTestWeb",
    "TestWebSettings",
    "load_state",
]

logger = logging.getLogger(__name__)

#: Every setting :class:`EmbeddedTestWeb` reads, with its default: the one list of them.
#: (``TWOLEVEL_TESTWEB_SEEDS`` belongs to the spider, see :data:`.spider.SEEDS_SETTING`.)
DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {
        "TWOLEVEL_TESTWEB_HOSTS": 20,
        "TWOLEVEL_TESTWEB_PAGES_PER_HOST": 30,
        "TWOLEVEL_TESTWEB_SEED": 0,
        "TWOLEVEL_TESTWEB_DELAY_SCALE": 1.0,
        "TWOLEVEL_TESTWEB_PORT": 0,
        "TWOLEVEL_TESTWEB_SUMMARY_FILE": "",
    }
)

#: The extension's file in a JOBDIR.
STATE_FILE = "testweb.json"
#: Format marker of :data:`STATE_FILE`; changed whenever its layout changes.
STATE_FORMAT = "scrapy_twolevel.testweb-state/1"
#: Format marker of the JSON summary written to ``TWOLEVEL_TESTWEB_SUMMARY_FILE``.
SUMMARY_FORMAT = "scrapy_twolevel.testweb-summary/1"


def _read(
    settings: BaseSettings,
    name: str,
    getter: Callable[[str, Any], Any],
    rule: str,
    ok: Callable[[Any], bool],
) -> Any:
    """One typed getter call, with an error that names the setting, the value and the rule."""
    try:
        value = getter(name, DEFAULTS[name])
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be {rule}, got {settings.get(name)!r}") from None
    if not ok(value):
        raise ValueError(f"{name} must be {rule}, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class TestWebSettings:
    """The extension's settings, read and validated once (defaults in :data:`DEFAULTS`)."""

    __test__ = False  # not a pytest test class, despite the name

    hosts: int
    pages_per_host: int
    seed: int
    delay_scale: float
    port: int
    summary_file: str

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> TestWebSettings:
        """Raise ``ValueError`` naming the first invalid setting."""
        getint, getfloat = settings.getint, settings.getfloat

        def at_least(low: float) -> Callable[[float], bool]:
            return lambda v: v >= low

        return cls(
            hosts=_read(settings, "TWOLEVEL_TESTWEB_HOSTS", getint, "an integer >= 1", at_least(1)),
            pages_per_host=_read(
                settings, "TWOLEVEL_TESTWEB_PAGES_PER_HOST", getint, "an integer >= 1", at_least(1)
            ),
            seed=_read(settings, "TWOLEVEL_TESTWEB_SEED", getint, "an integer", lambda v: True),
            delay_scale=_read(
                settings, "TWOLEVEL_TESTWEB_DELAY_SCALE", getfloat, "a number >= 0", at_least(0)
            ),
            port=_read(
                settings,
                "TWOLEVEL_TESTWEB_PORT",
                getint,
                "an integer port in 0..65535 (0: any free port)",
                lambda v: 0 <= v <= 65535,
            ),
            summary_file=_read(
                settings,
                "TWOLEVEL_TESTWEB_SUMMARY_FILE",
                settings.get,
                "a file path (empty: none)",
                lambda v: isinstance(v, str),
            ),
        )

    def web_identity(self) -> dict[str, int]:
        """What must not change between runs of one JOBDIR (the URLs depend on it)."""
        return {"hosts": self.hosts, "pages_per_host": self.pages_per_host, "seed": self.seed}


def load_state(path: Path, config: TestWebSettings) -> dict[str, Any] | None:
    """The JOBDIR state of earlier runs, or None for a new job; ``ValueError`` if unusable."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    advice = f"delete {path.parent} to start the crawl afresh"
    try:
        state = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{path} is corrupt (not JSON: {exc}); {advice}") from None
    if not isinstance(state, dict) or state.get("format") != STATE_FORMAT:
        found = state.get("format") if isinstance(state, dict) else None
        raise ValueError(
            f"{path} has format {found!r}, expected {STATE_FORMAT!r}: it was written by "
            f"another version of scrapy_twolevel, or is not the test web's file; {advice}"
        )
    port, runs = state.get("port"), state.get("runs")
    if not isinstance(port, int) or not 0 < port <= 65535 or not isinstance(runs, list):
        raise ValueError(f"{path} is corrupt (bad 'port' or 'runs'); {advice}")
    if state.get("web") != config.web_identity():
        old = state.get("web") or {}
        raise ValueError(
            f"{path} belongs to a test web of TWOLEVEL_TESTWEB_HOSTS={old.get('hosts')}, "
            f"TWOLEVEL_TESTWEB_PAGES_PER_HOST={old.get('pages_per_host')}, "
            f"TWOLEVEL_TESTWEB_SEED={old.get('seed')}, but this run asks for "
            f"{config.hosts}, {config.pages_per_host}, {config.seed}: the pending "
            f"requests would point at other pages. Resume with the same settings, or {advice}"
        )
    if config.port and config.port != port:
        raise ValueError(
            f"TWOLEVEL_TESTWEB_PORT={config.port}, but the job in {path.parent} was served on "
            f"port {port} and its pending requests name that port: drop the setting to reuse "
            f"it, or {advice}"
        )
    return state


def _check_new_job(jobdir: Path) -> None:
    """A JOBDIR with crawl state but no :data:`STATE_FILE` would resume on an unknown port."""
    if any(jobdir.iterdir()):
        raise ValueError(
            f"JOBDIR {jobdir} holds a crawl but no {STATE_FILE}, so the port its pending "
            "requests name is unknown: set TWOLEVEL_TESTWEB_PORT to that port, or delete "
            f"{jobdir} to start the crawl afresh"
        )


class EmbeddedTestWeb:
    """Serve the test web for the crawl it is part of; summarise what the server saw.

    Settings (all ``TWOLEVEL_TESTWEB_*``, defaults in :data:`DEFAULTS`) are validated in
    :meth:`from_crawler`, which starts the server so the seeds' URLs are known before the
    spider opens. The summary is printed after Scrapy's stats dump, and also written as JSON
    to ``TWOLEVEL_TESTWEB_SUMMARY_FILE`` when set.
    """

    def __init__(
        self,
        server: TestWebServer,
        stats: StatsCollector,
        *,
        state_path: Path | None = None,
        previous: Mapping[str, Any] | None = None,
        config: TestWebSettings,
    ) -> None:
        self.server = server
        self.stats = stats
        self.config = config
        self.state_path = state_path
        #: The server's clock: event times and this run's start must be on one clock.
        self.clock = server.clock
        #: Completed and unfinished runs recorded in the JOBDIR before this one.
        self.earlier_runs: list[dict[str, Any]] = list((previous or {}).get("runs", []))
        self.started = self.clock()
        self.summary = ""
        self.summary_data: dict[str, Any] = {}
        self._reachable = server.web.reachable()
        self.total_quality = sum(server.web.pages[i].quality for i in self._reachable)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        config = TestWebSettings.from_settings(crawler.settings)
        jobdir = job_dir(crawler.settings)
        state_path = Path(jobdir) / STATE_FILE if jobdir else None
        previous = load_state(state_path, config) if state_path else None
        if state_path and previous is None and not config.port:
            _check_new_job(state_path.parent)
        port = previous["port"] if previous else config.port
        from twisted.internet import reactor
        from twisted.internet.error import CannotListenError

        from .server import TestWebServer

        web = generate_web(config.hosts, config.pages_per_host, seed=config.seed)
        server = TestWebServer(web, delay_scale=config.delay_scale, reactor=reactor)
        try:
            server.start(port)
        except CannotListenError as exc:
            where = f"port {port}, stored in {state_path}," if previous else f"port {port}"
            raise RuntimeError(
                f"the test web cannot listen on {where} ({exc.socketError}): is another crawl "
                "of this job, or another program, using it? Stop it and run again."
            ) from None
        assert crawler.stats is not None
        ext = cls(server, crawler.stats, state_path=state_path, previous=previous, config=config)
        ext._save_state(None)
        crawler.signals.connect(ext.spider_opened, signals.spider_opened)
        crawler.signals.connect(ext.spider_closed, signals.spider_closed)
        crawler.signals.connect(ext.engine_stopped, signals.engine_stopped)
        return ext

    # -- JOBDIR state ------------------------------------------------------------------------
    def _save_state(self, this_run: dict[str, Any] | None) -> None:
        """Record the port at start (``this_run`` None: unfinished) and the run at the end.

        A run killed before :meth:`spider_closed` stays ``"finished": false``; the next run
        reports it as unrecorded instead of pretending its pages were never fetched.
        """
        if self.state_path is None:
            return
        run = this_run if this_run is not None else {"finished": False}
        state = {
            "format": STATE_FORMAT,
            "port": self.server.port,
            "web": self.config.web_identity(),
            "runs": [*self.earlier_runs, run],
        }
        write_atomically(self.state_path, json.dumps(state, separators=(",", ":")))

    # -- signals -----------------------------------------------------------------------------
    def spider_opened(self, spider: Spider) -> None:
        if not getattr(spider, "start_urls", None):
            spider.start_urls = self.server.seeds_urls
        self.started = self.clock()

    async def spider_closed(self, spider: Spider, reason: str) -> None:
        elapsed = self.clock() - self.started
        try:
            run = self._this_run(reason, elapsed)
            self._save_state(run)
            self.summary_data = self._summarise(run)
            self.summary = self._render(self.summary_data)
            if self.config.summary_file:
                text = json.dumps(self.summary_data, indent=1)
                write_atomically(self.config.summary_file, text)
        finally:
            await maybe_deferred_to_future(self.server.stop())

    def engine_stopped(self) -> None:
        """Print last, after Scrapy's stats dump."""
        if self.summary:
            print(self.summary, flush=True)

    # -- the numbers -------------------------------------------------------------------------
    def _this_run(self, reason: str, elapsed: float) -> dict[str, Any]:
        """This run's record: the server's counts and the client's errors, JSON-able."""
        server = self.server.stats
        get = self.stats.get_value
        prefix = "downloader/response_status_count/"
        non200 = {
            key[len(prefix) :]: value
            for key, value in self.stats.get_stats().items()
            if key.startswith(prefix) and key != f"{prefix}200"
        }
        used = {(e.host, e.connection_id) for e in server.events}
        return {
            "finished": True,
            "reason": reason,
            "elapsed": elapsed,
            "fetch_counts": {str(k): v for k, v in sorted(server.fetch_counts().items())},
            "responses": server.total.responses_total,
            "failed_requests": get("downloader/exception_count", 0),
            "non200_responses": non200,
            "error_log_lines": get("log_count/ERROR", 0),
            "connections_accepted": server.total.connections_total,
            "connections_unused": server.total.connections_total - len(used),
            "connections_inferred": get("twolevel/metrics/new_connections"),
            "max_concurrent_requests_per_host": max(
                server.max_concurrent_requests_per_host().values(), default=0
            ),
            "time_to_80": self._time_to_80(),
        }

    def _time_to_80(self) -> float | None:
        """Crawl time over all runs until 80% of the reachable quality had been fetched."""
        done = [r for r in self.earlier_runs if r.get("finished")]
        for run in done:
            if run.get("time_to_80") is not None:
                return float(run["time_to_80"])
        before: float = sum(r["elapsed"] for r in done)
        seen = {int(k) for r in done for k in r["fetch_counts"]}
        quality = sum(self.server.web.pages[i].quality for i in seen)
        for event in self.server.stats.events:
            if event.page_id is None or event.method != "GET" or event.page_id in seen:
                continue
            seen.add(event.page_id)
            quality += self.server.web.pages[event.page_id].quality
            if quality >= 0.8 * self.total_quality:
                return before + event.time - self.started
        return None

    def _summarise(self, run: dict[str, Any]) -> dict[str, Any]:
        """Totals over every recorded run of this job, and this run's own figures."""
        runs = [r for r in self.earlier_runs if r.get("finished")] + [run]
        fetches: dict[int, int] = {}
        for r in runs:
            for page, n in r["fetch_counts"].items():
                fetches[int(page)] = fetches.get(int(page), 0) + n
        non200: dict[str, int] = {}
        for r in runs:
            for status, n in r["non200_responses"].items():
                non200[status] = non200.get(status, 0) + n
        fetched = set(fetches)
        inferred = [r["connections_inferred"] for r in runs]

        def total(key: str) -> Any:
            return sum(r[key] for r in runs)

        return {
            "format": SUMMARY_FORMAT,
            "reason": run["reason"],
            "policy": self.stats.get_value("twolevel/policy", "stock Scrapy"),
            "port": self.server.port,
            "control": self.server.control_url,
            "hosts": len(self.server.web.hosts),
            "reachable": len(self._reachable),
            "runs": len(runs),
            "unrecorded_runs": len(self.earlier_runs) + 1 - len(runs),
            "jobdir": str(self.state_path.parent) if self.state_path else None,
            "pages_fetched": len(fetched & self._reachable),
            "pages_fetched_this_run": len(run["fetch_counts"]),
            "fetches": sum(fetches.values()),
            "refetches": sum(n - 1 for n in fetches.values()),
            "refetched_pages": sum(1 for n in fetches.values() if n > 1),
            "failed_requests": total("failed_requests"),
            "non200_responses": non200,
            "error_log_lines": total("error_log_lines"),
            "quality": sum(self.server.web.pages[i].quality for i in fetched),
            "total_quality": self.total_quality,
            "elapsed": total("elapsed"),
            "elapsed_this_run": run["elapsed"],
            "time_to_80": run["time_to_80"],
            "connections_accepted": total("connections_accepted"),
            "connections_unused": total("connections_unused"),
            "connections_inferred": None if None in inferred else sum(inferred),
            "max_concurrent_requests_per_host": max(
                r["max_concurrent_requests_per_host"] for r in runs
            ),
            "this_run": run,
        }

    @staticmethod
    def _render(s: Mapping[str, Any]) -> str:
        """The text summary: every figure over all runs, this run's beside it when resumed."""
        resumed = s["runs"] > 1 or s["unrecorded_runs"] > 0
        pages = f"{s['pages_fetched']} of {s['reachable']} reachable, on {s['hosts']} hosts"
        if resumed:
            runs = f"{s['runs']} recorded run" + ("s" if s["runs"] > 1 else "")
            pages += f" ({s['pages_fetched_this_run']} this run; {runs} in {s['jobdir']})"
        lines = [
            f"\n=== scrapy_twolevel demo ({s['reason']}) ===",
            f"policy:           {s['policy']}",
            f"test web:         hosts on 127.0.x.y:{s['port']}, control {s['control']}/",
            f"pages fetched:    {pages}",
        ]
        if s["unrecorded_runs"]:
            lines.append(
                f"                  + {s['unrecorded_runs']} earlier run(s) killed before "
                "recording their pages: those pages are not counted above"
            )
        refetch = f"re-fetches:       {s['refetches']}"
        if s["refetches"]:
            n = s["refetched_pages"]
            refetch += f" ({n} page{'s' if n != 1 else ''} served more than once)"
        lines.append(refetch)
        statuses = ", ".join(f"{n} x {code}" for code, n in sorted(s["non200_responses"].items()))
        lines.append(
            f"errors:           {s['failed_requests']} failed requests, "
            f"{sum(s['non200_responses'].values())} non-200 responses"
            + (f" ({statuses})" if statuses else "")
            + f", {s['error_log_lines']} ERROR log lines"
        )
        share = 100 * s["quality"] / max(s["total_quality"], 1e-9)
        lines.append(
            f"quality gathered: {s['quality']:.2f} of {s['total_quality']:.2f} ({share:.0f}%)"
        )
        took = f"time:             {s['elapsed']:.1f} s"
        if resumed:
            took += f" ({s['elapsed_this_run']:.1f} s this run)"
        if s["time_to_80"] is not None:
            took += f"; 80% of the quality after {s['time_to_80']:.1f} s"
        lines.append(took)
        accepted, inferred = s["connections_accepted"], s["connections_inferred"]
        conn = f"connections:      {accepted} (server)"
        if s["connections_unused"]:
            conn += f", {s['connections_unused']} of them without a response"
        if inferred is not None:
            conn += f"; {inferred} by the middleware (twolevel/metrics/new_connections)"
        lines.append(conn)
        if inferred is not None and inferred != accepted:
            lines.append(
                "                  (the middleware counts connections that brought a "
                "response, as they came)"
            )
        lines.append(
            f"most concurrent requests to one host: {s['max_concurrent_requests_per_host']}"
        )
        return "\n".join(lines) + "\n"
