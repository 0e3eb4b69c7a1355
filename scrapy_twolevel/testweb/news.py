"""A news site on loopback for the recrawl feature: sections that publish on a sped-up clock.

Each section publishes articles as a Poisson process whose hourly rate follows a daily
profile (:data:`PROFILES`: ``day`` publishes from 06:00 to 18:00 UTC, ``night`` the other
half, ``flat`` evenly). Time is the recrawl planner's clock
(:class:`~scrapy_twolevel.recrawl.clock.ScaledClock`, from ``TWOLEVEL_RECRAWL_TIME_SCALE``
and ``TWOLEVEL_RECRAWL_TIME_ORIGIN``), so with a scale of 3600 a day passes in 24 seconds
and the crawl and the site agree on the hour.

- ``/<section>/``: the list page, the latest ``list_size`` articles (older ones scroll off);
- ``/<section>/a/<hour>-<k>``: an article, with its publish time in
  ``<meta property="article:published_time">`` and ``<time datetime>``.

Articles are a pure function of (seed, section, hour): :meth:`NewsSite.articles` gives the
same times to the server and to a test or demo that writes a past history (the site's
archive) without crawling for weeks.

:class:`EmbeddedNewsSite` serves it inside ``scrapy crawl`` (as
:class:`~.extension.EmbeddedTestWeb` does for the test web) and :class:`NewsSpider` crawls
it, marking each section's list page as a seed.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import scrapy

from ..recrawl.clock import ScaledClock

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Response

HOUR = 3600.0
#: Hourly weights of a day (UTC hours 0-23), normalised by :class:`Section`.
PROFILES: dict[str, tuple[float, ...]] = {
    "day": tuple(1.0 if 6 <= h < 18 else 0.02 for h in range(24)),
    "night": tuple(0.02 if 6 <= h < 18 else 1.0 for h in range(24)),
    "flat": tuple(1.0 for _ in range(24)),
}
#: Settings of :class:`EmbeddedNewsSite` (the ``TWOLEVEL_TESTWEB_`` prefix is the test web's).
SECTIONS_SETTING = "TWOLEVEL_TESTWEB_NEWS_SECTIONS"
SEED_SETTING = "TWOLEVEL_TESTWEB_NEWS_SEED"
PORT_SETTING = "TWOLEVEL_TESTWEB_NEWS_PORT"
#: Sections whose list page answers 503 (to test seeds that fail).
FAILING_SETTING = "TWOLEVEL_TESTWEB_NEWS_FAILING"
#: Crawl the site served at this URL (``python -m scrapy_twolevel.testweb news``) instead
#: of serving one: the nodes of a distributed crawl share one site.
URL_SETTING = "TWOLEVEL_TESTWEB_NEWS_URL"
#: With JOBDIR, the port is kept here: the requests planned in the JOBDIR name it.
PORT_FILE = "newssite.json"
DEFAULT_SECTIONS = "day:120,night:120"


@dataclass(frozen=True)
class Section:
    """A section: its name (= its profile's), articles per day, items on its list page."""

    name: str
    per_day: float
    list_size: int = 20

    def __post_init__(self) -> None:
        if self.name not in PROFILES:
            raise ValueError(f"unknown section profile {self.name!r}; use {', '.join(PROFILES)}")
        if not self.per_day > 0 or self.list_size < 1:
            raise ValueError(f"section {self.name}: need per_day > 0 and list_size >= 1")

    def rate(self, hour_of_day: int) -> float:
        """Mean articles in one hour at ``hour_of_day`` (UTC)."""
        weights = PROFILES[self.name]
        return self.per_day * weights[hour_of_day] / sum(weights)


def parse_sections(text: str) -> list[Section]:
    """``"day:120,night:40"`` -> sections (per day); raises ``ValueError`` naming the part."""
    sections = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, per_day = part.partition(":")
        try:
            sections.append(Section(name.strip(), float(per_day or 100)))
        except ValueError as exc:
            raise ValueError(f"{SECTIONS_SETTING}: bad section {part!r} ({exc})") from exc
    if not sections:
        raise ValueError(f"{SECTIONS_SETTING}: no sections in {text!r}")
    return sections


def _poisson(rng: random.Random, mean: float) -> int:
    """Knuth's method: fine for the few dozen articles an hour holds here."""
    limit, k, p = math.exp(-mean), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


class NewsSite:
    """The site's content as a function of time: which articles exist at ``now``."""

    def __init__(
        self,
        sections: Sequence[Section],
        clock: ScaledClock,
        seed: int = 0,
        failing: Iterable[str] = (),
    ) -> None:
        self.sections = {s.name: s for s in sections}
        self.clock = clock
        self.seed = seed
        self.failing = frozenset(failing)

    def hour_articles(self, section: str, hour: int) -> list[float]:
        """Publish times of the articles of the hour ``[hour*3600, (hour+1)*3600)``, sorted."""
        spec = self.sections[section]
        rng = random.Random(f"{self.seed}:{section}:{hour}")
        n = _poisson(rng, spec.rate(hour % 24))
        return sorted(hour * HOUR + rng.random() * HOUR for _ in range(n))

    def articles(self, section: str, start: float, end: float) -> Iterator[float]:
        """Publish times in ``[start, end)``, oldest first."""
        for hour in range(math.floor(start / HOUR), math.ceil(end / HOUR)):
            for t in self.hour_articles(section, hour):
                if start <= t < end:
                    yield t

    def latest(self, section: str, now: float) -> list[tuple[str, float]]:
        """The list page at ``now``: ``(article id, publish time)``, newest first."""
        size = self.sections[section].list_size
        out: list[tuple[str, float]] = []
        hour = math.floor(now / HOUR)
        for h in range(hour, hour - 24 * 14, -1):
            times = self.hour_articles(section, h)
            for k in range(len(times) - 1, -1, -1):
                if times[k] <= now:
                    out.append((f"{h}-{k}", times[k]))
                    if len(out) == size:
                        return out
        return out

    def publish_time(self, section: str, article: str) -> float | None:
        try:
            hour, k = (int(x) for x in article.split("-"))
            return self.hour_articles(section, hour)[k]
        except (ValueError, IndexError):
            return None

    def render(self, path: str) -> tuple[int, bytes]:
        """``(status, html)`` for a request path."""
        parts = [p for p in path.split("?")[0].split("/") if p]
        if len(parts) == 1 and parts[0] in self.failing:
            return 503, b"<html><body>unavailable</body></html>"
        if len(parts) == 1 and parts[0] in self.sections:
            items = "".join(
                f'<li><a href="/{parts[0]}/a/{aid}">article {aid}</a></li>'
                for aid, _ in self.latest(parts[0], self.clock())
            )
            return 200, f"<html><body><ul>{items}</ul></body></html>".encode()
        if len(parts) == 3 and parts[0] in self.sections and parts[1] == "a":
            t = self.publish_time(parts[0], parts[2])
            if t is not None and t <= self.clock():
                stamp = datetime.fromtimestamp(t, UTC).isoformat()
                return 200, (
                    f'<html><head><meta property="article:published_time" content="{stamp}">'
                    f'</head><body><time datetime="{stamp}">{stamp}</time></body></html>'
                ).encode()
        return 404, b"<html><body>not found</body></html>"


def _site_resource(site: NewsSite) -> Any:
    from twisted.web.resource import Resource

    class _Page(Resource):
        isLeaf = True

        def render_GET(self, request: Any) -> bytes:
            status, body = site.render(request.path.decode("utf-8", "replace"))
            request.setResponseCode(status)
            request.setHeader(b"content-type", b"text/html; charset=utf-8")
            return body

    return _Page()


def listen_news_site(site: NewsSite, port: int = 0) -> Any:
    """Serve ``site`` on 127.0.0.1:``port`` (0: any free port) with the running reactor,
    without access log lines; the listening port."""
    from twisted.internet import reactor
    from twisted.web.server import Site

    web = Site(_site_resource(site))
    web.log = lambda request: None  # type: ignore[method-assign]  # no access log lines
    # Stub gap: listenTCP wants a ServerFactory[_ProtoWithFactory], invariant, which no
    # concrete factory (Site included) matches.
    return reactor.listenTCP(port, web, interface="127.0.0.1")  # type: ignore[arg-type]


class EmbeddedNewsSite:
    """Extension: serves the news site on 127.0.0.1 during the crawl and seeds the spider.

    Settings: ``TWOLEVEL_TESTWEB_NEWS_SECTIONS`` (``"day:120,night:120"``: profile and
    articles per day), ``TWOLEVEL_TESTWEB_NEWS_SEED`` (0), and the planner clock's
    ``TWOLEVEL_RECRAWL_TIME_SCALE`` / ``TWOLEVEL_RECRAWL_TIME_ORIGIN``;
    ``TWOLEVEL_TESTWEB_NEWS_PORT`` (0: any free port; with JOBDIR, the first run's port);
    ``TWOLEVEL_TESTWEB_NEWS_FAILING`` (sections whose list page answers 503);
    ``TWOLEVEL_TESTWEB_NEWS_URL``: serve nothing, crawl the site served there (with the
    same sections) instead.
    """

    def __init__(
        self, site: NewsSite, port: int = 0, jobdir: str | None = None, url: str | None = None
    ) -> None:
        self.site = site
        self.url = url.rstrip("/") if url else None
        self.port: Any = None
        if self.url is not None:
            return
        state = Path(jobdir, PORT_FILE) if jobdir else None
        if state is not None and state.exists() and not port:
            port = int(json.loads(state.read_text())["port"])
        self.port = listen_news_site(site, port)
        if state is not None:
            state.parent.mkdir(parents=True, exist_ok=True)
            state.write_text(json.dumps({"port": self.port.getHost().port}))

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        from scrapy import signals
        from scrapy.utils.job import job_dir

        from ..config import RecrawlConfig
        from ..glue.seed_planner import make_clock

        settings = crawler.settings
        sections = parse_sections(settings.get(SECTIONS_SETTING, DEFAULT_SECTIONS))
        clock = make_clock(RecrawlConfig.from_settings(settings))
        ext = cls(
            NewsSite(
                sections,
                clock,
                settings.getint(SEED_SETTING, 0),
                settings.getlist(FAILING_SETTING),
            ),
            settings.getint(PORT_SETTING, 0),
            job_dir(settings),
            settings.get(URL_SETTING) or None,
        )
        crawler.signals.connect(ext.spider_opened, signals.spider_opened)
        crawler.signals.connect(ext.engine_stopped, signals.engine_stopped)
        return ext

    @property
    def base_url(self) -> str:
        if self.url is not None:
            return self.url
        return f"http://127.0.0.1:{self.port.getHost().port}"

    def spider_opened(self, spider: scrapy.Spider) -> None:
        spider.start_urls = [f"{self.base_url}/{name}/" for name in self.site.sections]

    def engine_stopped(self) -> None:
        if self.port is not None:
            self.port.stopListening()


def seed_key_for(section: str) -> str:
    """The seed key :class:`NewsSpider` gives a section's list page."""
    return f"news/{section}"


class NewsSpider(scrapy.Spider):
    """Fetches each section's list page as a seed and every article it links to."""

    name = "news"

    async def start(self) -> Any:
        for url in self.start_urls:
            # An explicit seed key: the site's port changes from run to run, its sections don't.
            section = url.rstrip("/").rsplit("/", 1)[-1]
            yield scrapy.Request(url, meta={"twolevel_seed": seed_key_for(section)}, priority=10)

    def parse(self, response: Response) -> Iterator[Any]:
        for href in response.css("li a::attr(href)").getall():
            yield response.follow(href, callback=self.parse_article)

    def parse_article(self, response: Response) -> Iterator[dict[str, Any]]:
        yield {
            "url": response.url,
            "published": response.css("time::attr(datetime)").get(),
        }
