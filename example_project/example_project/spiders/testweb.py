"""The demo spider: follows every link of the test web, page quality as priority."""

from scrapy_twolevel.testweb.spider import TestWebSpider


class DemoSpider(TestWebSpider):
    name = "testweb"
