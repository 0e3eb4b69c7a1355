"""The recrawl demo: a news site on a sped-up clock, its section pages refetched as planned.

``scrapy crawl news`` serves the site inside the crawl (one real second is one hour of
site and planner time) and stops after two simulated days; see docs/recrawl.rst.
"""

from scrapy_twolevel.testweb.news import NewsSpider as _NewsSpider


class NewsSpider(_NewsSpider):
    name = "news"
    custom_settings = {
        "EXTENSIONS": {
            "scrapy_twolevel.testweb.news.EmbeddedNewsSite": 0,
            "scrapy_twolevel.live.extension.LiveView": 500,  # -s TWOLEVEL_WEB_PORT=0: plans
        },
        "SPIDER_MIDDLEWARES": {"scrapy_twolevel.seeds.SeedMiddleware": 950},
        "TWOLEVEL_RECRAWL": True,
        "TWOLEVEL_RECRAWL_TIME_SCALE": 3600,
        # Planner time = origin + 3600 * (now - origin): any fixed origin will do, as long
        # as the crawl, the site and `scrapy recrawl train` share it (override with -s).
        "TWOLEVEL_RECRAWL_TIME_ORIGIN": 1_790_000_000,
        "TWOLEVEL_RECRAWL_DURATION": 48,
        "TWOLEVEL_RECRAWL_MIN_INTERVAL": 600,
        "TWOLEVEL_RECRAWL_BUDGET": 96,
        "TWOLEVEL_RECRAWL_MIN_SAMPLES": 100,
        "TWOLEVEL_RECRAWL_TRAIN_DAYS": 14,
    }
