"""Distributed crawling (work in progress, see docs/architecture.rst): the bucket table."""

from .buckets import BucketTable, Move, bucket_of

__all__ = ["BucketTable", "Move", "bucket_of"]
