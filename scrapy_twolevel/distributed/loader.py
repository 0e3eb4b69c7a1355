"""Loading the buckets a node takes over, a slice per reactor turn.

A bucket can hold hundreds of thousands of queued requests and seen keys, and adding one
to the dupefilter or the frontier costs microseconds: loading a large bucket in the
callback that applies a tick held the reactor for seconds (its downloads, and the node's
next tick and heartbeat, with it). The loader adds ``SLICE`` items per reactor turn, a
bucket's seen keys first, then its requests. Until a bucket is loaded the distributed
admission treats it as not held yet for new requests (they wait in the inbox), so none is
admitted before the bucket's seen keys are all in.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

from ..glue.timers import Timer

#: Seen keys or requests added per reactor turn (a few milliseconds' work).
SLICE = 2000


class _Job:
    __slots__ = ("bucket", "entries", "keys", "next_entry", "next_key")

    def __init__(self, bucket: int, keys: list[bytes], entries: list[tuple[str, bytes]]):
        self.bucket = bucket
        self.keys = keys
        self.entries = entries
        self.next_key = 0
        self.next_entry = 0


class BucketLoader:
    """Loads taken buckets in slices; see the module docstring."""

    def __init__(
        self,
        *,
        loading: set[int],
        add_keys: Callable[[Iterable[bytes]], None],
        load: Callable[[int, str, bytes], bool],
        loaded: Callable[[int], bool],
        wake: Callable[[], object],
    ) -> None:
        """``loading``: the buckets being loaded (:attr:`.ownership.Ownership.loading`, which
        the admission reads); ``load(bucket, entry id, data)`` queues one request;
        ``loaded(bucket)`` is told when a bucket is complete; both return whether the engine
        has work to be woken for, and ``wake`` wakes it after a slice done on a later turn."""
        self._add_keys = add_keys
        self._load = load
        self._loaded = loaded
        self._wake = wake
        self._jobs: deque[_Job] = deque()
        self.loading = loading
        self._next_turn = Timer(self._turn)

    def add(self, bucket: int, keys: list[bytes], entries: list[tuple[str, bytes]]) -> None:
        """Queue ``bucket`` for loading; :meth:`run` starts it."""
        self._jobs.append(_Job(bucket, keys, entries))
        self.loading.add(bucket)

    def run(self) -> bool:
        """One slice now (small take-overs are then done), the rest on later turns;
        whether the engine should be woken."""
        return False if self._next_turn.armed else self._step()

    def cancel(self, bucket: int) -> None:
        """Stop loading ``bucket`` (given away again, or the node was reaped)."""
        if bucket in self.loading:
            self.loading.discard(bucket)
            self._jobs = deque(job for job in self._jobs if job.bucket != bucket)

    def cancel_all(self) -> None:
        self._jobs.clear()
        self.loading.clear()

    def _turn(self) -> None:
        if self._step():
            self._wake()

    def _step(self) -> bool:
        budget, woke = SLICE, False
        while budget and self._jobs:
            job = self._jobs[0]
            if job.next_key < len(job.keys):
                end = min(job.next_key + budget, len(job.keys))
                self._add_keys(job.keys[job.next_key : end])
                budget -= end - job.next_key
                job.next_key = end
                continue
            end = min(job.next_entry + budget, len(job.entries))
            for entry_id, data in job.entries[job.next_entry : end]:
                woke |= self._load(job.bucket, entry_id, data)
            budget -= end - job.next_entry
            job.next_entry = end
            if end == len(job.entries):
                self._jobs.popleft()
                self.loading.discard(job.bucket)
                woke |= self._loaded(job.bucket)
        if self._jobs:
            self._next_turn.arm(0)
        return woke
