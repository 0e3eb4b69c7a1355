"""Fetching the simulated seed pages: what each fetch finds, and the measures of a crawl.

A fetch of a seed at time f shows the latest ``list_size`` articles published by f. The
links it shows that no earlier fetch showed are its *new links*; an article pushed off
the page before any fetch showed it is *missed* (never discovered from that seed).
Everything published up to the crawl's start ``t0`` counts as seen (the history crawl
fetched the page then).

Two drivers: :func:`crawl_times` for fetch times known in advance (fixed intervals, the
clairvoyant), vectorised, and :func:`crawl_policy` for a policy that picks each next
fetch from what the last one found, on a virtual clock (a heap of ``(time, seed)``; ties
go to the lower seed index). Both return a :class:`CrawlLog`; :func:`measure` turns it
into the reported figures over a window.

Pure: numpy; no I/O.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from scrapy_twolevel.recrawl.samples import known_or_midpoint

from .sites import MINUTE, World


@dataclass
class CrawlLog:
    """Every fetch of a crawl, per seed: its time and how many articles it had seen."""

    t0: float
    #: ``times[i]``: seed i's fetch times, sorted.
    times: list[np.ndarray]
    #: ``counts[i][k]``: articles published up to fetch k (its page's newest index + 1).
    counts: list[np.ndarray]
    start_counts: list[int]


def _log(world: World, t0: float, times: Sequence[np.ndarray]) -> CrawlLog:
    counts = [
        np.searchsorted(a, f, side="right") for a, f in zip(world.arrivals, times, strict=True)
    ]
    start = [int(np.searchsorted(a, t0, side="right")) for a in world.arrivals]
    return CrawlLog(t0, [np.asarray(f, dtype=float) for f in times], counts, start)


def crawl_times(world: World, t0: float, times: Sequence[np.ndarray]) -> CrawlLog:
    """The crawl that fetches seed i at ``times[i]`` (sorted, all after ``t0``)."""
    return _log(world, t0, times)


def crawl_policy(
    world: World,
    t0: float,
    t_end: float,
    first: Sequence[float],
    next_fetch: Callable[[str, float, int], float],
) -> CrawlLog:
    """Fetch seed i first at ``first[i]``, then when ``next_fetch(key, now, new_links)`` says.

    Fetches stop at ``t_end``. ``next_fetch`` answers an absolute time; one not after
    ``now`` is moved a millisecond later.
    """
    lists = [a.tolist() for a in world.arrivals]
    sizes = [s.list_size for s in world.seeds]
    keys = world.keys
    seen = [bisect.bisect_right(a, t0) for a in lists]
    times: list[list[float]] = [[] for _ in lists]
    heap = [(float(t), i) for i, t in enumerate(first)]
    heapq.heapify(heap)
    while heap:
        now, i = heapq.heappop(heap)
        if now >= t_end:
            continue
        c = bisect.bisect_right(lists[i], now)
        new = c - max(seen[i], c - sizes[i])
        seen[i] = c
        times[i].append(now)
        nxt = next_fetch(keys[i], now, new)
        heapq.heappush(heap, (max(nxt, now + 1e-3), i))
    return _log(world, t0, [np.asarray(t) for t in times])


@dataclass
class Discovery:
    """Per seed: when each article was discovered (NaN: not) and whether it was missed."""

    found_at: list[np.ndarray]
    missed: list[np.ndarray]
    new_links: list[np.ndarray]


def discover(world: World, log: CrawlLog) -> Discovery:
    """Which fetch discovered each article published after ``t0``, and which scrolled off."""
    found_at, missed, new_links = [], [], []
    for i, arrivals in enumerate(world.arrivals):
        n_size = world.seeds[i].list_size
        f, c = log.times[i], log.counts[i]
        found = np.full(arrivals.size, np.nan)
        lost = np.zeros(arrivals.size, dtype=bool)
        c0 = log.start_counts[i]
        prev = np.concatenate([[c0], c[:-1]]) if c.size else np.zeros(0, dtype=int)
        new_links.append(c - np.maximum(prev, c - n_size))
        if c.size and c[-1] > c0:
            js = np.arange(c0, c[-1])
            k = np.searchsorted(c, js, side="right")
            ok = js >= c[k] - n_size
            found[js[ok]] = f[k[ok]]
            lost[js[~ok]] = True
        found_at.append(found)
        missed.append(lost)
    return Discovery(found_at, missed, new_links)


def measure(world: World, log: CrawlLog, w0: float, w1: float) -> dict[str, float]:
    """Cost, hit rate, delays and missed articles over the window ``[w0, w1)``.

    Fetches count when made in the window; articles when published in it (they may be
    discovered after ``w1``). Delays are over discovered articles; a missed article has
    none and is counted in ``missed``; ``undiscovered`` are those neither found nor missed
    by the crawl's end (none, when the crawl runs on past ``w1`` by the longest interval).
    """
    d = discover(world, log)
    fetches = hits = 0
    delays, missed, undiscovered, articles = [], 0, 0, 0
    for i, arrivals in enumerate(world.arrivals):
        f = log.times[i]
        inside = (f >= w0) & (f < w1)
        fetches += int(inside.sum())
        hits += int((d.new_links[i][inside] > 0).sum())
        sel = (arrivals >= w0) & (arrivals < w1)
        articles += int(sel.sum())
        found = d.found_at[i][sel]
        ok = ~np.isnan(found)
        delays.append(found[ok] - arrivals[sel][ok])
        lost = d.missed[i][sel]
        missed += int(lost.sum())
        undiscovered += int((~ok & ~lost).sum())
    all_delays = np.concatenate(delays) if delays else np.zeros(0)
    return {
        "fetches": fetches,
        "hits": hits,
        "hit_rate": hits / fetches if fetches else 0.0,
        "articles": articles,
        "mean_delay_s": float(all_delays.mean()) if all_delays.size else float("nan"),
        "p90_delay_s": float(np.percentile(all_delays, 90)) if all_delays.size else float("nan"),
        "missed": missed,
        "undiscovered": undiscovered,
    }


def fixed_times(
    world: World, t0: float, t_end: float, interval: float, rng: np.random.Generator
) -> list[np.ndarray]:
    """Every seed every ``interval`` seconds from a random phase in ``[t0, t0 + interval)``."""
    out = []
    for _ in world.seeds:
        phase = t0 + rng.uniform(0, interval)
        out.append(np.arange(phase, t_end, interval))
    return out


# -- the history crawl that the model is trained on --------------------------------------


def history_events(
    world: World,
    t0: float,
    t1: float,
    rng: np.random.Generator,
    gaps: tuple[float, float],
    outages: float = 0.0,
) -> tuple[list[tuple[str, float | None]], dict[str, int]]:
    """``(seed_key, publish_time)`` of what a crawl of ``[t0, t1)`` discovered.

    The crawl refetches each seed after a gap uniform in ``gaps`` (seconds), or, with
    probability ``outages``, after an outage of 1-4 hours. A dated
    article gets its own publish time; an undated one the midpoint rule's (its discovering
    fetch and the one before, if less than an hour apart), else ``None``. Also returns
    counts: ``articles`` published, ``discovered``, ``dated``, ``midpoint``, ``unknown``,
    ``missed`` (scrolled off before any fetch).
    """
    times = []
    for _ in world.seeds:
        n = int((t1 - t0) / gaps[0]) + 2
        gap = rng.uniform(gaps[0], gaps[1], n)
        # Now and then the crawler was down for 1-4 hours: no midpoint across such a gap.
        down = rng.random(n) < outages
        gap[down] = rng.uniform(3600.0, 4 * 3600.0, int(down.sum()))
        f = t0 + np.cumsum(gap)
        times.append(f[f < t1])
    log = _log(world, t0, times)
    disc = discover(world, log)
    events: list[tuple[str, float | None]] = []
    stats = dict.fromkeys(("articles", "discovered", "dated", "midpoint", "unknown", "missed"), 0)
    for i, s in enumerate(world.seeds):
        arrivals, dated = world.arrivals[i], world.dated[i]
        sel = (arrivals > t0) & (arrivals < t1)
        stats["articles"] += int(sel.sum())
        stats["missed"] += int(disc.missed[i][sel].sum())
        f = log.times[i]
        for j in np.flatnonzero(sel & ~np.isnan(disc.found_at[i])):
            found = float(disc.found_at[i][j])
            k = int(np.searchsorted(f, found))
            previous = float(f[k - 1]) if k > 0 else None
            known = float(arrivals[j]) if dated[j] else None
            t = known_or_midpoint(known, previous, found)
            stats["discovered"] += 1
            if known is not None:
                stats["dated"] += 1
            elif t is not None:
                stats["midpoint"] += 1
            else:
                stats["unknown"] += 1
            events.append((s.key, t))
    return events, stats


# -- the clairvoyant ------------------------------------------------------------------------


def _place(arrivals: Sequence[float], cost: float, list_size: int) -> list[float]:
    """Fetch times minimising ``Σ delay + cost · fetches`` for known arrivals, then capped.

    Optimal fetches sit at arrival times. ``E[i] = cost + min_j (E[j] + Σ_{j<l<=i} (a_i -
    a_l))`` over the last fetch j before i: a line in ``a_i`` per j, so the minimum is a
    lower envelope queried at increasing ``a_i`` (a convex-hull trick, O(n)). A gap of
    more than ``list_size`` arrivals between two fetches then gets fetches added every
    ``list_size`` arrivals, so nothing scrolls off.
    """
    n = len(arrivals)
    if n == 0:
        return []
    prefix = [0.0] * (n + 1)
    for i, a in enumerate(arrivals):
        prefix[i + 1] = prefix[i] + a
    best = [0.0] * (n + 1)
    arg = [0] * (n + 1)
    # Lines y = b - j*x for each candidate j; slopes -j decrease as j grows.
    hull_j = [0]
    hull_b = [0.0]
    head = 0
    for i in range(1, n + 1):
        x = arrivals[i - 1]
        while (
            head + 1 < len(hull_j)
            and hull_b[head + 1] - hull_j[head + 1] * x <= hull_b[head] - hull_j[head] * x
        ):
            head += 1
        j = hull_j[head]
        best[i] = cost + i * x - prefix[i] + hull_b[head] - j * x
        arg[i] = j
        b_new, m_new = best[i] + prefix[i], -i
        while len(hull_j) - head >= 2:
            m1, b1 = -hull_j[-2], hull_b[-2]
            m2, b2 = -hull_j[-1], hull_b[-1]
            if (b_new - b1) * (m1 - m2) <= (b2 - b1) * (m1 - m_new):
                hull_j.pop()
                hull_b.pop()
            else:
                break
        hull_j.append(-m_new)
        hull_b.append(b_new)
        head = min(head, len(hull_j) - 1)
    chosen = []
    i = n
    while i > 0:
        chosen.append(i)
        i = arg[i]
    chosen.reverse()
    out, last = [], 0
    for i in chosen:
        while i - last > list_size:
            last += list_size
            out.append(arrivals[last - 1])
        out.append(arrivals[i - 1])
        last = i
    return out


def clairvoyant_times(world: World, t0: float, t1: float, cost: float) -> list[np.ndarray]:
    """Per seed, the fetch times of :func:`_place` for the articles published in ``(t0, t1)``.

    ``cost`` (seconds of total delay one fetch is worth) sets how many fetches: the same
    for every seed, which is what minimises the total delay for their total.
    """
    out = []
    for i, arrivals in enumerate(world.arrivals):
        sel = arrivals[(arrivals > t0) & (arrivals < t1)]
        rel = (sel - t0).tolist()
        placed = _place(rel, cost, world.seeds[i].list_size)
        out.append(np.asarray(placed) + t0)
    return out


def first_fetches(
    world: World, t0: float, rng: np.random.Generator, spread: float = 10 * MINUTE
) -> list[float]:
    """Each seed's first fetch of a policy-driven crawl: ``t0`` plus a random phase."""
    return [t0 + float(rng.uniform(0, spread)) for _ in world.seeds]
