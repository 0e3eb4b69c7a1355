"""Distributed crawling on Redis (docs/distributed.rst): the pure bucket table here; the
Redis side in :mod:`.connect`, :mod:`.registry`, :mod:`.inbox`, :mod:`.seen_log`,
:mod:`.history` and :mod:`.node`, and the scheduler's side in
:mod:`scrapy_twolevel.glue.cluster`."""

from .buckets import BucketTable, Move, bucket_of

__all__ = ["BucketTable", "Move", "bucket_of"]
