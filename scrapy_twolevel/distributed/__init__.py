"""Distributed crawling on Redis (docs/distributed.rst), all of it in this folder.

- Pure, no Redis: the bucket table (:mod:`.buckets`), which buckets this node holds and
  owes (:mod:`.ownership`), the key prefixes (:mod:`.keys`).
- The Redis side: :mod:`.connect`, :mod:`.registry`, :mod:`.inbox`, :mod:`.seen_log`,
  :mod:`.history`, :mod:`.batch` and :mod:`.node` (one tick's round trips).
- The scheduler's side: the request store (:mod:`.store`), the admission
  (:mod:`.admission`), the tick (:mod:`.sync`), the loader of buckets taken over
  (:mod:`.loader`), the messages (:mod:`.messages`), built by :mod:`.assembly`.
"""

from .buckets import BucketTable, Move, bucket_of

__all__ = ["BucketTable", "Move", "bucket_of"]
