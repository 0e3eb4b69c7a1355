"""A snapshot of the frontier: what each host is doing, and *why* a host waits.

One pure function of the frontier's state and a clock reading, so the dashboard, the JSON
status, the Prometheus metrics and the periodic log line all show the same thing, and a
test can check it by hand. The snapshot is plain data (dicts, lists, numbers, strings):
``json.dumps`` takes it as it is. Its schema is :data:`SCHEMA_VERSION` and is described
in ``docs/watching.rst``.

A host is in exactly one state:

- ``in session``: open, serving URLs (``fetching`` if a request is in flight now);
- ``waiting``: not to be served before ``until`` (``why``: ``backoff``, its sessions
  failed; ``refused``, the server refused a request, 429/503 or ``Retry-After``;
  ``delay``, its requests must start a gap apart, ``TWOLEVEL_HOST_DELAY`` or robots.txt
  ``Crawl-delay``; ``pacing``, the server's rate, learnt from the responses it held);
- ``ready``: URLs queued, waiting for its turn in the ranking;
- ``given up``: takes no more URLs (``why``: ``failing`` or ``budget``);
- ``idle``: nothing queued.

No Scrapy here.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections import Counter
from collections.abc import Iterable
from typing import Any

from ..frontier.hosts import Host

SCHEMA_VERSION = 1
STATES = ("in session", "waiting", "ready", "given up", "idle")
#: Rows of the "held up by" list.
HELD_UP_ROWS = 10


def host_state(host: Host, now: float) -> tuple[str, str, float | None]:
    """``(state, why, until)`` of ``host`` at ``now`` (see the module docstring)."""
    if host.given_up:
        return "given up", host.given_up_for, None
    if host.open:
        return "in session", "fetching" if host.busy else "", None
    wait = host.waiting(now)
    if wait is not None:
        return "waiting", wait[1], wait[0]
    if len(host.queue):
        return "ready", "", None
    return "idle", "", None


def host_row(frontier: Any, host: Host, now: float) -> dict[str, Any]:
    """One row of the host table: state, queue, score and its terms, measurements."""
    state, why, until = host_state(host, now)
    estimate, params, policy = host.estimate, frontier.params, frontier.policy
    queued = len(host.queue)
    urls = policy.session_length(queued, estimate)
    took = estimate.session_gain() + urls * (estimate.service(params) + estimate.processing_time)
    return {
        "host": host.key,
        "state": state,
        "why": why,
        "wait_s": None if until is None else round(until - now, 3),
        "queued": queued,
        # A first-in first-out queue (breadth-first) does not track its best URL.
        "best_quality": (
            round(host.queue.best_quality(), 6)
            if queued and policy.orders_urls_by_quality
            else None
        ),
        "score": round(policy.score(host.queue, estimate, params), 6) if queued else 0.0,
        "terms": {
            "P": urls,  # URLs its next session would serve
            "T": round(took, 6),  # seconds of host time they would take
            "sum_Q": round(host.queue.head_sum(), 6) if queued else 0.0,
            "S": round(estimate.success_rate, 4),
        },
        "connection_s": round(estimate.connection_time, 4),
        "response_s": round(estimate.response_time, 4),
        "service_s": round(estimate.service(params), 4),
        "requests_per_connection": round(estimate.requests_per_connection, 2),
        "fetched": host.fetched,
        "sessions": host.sessions,
        "failures_in_a_row": host.failures,
        "failed_sessions": host.failed_sessions,  # in a row: what its back-off doubles on
        "refusals": estimate.refusals,
    }


def snapshot(
    frontier: Any,
    now: float,
    *,
    top: int = 50,
    named: Iterable[str] = (),
    crawl: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The frontier at ``now``: host counts by state, and the rows of the ``top`` hosts
    by score (ready or waiting, as the ranking sees them) plus every host in session and
    any host ``named``. ``crawl``: crawl-wide figures the caller adds (pages, quality)."""
    # Topics: one frontier per topic, one policy for all (docs/topics.rst).
    ranking = (
        next(iter(frontier.frontiers.values())) if hasattr(frontier, "frontiers") else frontier
    )
    counts: Counter[str] = Counter()
    why: Counter[str] = Counter()
    shown: dict[str, Host] = {}
    wanted = set(named)
    candidates = []
    held: list[tuple[float, str, Host, str, float]] = []  # quality held, key, host, why, until
    for host in frontier.hosts():
        state, reason, until = host_state(host, now)
        counts[state] += 1
        if reason and state in ("waiting", "given up"):
            why[f"{state}: {reason}"] += 1
        if state == "waiting" and len(host.queue) and until is not None:
            quality = host.queue.head_sum() * host.estimate.success_rate
            item = (quality, host.key, host, reason, until)
            if len(held) < HELD_UP_ROWS:
                heapq.heappush(held, item)
            elif item > held[0]:
                heapq.heapreplace(held, item)
        if state == "in session" or host.key in wanted:
            shown[host.key] = host
        elif len(host.queue) and state != "given up":
            candidates.append(host)
    for host in heapq.nlargest(
        top,
        candidates,
        key=lambda h: ranking.policy.score(h.queue, h.estimate, ranking.params),
    ):
        shown[host.key] = host
    snap = {
        "schema": SCHEMA_VERSION,
        "crawl": {
            "policy": ranking.policy.name,
            # The cost model's constants (TWOLEVEL_* settings: see docs/settings.rst).
            "policy_params": dataclasses.asdict(ranking.params),
            "max_open_hosts": ranking.max_open_hosts,
            "pending": len(frontier),
            "hosts": sum(counts.values()),
            **(crawl or {}),
        },
        "states": {state: counts[state] for state in STATES},
        "reasons": dict(sorted(why.items())),
        "hosts": [host_row(ranking, host, now) for host in shown.values()],
        # The waiting hosts whose next session would gather the most quality: what their
        # wait costs the crawl now (its quality ΣQ·S, held until the wait ends).
        "held_up": [
            {
                "host": host.key,
                "why": reason,
                "wait_s": round(until - now, 3),
                "queued": len(host.queue),
                "quality_held": round(quality, 6),
            }
            for quality, _, host, reason, until in sorted(held, reverse=True)
        ],
    }
    if hasattr(frontier, "selector"):
        snap["topics"] = topic_rows(frontier, now)
    return snap


def topic_rows(frontier: Any, now: float) -> list[dict[str, Any]]:
    """Per topic (``TWOLEVEL_TOPICS``): its priority class (lower is more urgent), the
    slice it is given and what is left of it, whether it is serving now, its pending
    requests and its counts (see :mod:`~scrapy_twolevel.frontier.topic_frontier`)."""
    selector = frontier.selector
    return [
        {
            "topic": name,
            "priority": state.spec.priority,
            "running": selector.running == name,
            "pending": frontier.pending(name),
            "quota": state.spec.quota,
            **{
                k: round(v, 3) if isinstance(v, float) else v for k, v in state.to_dict(now).items()
            },
        }
        for name, state in selector.state.items()
    ]
