"""The reference schedule: a crawler that knows every page's quality, size and links, and
every host's rate, bandwidth and service time, in advance.

Simulated on the same graph, with the same ``K`` connections and one request in flight per
host. Whenever a connection is free it sends, among the hosts not in flight, the request
with the most quality per second it will cost: the best discovered page of each host (a
page is discovered when a page linking to it has been fetched; the start pages at time 0)
over ``delay + BASE + latency + size / bandwidth``, where the delay is what the host's
rate limit will hold the request (nginx's ``limit_req``, a leaky bucket: requests are
spaced ``1 / rate`` apart, the first one free) and the latency what the server holds every
request (the Apache web's ``QS_Delay``, :mod:`realweb.apache`). The crawler's own CPU,
connection set-up, TLS handshakes and link parsing cost nothing here: it is a bound for
the politeness-bound regime, not a crawler.
:func:`schedule_cpu` is the same crawler with one core that pays the CPU a real crawl was
measured to spend per page and per byte (:mod:`realweb.cpu_model`).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from realweb.cpu_model import CpuModel
from realweb.servers import HostProfile

#: Seconds a host takes to serve a small page on loopback, delays and transfer aside.
BASE = 0.002


def schedule(
    corpus: dict[str, Any],
    names: list[str],
    profiles: list[HostProfile],
    connections: int,
    horizon: float,
) -> list[tuple[float, float]]:
    """``(time, quality gathered)`` of the clairvoyant crawl, one point per page."""
    hosts = _hosts(corpus, names, profiles)
    now, gathered, curve = 0.0, 0.0, []
    running: list[tuple[float, int, str]] = []  # (end, host, page)
    free = connections
    while True:
        while free:
            best = _best(hosts, now, lambda took, size: took)
            if best is None:
                break
            _send(hosts, best, now, running)
            free -= 1
        if not running:
            break
        now, h, page = heapq.heappop(running)
        if now > horizon:
            break
        host = hosts[h]
        host["busy"] = False
        free += 1
        quality, _, links = host["pages"][page]
        gathered += quality
        curve.append((now, gathered))
        _discover(host, links)
    return curve


def _hosts(
    corpus: dict[str, Any], names: list[str], profiles: list[HostProfile]
) -> list[dict[str, Any]]:
    hosts = []
    for name, profile in zip(names, profiles, strict=True):
        site = corpus["sites"][name]
        hosts.append(
            {
                "pages": site["pages"],
                "interval": 60.0 / profile.rate_per_minute if profile.rate_per_minute else 0.0,
                "latency": profile.latency,
                "bandwidth": profile.bandwidth,
                "tat": 0.0,  # when the rate limit lets the next request through
                "queue": [(-site["pages"][site["index"]][0], site["index"])],
                "known": {site["index"]},
                "busy": False,
            }
        )
    return hosts


def _send(
    hosts: list[dict[str, Any]],
    best: tuple[float, int, str, float],
    now: float,
    running: list[tuple[float, int, str]],
) -> None:
    """Send ``best`` (from :func:`_best`): its host is busy until it ends."""
    _, h, page, took = best
    host = hosts[h]
    heapq.heappop(host["queue"])
    host["busy"] = True
    host["tat"] = max(now, host["tat"]) + host["interval"]
    heapq.heappush(running, (now + took, h, page))


def _discover(host: dict[str, Any], links: list[str]) -> None:
    """A fetched page's links join its host's queue (the first time each is seen)."""
    for target in links:
        if target not in host["known"]:
            host["known"].add(target)
            heapq.heappush(host["queue"], (-host["pages"][target][0], target))


def _best(
    hosts: list[dict[str, Any]], now: float, cost: Callable[[float, int], float]
) -> tuple[float, int, str, float] | None:
    """The next request: ``(score, host, page, seconds it will take)``, the score being
    quality over ``cost(took, size)``."""
    best = None
    for h, host in enumerate(hosts):
        if host["busy"] or not host["queue"]:
            continue
        neg_quality, page = host["queue"][0]
        size = host["pages"][page][1]
        took = max(0.0, host["tat"] - now)  # held by the rate limit until then
        took += BASE + host["latency"] + (size / host["bandwidth"] if host["bandwidth"] else 0.0)
        score = -neg_quality / cost(took, size)
        if best is None or score > best[0]:
            best = (score, h, page, took)
    return best


def rate_bound(corpus: dict[str, Any], rates: dict[str, float], horizon: float) -> float:
    """The most quality any crawler can gather by ``horizon``: every host (``rates``: site
    name -> requests per minute) served at its full rate from time 0 (``1 + rate *
    horizon`` requests), its best pages first, known without following a link, with no
    limit on connections, transfer time or CPU. A target above this cannot be met by any
    schedule."""
    gathered = 0.0
    for name, rate_per_minute in rates.items():
        pages = corpus["sites"][name]["pages"]
        allowed = 1 + int(rate_per_minute * horizon / 60.0)
        gathered += sum(sorted((v[0] for v in pages.values()), reverse=True)[:allowed])
    return gathered


def schedule_cpu(
    corpus: dict[str, Any],
    names: list[str],
    profiles: list[HostProfile],
    connections: int,
    horizon: float,
    cpu: CpuModel,
) -> list[tuple[float, float]]:
    """:func:`schedule` for a crawler with one core: every response costs it
    ``cpu.cost(size)`` seconds before its quality counts and its links are known.

    The core handles the received responses best first (the most quality per CPU second;
    a real crawler handles them as they arrive, so this is the stronger reference), and a
    free connection sends the request with the most quality per unit of the resource it
    uses most: ``took / connections`` of the connections' time or ``cpu.cost(size)`` of
    the core's, whichever is larger.
    """
    hosts = _hosts(corpus, names, profiles)
    now, gathered, curve = 0.0, 0.0, []
    running: list[tuple[float, int, str]] = []  # fetches: (end, host, page)
    received: list[tuple[float, int, str, float]] = []  # (-quality per CPU s, host, page, cost)
    core: tuple[float, int, str] | None = None  # (done at, host, page) on the core now
    free = connections
    while True:
        if core is None and received:
            _, h, page, cost = heapq.heappop(received)
            core = (now + cost, h, page)
        if core is not None and core[0] <= now:
            # Handled before a free connection chooses: it knows this page's links.
            _, h, page = core
            core = None
            host = hosts[h]
            quality, _, links = host["pages"][page]
            gathered += quality
            curve.append((now, gathered))
            _discover(host, links)
            continue
        while free:
            best = _best(hosts, now, lambda took, size: max(took / connections, cpu.cost(size)))
            if best is None:
                break
            _send(hosts, best, now, running)
            free -= 1
        if not running and core is None:
            break
        if core is not None and (not running or core[0] <= running[0][0]):
            now = core[0]  # the core finishes next: handled at the top
        else:
            now, h, page = heapq.heappop(running)
            host = hosts[h]
            host["busy"] = False
            free += 1
            quality, size, _ = host["pages"][page]
            cost = cpu.cost(size)
            heapq.heappush(received, (-quality / cost if cost else -quality, h, page, cost))
        if now > horizon:
            break
    return curve
