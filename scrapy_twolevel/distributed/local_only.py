"""Requests a node holds without a copy in Redis, per bucket.

A request that cannot be encoded (a lambda callback, an object in ``meta``) lives only in
the memory of the node that queued it. Two things need to know about them: a bucket that
moves away is released only once its own are fetched, and a node that leaves names the
ones it drops (another node fetches one only if it finds a link to it again: their seen
keys reach Redis once they are fetched). Only their URLs are kept here, which is all the
reports need.
"""

from __future__ import annotations

from collections import Counter, defaultdict


class LocalOnlyRequests:
    """The URLs of queued requests that exist only on this node, per bucket."""

    def __init__(self) -> None:
        self._urls: defaultdict[int, Counter[str]] = defaultdict(Counter)

    def add(self, bucket: int, url: str) -> None:
        self._urls[bucket][url] += 1

    def remove(self, bucket: int, url: str) -> None:
        """One of ``bucket``'s was handed out or dropped."""
        urls = self._urls.get(bucket)
        if urls is None or urls[url] <= 0:
            return
        urls[url] -= 1
        if urls[url] == 0:
            del urls[url]
        if not urls:
            del self._urls[bucket]

    def count(self, bucket: int) -> int:
        urls = self._urls.get(bucket)
        return 0 if urls is None else urls.total()

    def discard_bucket(self, bucket: int) -> None:
        self._urls.pop(bucket, None)

    def take_all(self) -> list[str]:
        """Every URL still queued (one per request), sorted; the record is emptied."""
        urls = sorted(url for counts in self._urls.values() for url in counts.elements())
        self._urls.clear()
        return urls
