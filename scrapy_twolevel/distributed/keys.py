"""Where a distributed crawl's keys live in Redis: the one place their prefixes are spelt.

A crawl's own keys (table, members, heartbeats, inboxes, queued copies, seen keys) are
under ``twolevel:<crawl id>:``; its recrawl history and model under
``twolevel-history:<crawl id>:``, so that clearing a crawl (``scrapy twolevel reset``)
keeps the training data unless asked.
"""

from __future__ import annotations


def crawl_prefix(crawl_id: str) -> str:
    """The prefix of every key of crawl ``crawl_id`` but its recrawl history's."""
    return f"twolevel:{crawl_id}:"


def history_prefix(crawl_id: str) -> str:
    """The prefix of crawl ``crawl_id``'s recrawl history and model."""
    return f"twolevel-history:{crawl_id}:"
