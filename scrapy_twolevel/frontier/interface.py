"""What the scheduler asks of a frontier, whichever it is: one two-level frontier, or one
per topic behind the same interface. The glue is written against this protocol only.

Pure module: no Scrapy, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .estimates import HostEstimate, Measurement
    from .hosts import Host


class Frontier(Protocol):
    """What the scheduler asks of a frontier: :class:`TwoLevelFrontier`, or
    :class:`~.topic_frontier.TopicFrontier` (one per topic behind the same interface).

    Its keys are *lanes*: a host key, or ``topic_lane(topic, host)`` with topics.
    """

    def push(self, lane: str, quality: float, item: Any) -> bool: ...

    def pop(self) -> tuple[str, Any] | None: ...

    def done(self, lane: str) -> None: ...

    def observe(self, lane: str, measured: Measurement) -> None: ...

    def reprice(self, cpu_price: float) -> None:
        """The crawl's price of a CPU second changed: rank hosts at it (:mod:`.binding`)."""

    def observe_failure(
        self,
        lane: str,
        *,
        elapsed: float,
        timeout: bool,
        repeat: bool = False,
        silent: bool = False,
    ) -> None: ...

    def observe_refusal(
        self, lane: str, *, retry_after: float | None, refused_before: int = 0
    ) -> bool: ...

    def set_min_gap(self, host: str, seconds: float) -> None: ...

    def hold(self, host: str, seconds: float) -> None: ...

    def backed_off(self, lane: str) -> bool: ...

    def host(self, lane: str, queue_factory: Any = None) -> Host: ...

    def set_estimate(self, host: str, estimate: HostEstimate) -> None: ...

    def restore(self, lanes: Iterable[str], max_seq: int) -> None: ...

    def restore_pages(self, lane: str, fetched: int) -> None: ...

    def now(self) -> float: ...

    def next_retry_at(self) -> float | None: ...

    def hosts(self) -> Iterator[Host]: ...

    def __len__(self) -> int: ...

    @property
    def host_count(self) -> int: ...

    @property
    def sessions_ended(self) -> int: ...

    @property
    def session_requests(self) -> int: ...

    @property
    def session_extensions(self) -> int: ...

    def close(self) -> None: ...
