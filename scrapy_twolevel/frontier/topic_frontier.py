"""Topics above hosts: priority classes, round-robin time slices, preemption (PQ-MCSA).

Several crawl topics share one crawler. Each topic has its own two-level frontier (hosts
ranked by the policy, URLs by quality); this module decides *which topic* serves the next
request:

- Topics are grouped into priority classes (``priority``: lower is more urgent). The most
  urgent class with a topic that can serve a request now serves it: a topic of a higher
  class that becomes ready preempts the running lower-class topic at the next request.
  The preempted topic keeps the rest of its slice and resumes it when the higher class
  has nothing to serve.
- Within a class, topics take turns of ``slice`` requests each (round robin). A topic that
  cannot serve right now (all its open hosts busy) is skipped for that request only; the
  request goes to the next topic in the class, and counts against that topic's slice.
- A topic that has had ``quota`` relevant pages within its current ``period`` has met its
  need: its slice shrinks to a quarter (at least 1) until its next period begins, so the
  others get more turns.
- Host sessions stay non-preemptive at the connection level: preemption decides which
  topic's request (and, when a session ends, which topic's host) comes next, but it never
  cuts a session open in another topic. A host with requests in two topics is open in
  at most one of them at a time (a shared :class:`HostLock`), so one request per host
  at a time still holds over all topics.

:class:`TopicSelector` is the choice (order, slices, preemptions, quota periods), on an
injectable clock; :class:`TopicFrontier` puts one :class:`TwoLevelFrontier` per topic
behind the frontier's own interface, with lanes named ``<topic>\\x1f<host>``. No Scrapy.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .estimates import Measurement
from .frontier import PLAIN_LANE, TwoLevelFrontier
from .hosts import Host, SeqCounter

#: Separates a topic from a host in a lane key (a character no host name contains).
SEP = "\x1f"
#: The topic of requests that name none.
DEFAULT_TOPIC = "default"
DEFAULTS: dict[str, Any] = {"priority": 1, "slice": 16, "quota": 0, "period": 3600.0}
#: A topic whose quota is met keeps this share of its slice (at least one request).
REDUCED_SHARE = 0.25


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """One topic's declaration (``TWOLEVEL_TOPICS``)."""

    name: str
    priority: int = DEFAULTS["priority"]
    slice: int = DEFAULTS["slice"]
    quota: int = DEFAULTS["quota"]  # relevant pages per period; 0: no quota
    period: float = DEFAULTS["period"]

    @property
    def reduced_slice(self) -> int:
        return max(1, math.floor(self.slice * REDUCED_SHARE))


def parse_topics(raw: Mapping[str, Any]) -> list[TopicSpec]:
    """``{name: {field: value}}`` -> specs, plus the default topic if not declared.

    ``ValueError`` naming the topic and field for anything invalid."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"must be a dict of topic name -> settings, got {type(raw).__name__}")
    specs = []
    for name, fields in raw.items():
        if not isinstance(name, str) or not name or SEP in name:
            raise ValueError(f"topic name {name!r} must be a non-empty string")
        fields = {} if fields is None else fields
        if not isinstance(fields, Mapping):
            raise ValueError(f"topic {name!r}: expected a dict of settings, got {fields!r}")
        unknown = set(fields) - set(DEFAULTS)
        if unknown:
            raise ValueError(
                f"topic {name!r}: unknown field(s) {sorted(unknown)}; valid: {sorted(DEFAULTS)}"
            )
        values = {**DEFAULTS, **fields}
        for key, rule, ok in (
            ("priority", "an integer", lambda v: isinstance(v, int)),
            ("slice", "an integer >= 1", lambda v: isinstance(v, int) and v >= 1),
            ("quota", "an integer >= 0", lambda v: isinstance(v, int) and v >= 0),
            ("period", "seconds > 0", lambda v: isinstance(v, int | float) and v > 0),
        ):
            value = values[key]
            if isinstance(value, bool) or not ok(value):
                raise ValueError(f"topic {name!r}: {key}={value!r} is not valid; use {rule}")
        specs.append(TopicSpec(name, **values))
    if not any(s.name == DEFAULT_TOPIC for s in specs):
        specs.append(TopicSpec(DEFAULT_TOPIC))
    return specs


@dataclass
class TopicState:
    """What the selector knows of one topic."""

    spec: TopicSpec
    slice_len: int
    remaining: int
    period_start: float
    pages: int = 0  # requests served
    turns: int = 0  # slices used up
    preemptions: int = 0
    relevant: int = 0
    relevant_in_period: int = 0
    quota_met: int = 0  # periods in which the quota was met

    def to_dict(self, now: float) -> dict[str, Any]:
        return {
            "slice_len": self.slice_len,
            "remaining": self.remaining,
            "period_age": now - self.period_start,
            "pages": self.pages,
            "turns": self.turns,
            "preemptions": self.preemptions,
            "relevant": self.relevant,
            "relevant_in_period": self.relevant_in_period,
            "quota_met": self.quota_met,
        }


class TopicSelector:
    """Which topic serves the next request (see the module docstring)."""

    def __init__(
        self, specs: Sequence[TopicSpec], clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not specs:
            raise ValueError("at least one topic is needed")
        self._clock = clock
        now = clock()
        self.state = {s.name: TopicState(s, s.slice, s.slice, now) for s in specs}
        self._classes: dict[int, deque[str]] = {}
        for spec in specs:
            self._classes.setdefault(spec.priority, deque()).append(spec.name)
        self._priorities = sorted(self._classes)
        self.running: str | None = None

    @property
    def names(self) -> list[str]:
        return list(self.state)

    def order(self) -> Iterator[str]:
        """Topics in the order to try: most urgent class first; within a class, the topic
        whose turn it is, then the others in round-robin order."""
        for priority in self._priorities:
            yield from self._classes[priority]

    def served(self, topic: str) -> None:
        """A request of ``topic`` was handed out: charge its slice; count a preemption."""
        st = self.state[topic]
        running = self.running
        if running is not None and running != topic:
            other = self.state[running]
            if (
                st.spec.priority < other.spec.priority
                and other.remaining < other.slice_len  # its turn had started
            ):
                other.preemptions += 1
        self.running = topic
        self._new_period_if_due(st)
        st.pages += 1
        st.remaining -= 1
        if st.remaining <= 0:
            st.turns += 1
            queue = self._classes[st.spec.priority]
            queue.remove(topic)
            queue.append(topic)
            st.remaining = st.slice_len
            self.running = None

    def relevant(self, topic: str) -> None:
        """A page of ``topic`` was relevant; its quota may now be met."""
        st = self.state[topic]
        self._new_period_if_due(st)
        st.relevant += 1
        st.relevant_in_period += 1
        quota = st.spec.quota
        if quota and st.relevant_in_period == quota:
            st.quota_met += 1
            st.slice_len = st.spec.reduced_slice
            st.remaining = min(st.remaining, st.slice_len)

    def _new_period_if_due(self, st: TopicState) -> None:
        now = self._clock()
        if now - st.period_start < st.spec.period:
            return
        periods = (now - st.period_start) // st.spec.period
        st.period_start += periods * st.spec.period
        st.relevant_in_period = 0
        if st.slice_len != st.spec.slice:
            st.slice_len = st.spec.slice
            st.remaining = st.slice_len

    # -- persistence ----------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        now = self._clock()
        return {
            "topics": {name: st.to_dict(now) for name, st in self.state.items()},
            "order": {str(p): list(q) for p, q in self._classes.items()},
            "running": self.running,
        }

    def restore(self, data: Mapping[str, Any]) -> None:
        """State saved by :meth:`to_dict` (topics not saved keep a fresh state; saved
        topics no longer declared are ignored). Raises ``ValueError`` on damage."""
        try:
            now = self._clock()
            for name, saved in data["topics"].items():
                st = self.state.get(name)
                if st is None:
                    continue
                st.slice_len = min(int(saved["slice_len"]), st.spec.slice)
                st.remaining = max(1, min(int(saved["remaining"]), st.slice_len))
                st.period_start = now - float(saved["period_age"])
                for key in ("pages", "turns", "preemptions", "relevant"):
                    setattr(st, key, int(saved[key]))
                st.relevant_in_period = int(saved["relevant_in_period"])
                st.quota_met = int(saved["quota_met"])
            for priority, names in data["order"].items():
                queue = self._classes.get(int(priority))
                if queue is None:
                    continue
                known = [n for n in names if n in queue]
                rest = [n for n in queue if n not in known]
                queue.clear()
                queue.extend(known + rest)
            running = data.get("running")
            self.running = running if running in self.state else None
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"not a saved topic state ({exc})") from exc


class HostLock:
    """Hosts with a session open in some topic; the others must not open them."""

    def __init__(self) -> None:
        self._open: dict[str, str] = {}

    def locked(self, host: str, topic: str) -> bool:
        holder = self._open.get(host)
        return holder is not None and holder != topic

    def acquire(self, host: str, topic: str) -> None:
        self._open[host] = topic

    def release(self, host: str, topic: str) -> None:
        if self._open.get(host) == topic:
            del self._open[host]


def topic_lane(topic: str, host: str) -> str:
    """The lane of ``host``'s requests of ``topic``."""
    return f"{topic}{SEP}{host}"


def lane_host(lane: str) -> str:
    """The host key of a lane: after the topic's separator, or the lane itself."""
    return lane[lane.find(SEP) + 1 :]


def split_lane(lane: str) -> tuple[str, str]:
    topic, sep, host = lane.partition(SEP)
    if not sep:
        raise ValueError(f"{lane!r} is not a topic lane")
    return topic, host


@dataclass
class TopicFrontier:
    """One :class:`TwoLevelFrontier` per topic behind the frontier's interface.

    Lanes are ``topic_lane(topic, host)``; :meth:`pop` returns them (and
    :data:`PLAIN_LANE` for requests with no host, as the frontier does).
    """

    selector: TopicSelector
    frontiers: dict[str, TwoLevelFrontier]

    @classmethod
    def build(
        cls,
        selector: TopicSelector,
        make_frontier: Callable[[str, HostLock, SeqCounter], TwoLevelFrontier],
    ) -> TopicFrontier:
        """``make_frontier(topic, lock, sequence)``: the topic's frontier, sharing the host
        lock and the item numbering (one store holds every topic's queues)."""
        lock, sequence = HostLock(), SeqCounter()
        frontiers = {name: make_frontier(name, lock, sequence) for name in selector.names}
        return cls(selector, frontiers)

    def push(self, lane: str, quality: float, item: Any) -> bool:
        topic, host = split_lane(lane)
        return self.frontiers[topic].push(host, quality, item)

    def pop(self) -> tuple[str, Any] | None:
        for topic in self.selector.order():
            frontier = self.frontiers[topic]
            if not len(frontier):
                continue
            popped = frontier.pop()
            if popped is None:
                continue
            self.selector.served(topic)
            host, item = popped
            return (PLAIN_LANE if host == PLAIN_LANE else topic_lane(topic, host)), item
        return None

    def done(self, lane: str) -> None:
        topic, host = split_lane(lane)
        self.frontiers[topic].done(host)

    def observe(self, lane: str, measured: Measurement) -> None:
        """The response is the host's: the gap its next request must wait (``Crawl-delay``,
        ``TWOLEVEL_HOST_DELAY``, the learnt refusal gap) holds in every topic, or another
        topic would open the host as soon as this one's session ends."""
        topic, host = split_lane(lane)
        frontier = self.frontiers[topic]
        frontier.observe(host, measured)
        served = frontier.host(host)
        wait = served.retry_at - frontier.now() if served.retry_at else 0.0
        if wait > 0:
            for name, other in self.frontiers.items():
                if name != topic:
                    other.hold(host, wait, served.wait_reason)

    def observe_failure(
        self,
        lane: str,
        *,
        elapsed: float,
        timeout: bool,
        repeat: bool = False,
        silent: bool = False,
    ) -> None:
        topic, host = split_lane(lane)
        self.frontiers[topic].observe_failure(
            host, elapsed=elapsed, timeout=timeout, repeat=repeat, silent=silent
        )

    def observe_refusal(
        self, lane: str, *, retry_after: float | None, refused_before: int = 0
    ) -> bool:
        """A refusal is the server's: the host waits in every topic."""
        topic, host = split_lane(lane)
        again = {
            name: frontier.observe_refusal(
                host, retry_after=retry_after, refused_before=refused_before
            )
            for name, frontier in self.frontiers.items()
        }
        return again[topic]

    def reprice(self, cpu_price: float) -> None:
        for frontier in self.frontiers.values():
            frontier.reprice(cpu_price)

    def backed_off(self, lane: str) -> bool:
        topic, host = split_lane(lane)
        return self.frontiers[topic].backed_off(host)

    def set_min_gap(self, host: str, seconds: float) -> None:
        """A host's least gap (its robots.txt ``Crawl-delay``) holds in every topic."""
        for frontier in self.frontiers.values():
            frontier.set_min_gap(host, seconds)

    def restore_pages(self, lane: str, fetched: int) -> None:
        topic, host = split_lane(lane)
        self.frontiers[topic].restore_pages(host, fetched)

    def hold(self, host: str, seconds: float) -> None:
        """The server's wait holds in every topic."""
        for frontier in self.frontiers.values():
            frontier.hold(host, seconds)

    def host(self, lane: str, queue_factory: Any = None) -> Host:
        topic, host = split_lane(lane)
        return self.frontiers[topic].host(host, queue_factory=queue_factory)

    def set_estimate(self, host: str, estimate: Any) -> None:
        """Saved estimates are per host: every topic starts from them."""
        for frontier in self.frontiers.values():
            frontier.set_estimate(host, estimate)

    def restore(self, lanes: Iterable[str], max_seq: int) -> None:
        by_topic: dict[str, list[str]] = {name: [] for name in self.frontiers}
        for lane in lanes:
            topic, host = split_lane(lane)
            if topic not in by_topic:
                raise ValueError(f"stored requests of topic {topic!r}, which is not declared")
            if host != PLAIN_LANE:
                by_topic[topic].append(host)
        for topic, hosts in by_topic.items():
            self.frontiers[topic].restore(hosts, max_seq)

    def now(self) -> float:
        return next(iter(self.frontiers.values())).now()

    def next_retry_at(self) -> float | None:
        times = [t for f in self.frontiers.values() if (t := f.next_retry_at()) is not None]
        return min(times, default=None)

    def hosts(self) -> Iterator[Host]:
        for frontier in self.frontiers.values():
            yield from frontier.hosts()

    def __len__(self) -> int:
        return sum(len(f) for f in self.frontiers.values())

    def pending(self, topic: str) -> int:
        return len(self.frontiers[topic])

    @property
    def host_count(self) -> int:
        return sum(f.host_count for f in self.frontiers.values())

    @property
    def sessions_ended(self) -> int:
        return sum(f.sessions_ended for f in self.frontiers.values())

    @property
    def session_requests(self) -> int:
        return sum(f.session_requests for f in self.frontiers.values())

    @property
    def session_extensions(self) -> int:
        return sum(f.session_extensions for f in self.frontiers.values())

    def close(self) -> None:
        for frontier in self.frontiers.values():
            frontier.close()
