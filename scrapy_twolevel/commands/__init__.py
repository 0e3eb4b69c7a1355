"""The ``scrapy`` commands of scrapy_twolevel (the ``scrapy.commands`` entry point)."""

from __future__ import annotations

from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand


class ReportCommand(ScrapyCommand):
    """A command that prints a report: no crawl, no log lines around what it prints."""

    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}
    #: What ``syntax()`` and ``short_desc()`` return.
    usage: ClassVar[str] = ""
    description: ClassVar[str] = ""

    def syntax(self) -> str:
        return self.usage

    def short_desc(self) -> str:
        return f"{self.description} (scrapy_twolevel)"
