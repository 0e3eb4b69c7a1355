"""The reference schedule: a crawler that knows every page's quality, size and links, and
every host's rate, bandwidth and service time, in advance.

Simulated on the same graph, with the same ``K`` connections and one request in flight per
host. Whenever a connection is free it sends, among the hosts not in flight, the request
with the most quality per second it will cost: the best discovered page of each host (a
page is discovered when a page linking to it has been fetched; the start pages at time 0)
over ``delay + BASE + latency + size / bandwidth``, where the delay is what the host's
rate limit will hold the request (nginx's ``limit_req``, a leaky bucket: requests are
spaced ``1 / rate`` apart, the first one free) and the latency what the server holds every
request (the Apache web's ``QS_Delay``, :mod:`realweb.apache`). A host with a burst limit
(the Apache web's) is sent at most ``burst`` requests in a window, which opens with the
first request after the previous window ended: the clairvoyant waits the window out
instead of being refused, and holds no connection meanwhile (it may open the next window
up to a second before mod_qos, which counts whole seconds). The crawler's own CPU,
connection set-up, TLS handshakes and link parsing cost nothing here: it is a bound for
the politeness-bound regime, not a crawler.
:func:`schedule_cpu` is the same crawler with one core that pays the CPU a real crawl was
measured to spend per page and per byte (:mod:`realweb.cpu_model`) and per TLS handshake
(:mod:`realweb.handshake`): a
request to an HTTPS host opens a connection, and pays a handshake, when it is the host's
first, when the last one has served the host's keep-alive limit, or when it has been idle
longer than the host's keep-alive timeout (the Apache web's; the clairvoyant keeps one
connection per host, since it sends one request at a time to each). The handshake's CPU is
charged with the response's, on the core; its round trips on loopback are left out.
:func:`schedule_loop` is that crawler as Scrapy runs one: on one event loop, so requests go
out and replies come in only between two responses' handling, and with Scrapy's bound on
the responses received but not yet handled (``SCRAPER_SLOT_MAX_ACTIVE_SIZE``). Unbounded,
the CPU-aware clairvoyant fetches far ahead of its core: on the benchmark's CPU-bound web
its times need a backlog of more than 50 MB (``reference_study.py``), which no Scrapy
crawl holds.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from typing import Any

from realweb.cpu_model import CpuModel
from realweb.servers import HostProfile

#: Seconds a host takes to serve a small page on loopback, delays and transfer aside.
BASE = 0.002

#: Scrapy's default ``SCRAPER_SLOT_MAX_ACTIVE_SIZE``: above so many bytes of responses in its
#: scraper, the engine takes no request from the scheduler.
SCRAPY_BACKLOG = 5_000_000

#: The least a response counts toward that bound (``scrapy.core.scraper``'s own floor).
MIN_RESPONSE_SIZE = 1024


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
            best = _best(hosts, now, lambda took, size, handshake: took)
            if best is None:
                break
            _send(hosts, best, now, running)
            free -= 1
        wake = _next_opening(hosts, now) if free else None
        if not running:
            if wake is None or wake > horizon:
                break
            now = wake
            continue
        if wake is not None and wake < running[0][0]:
            now = wake
            continue
        now, h, page = heapq.heappop(running)
        if now > horizon:
            break
        host = hosts[h]
        host["busy"] = False
        host["last_end"] = now
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
                "burst": profile.burst,
                "window": profile.burst_window,
                "opened": -float("inf"),  # when the burst limit's window opened
                "sent": 0,  # requests sent in that window
                "tls": profile.tls,
                "keepalive": profile.keepalive_requests,
                "idle_timeout": profile.keepalive_timeout or float("inf"),
                "on_connection": 0,  # requests sent on the connection kept open
                "last_end": -float("inf"),  # when the host's last request ended
                "handshake": False,  # whether the request in flight opened a TLS connection
            }
        )
    return hosts


def _send(
    hosts: list[dict[str, Any]],
    best: tuple[float, int, str, float],
    now: float,
    running: list[tuple[float, int, str]],
) -> None:
    """Send ``best`` (from :func:`_best` or a replay, :func:`_replayed`): its host is busy
    until it ends."""
    _, h, page, took = best
    host = hosts[h]
    queue = host["queue"]
    if queue[0][1] == page:
        heapq.heappop(queue)
    else:  # a replay's choice, not the host's best page
        queue.remove(next(entry for entry in queue if entry[1] == page))
        heapq.heapify(queue)
    host["busy"] = True
    host["tat"] = max(now, host["tat"]) + host["interval"]
    fresh = _new_connection(host, now)
    host["handshake"] = fresh and host["tls"]
    host["on_connection"] = 1 if fresh else host["on_connection"] + 1
    if host["burst"]:
        if now >= host["opened"] + host["window"]:
            host["opened"], host["sent"] = now, 0
        host["sent"] += 1
    heapq.heappush(running, (now + took, h, page))


def _new_connection(host: dict[str, Any], now: float) -> bool:
    """Whether a request sent now opens a connection (the module docstring)."""
    return (
        host["on_connection"] == 0
        or host["on_connection"] >= host["keepalive"]
        or now - host["last_end"] > host["idle_timeout"]
    )


def _blocked_until(host: dict[str, Any], now: float) -> float:
    """When the host's burst limit lets its next request through (``now`` if it does)."""
    if host["burst"] and host["sent"] >= host["burst"]:
        return max(now, host["opened"] + host["window"])
    return now


def _next_opening(hosts: list[dict[str, Any]], now: float) -> float | None:
    """The first time after ``now`` a host with pages waiting leaves its burst limit."""
    times = [
        until
        for host in hosts
        if host["queue"] and not host["busy"] and (until := _blocked_until(host, now)) > now
    ]
    return min(times, default=None)


def _discover(host: dict[str, Any], links: list[str]) -> None:
    """A fetched page's links join its host's queue (the first time each is seen)."""
    for target in links:
        if target not in host["known"]:
            host["known"].add(target)
            heapq.heappush(host["queue"], (-host["pages"][target][0], target))


def _best(
    hosts: list[dict[str, Any]], now: float, cost: Callable[[float, int, bool], float]
) -> tuple[float, int, str, float] | None:
    """The next request: ``(score, host, page, seconds it will take)``, the score being
    quality over ``cost(took, size, whether it pays a TLS handshake)``."""
    best = None
    for h, host in enumerate(hosts):
        if host["busy"] or not host["queue"] or _blocked_until(host, now) > now:
            continue
        neg_quality, page = host["queue"][0]
        size = host["pages"][page][1]
        took = max(0.0, host["tat"] - now)  # held by the rate limit until then
        took += BASE + host["latency"] + (size / host["bandwidth"] if host["bandwidth"] else 0.0)
        handshake = host["tls"] and _new_connection(host, now)
        score = -neg_quality / cost(took, size, handshake)
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


#: Picks the next request among the free hosts at a time (:func:`_best`'s form) or none.
Chooser = Callable[[list[dict[str, Any]], float], tuple[float, int, str, float] | None]


def _replayed(names: list[str], order: list[tuple[str, str]]) -> Chooser:
    """A chooser that replays a crawl's choices: among the hosts free to send, the page
    that came earliest in ``order`` (``(site, page)`` as the crawl sent them) of those
    each host has discovered. Pages the crawl never sent are never sent."""
    position: dict[tuple[int, str], int] = {}
    index = {name: h for h, name in enumerate(names)}
    for i, (site, page) in enumerate(order):
        position.setdefault((index[site], page), i)

    def choose(hosts: list[dict[str, Any]], now: float) -> tuple[float, int, str, float] | None:
        best: tuple[int, int, str] | None = None
        for h, host in enumerate(hosts):
            if host["busy"] or not host["queue"] or _blocked_until(host, now) > now:
                continue
            known = [
                (position[h, page], page) for _, page in host["queue"] if (h, page) in position
            ]
            if known and (best is None or min(known)[0] < best[0]):
                i, page = min(known)
                best = (i, h, page)
        if best is None:
            return None
        i, h, page = best
        host = hosts[h]
        size = host["pages"][page][1]
        took = max(0.0, host["tat"] - now) + BASE + host["latency"]
        took += size / host["bandwidth"] if host["bandwidth"] else 0.0
        return (-float(i), h, page, took)

    return choose


def _fill(
    hosts: list[dict[str, Any]],
    now: float,
    running: list[tuple[float, int, str]],
    free: int,
    connections: int,
    cpu: CpuModel,
    replay: Chooser | None = None,
) -> int:
    """Send on the free connections the requests with the most quality per unit of the
    resource each uses most (:func:`schedule_cpu`), or those ``replay`` chooses; how many
    connections stay free."""
    while free:
        if replay is not None:
            best = replay(hosts, now)
        else:
            best = _best(
                hosts,
                now,
                lambda took, size, handshake: max(took / connections, cpu.cost(size, handshake)),
            )
        if best is None:
            break
        _send(hosts, best, now, running)
        free -= 1
    return free


def _land(host: dict[str, Any], end: float, page: str, cpu: CpuModel) -> tuple[float, float]:
    """A fetch of ``host`` ended at ``end``: the host is free again. Returns the response's
    rank among those received (minus its quality per CPU second) and its CPU cost."""
    host["busy"] = False
    host["last_end"] = end
    quality, size, _ = host["pages"][page]
    cost = cpu.cost(size, host["handshake"])
    return (-quality / cost if cost else -quality), cost


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
        free = _fill(hosts, now, running, free, connections, cpu)
        wake = _next_opening(hosts, now) if free else None
        if not running and core is None:
            if wake is None or wake > horizon:
                break
            now = wake
            continue
        core_done = core[0] if core is not None else math.inf
        fetch_done = running[0][0] if running else math.inf
        if wake is not None and wake < min(core_done, fetch_done):
            now = wake  # a host leaves its burst limit: a free connection may send
        elif core_done <= fetch_done:
            now = core_done  # the core finishes next: handled at the top
        else:
            now, h, page = heapq.heappop(running)
            free += 1
            rank, cost = _land(hosts[h], now, page, cpu)
            heapq.heappush(received, (rank, h, page, cost))
        if now > horizon:
            break
    return curve


def schedule_loop(
    corpus: dict[str, Any],
    names: list[str],
    profiles: list[HostProfile],
    connections: int,
    horizon: float,
    cpu: CpuModel,
    backlog: float = SCRAPY_BACKLOG,
    best_first: bool = True,
    order: list[tuple[str, str]] | None = None,
) -> list[tuple[float, float]]:
    """:func:`schedule_cpu` on one event loop with a bounded backlog, as Scrapy runs it.

    Handling a response holds the loop for its CPU: replies that end meanwhile are taken
    in, and free connections send, only after it. After each handled response the loop
    takes in the replies that ended, then fills the free connections, unless the received
    responses not yet handled hold more than ``backlog`` bytes (each at least
    :data:`MIN_RESPONSE_SIZE`), as Scrapy's engine stops taking requests then. The core
    still handles them best first and a page's quality counts once it is handled, as in
    :func:`schedule_cpu`; that one is this with an unbounded backlog and a core apart from
    the loop. ``best_first=False`` handles them in the order they arrived instead (the
    ablation of :mod:`reference_study`). With ``order`` (``(site, page)`` as a crawl sent
    them) the requests are not the clairvoyant's but the crawl's, replayed
    (:func:`_replayed`): the crawl's choices at this crawler's speed.
    """
    replay = None if order is None else _replayed(names, order)
    hosts = _hosts(corpus, names, profiles)
    arrivals = 0
    now, gathered, curve = 0.0, 0.0, []
    running: list[tuple[float, int, str]] = []  # fetches: (end, host, page)
    received: list[tuple[float, int, str, float]] = []  # (-quality per CPU s, host, page, cost)
    held = 0.0  # bytes of the received responses not yet handled
    free = connections

    def take_in() -> None:
        nonlocal free, held, arrivals
        while running and running[0][0] <= now:
            end, h, page = heapq.heappop(running)
            free += 1
            rank, cost = _land(hosts[h], end, page, cpu)
            arrivals += 1
            heapq.heappush(received, (rank if best_first else arrivals, h, page, cost))
            held += max(hosts[h]["pages"][page][1], MIN_RESPONSE_SIZE)

    while True:
        take_in()
        if received:
            _, h, page, cost = heapq.heappop(received)
            now += cost
            if now > horizon:
                break
            host = hosts[h]
            quality, size, links = host["pages"][page]
            held -= max(size, MIN_RESPONSE_SIZE)
            gathered += quality
            curve.append((now, gathered))
            _discover(host, links)
            take_in()
        if held <= backlog:
            free = _fill(hosts, now, running, free, connections, cpu, replay)
        if received:
            continue
        wake = _next_opening(hosts, now) if free and held <= backlog else None
        nxt = min(running[0][0] if running else math.inf, math.inf if wake is None else wake)
        if nxt > horizon:
            break
        now = nxt
    return curve
