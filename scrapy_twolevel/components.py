"""The import paths and orders of scrapy_twolevel's Scrapy components.

What the add-on sets, what start-up errors tell a user to write in ``settings.py``, and
the role each component class declares (``twolevel_role``), by which the start-up checks
(:mod:`scrapy_twolevel.glue.preflight`) find it, or a subclass of it, in the settings
without importing it. No imports here, so that any module may use these names.
"""

SCHEDULER_PATH = "scrapy_twolevel.scheduler.TwoLevelScheduler"
DUPEFILTER_PATH = "scrapy_twolevel.dupefilter.SeenCacheDupeFilter"
MIDDLEWARE_PATH = "scrapy_twolevel.middleware.HostMetricsMiddleware"
#: Near the downloader: ``download_latency`` is fresh there.
MIDDLEWARE_ORDER = 950
SEED_MIDDLEWARE_PATH = "scrapy_twolevel.seeds.SeedMiddleware"
#: Near the spider: it tags what the callback yields before other middlewares filter it.
SEED_MIDDLEWARE_ORDER = 950
TOPIC_MIDDLEWARE_PATH = "scrapy_twolevel.topics.TopicMiddleware"
#: Near the spider too: it sees the callback's output as the callback yields it.
TOPIC_MIDDLEWARE_ORDER = 960
DUPLICATE_LINKS_PATH = "scrapy_twolevel.duplicate_links.DuplicateLinksMiddleware"
#: Nearest the spider after the topic and seed middlewares, whose tags it must see; before
#: Scrapy's depth (900), URL length (800) and referer (700) middlewares, so duplicates skip
#: them.
DUPLICATE_LINKS_ORDER = 940
START_PACING_PATH = "scrapy_twolevel.start_pacing.StartPacingMiddleware"
#: Nearest the engine: it paces what every other middleware has let through.
START_PACING_ORDER = 10
#: The live view: the dashboard (``TWOLEVEL_WEB_PORT``) and the periodic status line.
LIVE_VIEW_PATH = "scrapy_twolevel.live.extension.LiveView"
LIVE_VIEW_ORDER = 500

#: ``twolevel_role`` of each component class.
SCHEDULER_ROLE = "scheduler"
DUPEFILTER_ROLE = "seen-cache"
MIDDLEWARE_ROLE = "host-metrics"
SEED_MIDDLEWARE_ROLE = "seeds"
TOPIC_MIDDLEWARE_ROLE = "topics"
