"""A normal Scrapy project using scrapy_twolevel, crawling the embedded local test web."""

BOT_NAME = "example_project"
SPIDER_MODULES = ["example_project.spiders"]
NEWSPIDER_MODULE = "example_project.spiders"

# --- scrapy_twolevel: the four lines a project adds (or ADDONS = {"scrapy_twolevel.Addon": 0})
SCHEDULER = "scrapy_twolevel.scheduler.TwoLevelScheduler"
DUPEFILTER_CLASS = "scrapy_twolevel.dupefilter.SeenCacheDupeFilter"
DOWNLOADER_MIDDLEWARES = {"scrapy_twolevel.middleware.HostMetricsMiddleware": 950}
SPIDER_MIDDLEWARES = {"scrapy_twolevel.duplicate_links.DuplicateLinksMiddleware": 940}
TWOLEVEL_POLICY = "crawl-capability"

# --- the demo's local test web, served inside the crawl on 127.0.x.y addresses
EXTENSIONS = {
    "scrapy_twolevel.testweb.extension.EmbeddedTestWeb": 0,
    "scrapy_twolevel.live.extension.LiveView": 500,  # status line; TWOLEVEL_WEB_PORT: dashboard
}
TWOLEVEL_TESTWEB_HOSTS = 20
TWOLEVEL_TESTWEB_PAGES_PER_HOST = 30

CONCURRENT_REQUESTS = 8
ROBOTSTXT_OBEY = False  # the test web has no robots.txt rules worth a request per host
TELNETCONSOLE_ENABLED = False
LOG_LEVEL = "INFO"
