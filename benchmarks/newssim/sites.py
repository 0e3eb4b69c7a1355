"""Simulated news sites: seed pages publishing as non-homogeneous Poisson processes.

Each site has a newsroom in its own time zone, a daily rhythm (a night floor, a morning
and an afternoon peak, in local time), a weekly one (weekdays near 1, weekends lower) and
one to four seed pages (sections; some sites list their front page, at the root, too).
Each seed's rate is::

    λ(t) = volume / 24 · profile(local hour and weekday of t) · drift(t) + bursts(t)

in articles per hour, where ``profile`` has mean 1 over a week, so ``volume`` is the
seed's mean articles per day (log-uniform from a few to a few hundred). A burst is
breaking news: it adds ``(multiplier - 1) · volume / 24`` for 20-120 minutes, about once
every four days per seed, at any hour (unpredictable from the hour and weekday). The
rate is built on a one-minute grid; arrivals are drawn per minute (Poisson) at uniform
times within it.

A seed page shows only its latest ``list_size`` items (10-30): an article pushed off
before a fetch is never discovered from it. A share ``dated`` (90%) of article pages
carries its publish time in its metadata; the rest are dated by the midpoint rule when
the crawl that found them allows it.

Pure: numpy and a seed; no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from scrapy_twolevel.recrawl.samples import seed_key

MINUTE = 60.0
HOUR = 3600.0
DAY = 86400.0
#: Monday 2024-01-01 00:00 UTC: history starts here.
EPOCH = 1704067200.0
SECTIONS = ("world", "politics", "business", "sport", "tech", "culture", "science", "local")


@dataclass(frozen=True)
class Seed:
    """One seed page: its URL and key, and what drives its rate."""

    url: str
    key: str
    site: int
    volume: float  # mean articles per day, before drift
    list_size: int
    dated: float  # share of articles whose page carries the publish time


@dataclass(frozen=True)
class Drift:
    """From ``start`` on, the seeds of ``sites`` publish ``factor`` times as much."""

    start: float
    factor: float
    sites: frozenset[int]


@dataclass
class World:
    """A set of sites over ``[start, end)``: per-minute rates and the articles drawn."""

    seeds: list[Seed]
    start: float
    end: float
    #: ``rates[i, k]``: seed i's articles per hour in minute k (bursts and drift included).
    rates: np.ndarray
    #: ``base[i, k]``: the same without bursts (the hour-and-weekday rhythm, with drift).
    base: np.ndarray
    #: Sorted publish times per seed.
    arrivals: list[np.ndarray]
    #: Whether each article's page carries its publish time.
    dated: list[np.ndarray]
    bursts: list[list[tuple[float, float, float]]] = field(default_factory=list)
    drift: Drift | None = None

    @property
    def keys(self) -> list[str]:
        return [s.key for s in self.seeds]

    def minute(self, t: float) -> int:
        return min(max(int((t - self.start) // MINUTE), 0), self.rates.shape[1] - 1)

    def mean_rate(self, i: int, t0: float, t1: float, *, bursts: bool = True) -> float:
        """Seed i's mean rate (articles per hour) over ``[t0, t1)``, whole minutes."""
        a, b = self.minute(t0), max(self.minute(t0) + 1, int((t1 - self.start) // MINUTE))
        grid = self.rates if bursts else self.base
        return float(grid[i, a:b].mean())

    def hourly(self, i: int, t0: float, hours: int, *, bursts: bool = True) -> np.ndarray:
        """Seed i's expected articles in each of ``hours`` hours from ``t0`` (whole hours)."""
        a = self.minute(t0)
        grid = self.rates if bursts else self.base
        return grid[i, a : a + hours * 60].reshape(hours, 60).mean(axis=1)


def _profile(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A local-time daily shape on a minute grid (1440) and 7 weekday factors."""
    hours = np.arange(1440) / 60.0
    night = rng.uniform(0.04, 0.25)
    peaks = [
        (rng.uniform(7.0, 10.5), rng.uniform(1.2, 2.5), rng.uniform(0.7, 1.3)),
        (rng.uniform(13.0, 18.0), rng.uniform(1.5, 3.5), rng.uniform(0.3, 1.0)),
    ]
    daily = np.full(1440, night)
    for mu, sigma, amp in peaks:
        d = np.abs(hours - mu)
        d = np.minimum(d, 24.0 - d)
        daily += amp * np.exp(-0.5 * (d / sigma) ** 2)
    weekly = np.concatenate(
        [rng.uniform(0.85, 1.15, 5), [rng.uniform(0.3, 0.8)], [rng.uniform(0.2, 0.7)]]
    )
    return daily, weekly


def generate(
    seed: int,
    *,
    days: float,
    start: float = EPOCH,
    n_sites: int = 10,
    volume_range: tuple[float, float] = (5.0, 1000.0),
    burst_every_days: float = 4.0,
    drift: Drift | None = None,
) -> World:
    """A seeded world of ``n_sites`` sites over ``days`` days from ``start``."""
    rng = np.random.default_rng(seed)
    minutes = round(days * 1440)
    t_min = start + np.arange(minutes) * MINUTE
    seeds: list[Seed] = []
    rates, base, bursts_all = [], [], []
    for site in range(n_sites):
        host = f"news{site}.example"
        tz = int(rng.integers(-8, 10))  # newsroom's UTC offset, hours
        daily, weekly = _profile(rng)
        n_sections = int(rng.integers(1, 5))
        names = list(rng.choice(SECTIONS, size=n_sections, replace=False))
        if rng.random() < 0.4:
            names.append("")  # the front page, keyed by the host alone
        local = t_min + tz * HOUR
        minute_of_day = ((local // MINUTE) % 1440).astype(int)
        day_of_week = ((local // DAY + 3) % 7).astype(int)  # Monday = 0
        for name in names:
            url = f"https://{host}/{name}/" if name else f"https://{host}/"
            lo, hi = volume_range
            volume = float(math.exp(rng.uniform(math.log(lo), math.log(hi))))
            # Sections vary around the newsroom's rhythm: weekend sport, later culture...
            week = weekly * rng.uniform(0.8, 1.25, 7)
            shape = daily[minute_of_day] * week[day_of_week]
            norm = (daily.mean() * week.mean()) or 1.0
            rate = volume / 24.0 * shape / norm
            if drift is not None and site in drift.sites:
                rate = np.where(t_min >= drift.start, rate * drift.factor, rate)
            rhythm = rate.copy()
            seed_bursts = []
            # Their own generator, so a world's sites do not depend on its length.
            burst_rng = np.random.default_rng([seed, 4, len(seeds)])
            n_bursts = burst_rng.poisson(days / burst_every_days)
            for _ in range(n_bursts):
                b0 = burst_rng.uniform(0, minutes)
                length = burst_rng.uniform(20, 120)
                mult = burst_rng.uniform(3.0, 8.0)
                a, b = int(b0), min(minutes, int(b0 + length))
                rate[a:b] += (mult - 1.0) * volume / 24.0
                seed_bursts.append((start + a * MINUTE, start + b * MINUTE, mult))
            seeds.append(
                Seed(
                    url=url,
                    key=seed_key(url),
                    site=site,
                    volume=volume,
                    list_size=int(rng.choice([10, 15, 20, 30])),
                    dated=0.9,
                )
            )
            rates.append(rate)
            base.append(rhythm)
            bursts_all.append(seed_bursts)
    rates_arr = np.asarray(rates)
    arrivals, dated = [], []
    for i, s in enumerate(seeds):
        # Generators per seed and per draw, each used in time order: a drift after the
        # history changes no article of the history, so both scenarios train one model.
        counts_rng, times_rng, dated_rng = (np.random.default_rng([seed, k, i]) for k in (1, 2, 3))
        counts = counts_rng.poisson(rates_arr[i] / 60.0)
        idx = np.repeat(np.arange(minutes), counts)
        times = np.sort(start + (idx + times_rng.random(idx.size)) * MINUTE)
        arrivals.append(times)
        dated.append(dated_rng.random(times.size) < s.dated)
    return World(
        seeds=seeds,
        start=start,
        end=start + minutes * MINUTE,
        rates=rates_arr,
        base=np.asarray(base),
        arrivals=arrivals,
        dated=dated,
        bursts=bursts_all,
        drift=drift,
    )


class TrueRate:
    """The oracle predictor: a seed's true rate, averaged over ``step`` seconds.

    Knows everything the simulator draws the arrivals from (rhythm, bursts, drift), not
    the arrivals themselves. ``bursts=False`` gives the rhythm only.
    """

    def __init__(self, world: World, step: float = 300.0, *, bursts: bool = True) -> None:
        self.world = world
        self.step = step
        per = int(step // MINUTE)
        grid = world.rates if bursts else world.base
        cells = grid.shape[1] // per
        self._cells = grid[:, : cells * per].reshape(grid.shape[0], cells, per).mean(axis=2)
        self._index = {s.key: i for i, s in enumerate(world.seeds)}

    def rate(self, seed_key: str, t: float) -> float | None:
        i = self._index.get(seed_key)
        if i is None:
            return None
        k = int((t - self.world.start) // self.step)
        k = min(max(k, 0), self._cells.shape[1] - 1)
        return float(self._cells[i, k])

    def seeds(self) -> list[str]:
        return list(self._index)
