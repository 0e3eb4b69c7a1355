"""When to fetch each seed page next, from its predicted rate of new articles.

After each fetch of a seed, :meth:`RecrawlPlanner.next_fetch` answers the absolute time of
the next one. The rule is one family with a knob gamma: the seed is fetched at a rate
proportional to ``λ̂(t)^gamma``, where ``λ̂(t)`` is its predicted new articles per hour:

- **gamma = 1: the k rule.** Fetch when the expected number of new articles since the last
  fetch, ``∫ λ̂ dt``, reaches k. Each fetch then finds about as much: the most hits for a
  given number of fetches.
- **gamma = ½: the square-root rule** (the default). An article published at a random moment
  of an interval ``I`` waits ``I / 2`` on average, so the mean delay over all articles is
  ``Σ ∫ λ / (2 r) dt / Σ ∫ λ dt`` for fetch rates ``r``. Minimising it for a fixed total
  of fetches ``Σ ∫ r dt`` (a Lagrange multiplier μ) gives ``λ / (2 r²) = μ``, i.e.
  ``r ∝ √λ``, across seeds and hours alike. A rate proportional to λ (gamma = 1), or the same
  for every seed, gives about the mean delay of a fixed interval (exactly, for steady
  Poisson arrivals): the hits it gains are not bought with delay.

In both cases the next fetch is at the time T where ``∫_now^T (m λ̂)^gamma / θ dt = 1``: θ is k
for gamma = 1, and in general the multiplier that makes all seeds together spend the fetch
**budget** (fetches per day over all seeds). θ is found by bisection on log θ, so that
the expected fetches over the next ``horizon`` (a week by default), summed over seeds and
hours, equal the budget; without a budget, ``threshold`` is θ.

Guards, in order:

1. **Scroll-off.** A list page shows only its latest N items; an article pushed off before
   a fetch is never found. The fetch rate is never below ``m λ̂ / (scroll_fraction · N)``,
   so at most ``scroll_fraction · N`` articles (half the page by default) are expected
   between two fetches; and when the last fetch found new links at an observed rate rho
   (a burst the model cannot know), the next fetch is within ``scroll_fraction · N / rho``.
2. **Bounds.** ``min_interval <= T - now <= max_interval``.

**Online learning.** Rates drift between trainings (a site doubles its output). Each
fetch that follows another tells how many new links appeared against how many the model
expected over that interval; each seed keeps a multiplier
``m = (a + Σ observed) / (a + Σ expected)`` (a Gamma prior of ``a`` expected articles
centred on 1), with both sums halved every ``half_life``, and plans with ``m λ̂``. The
budget is re-split with the new multipliers every ``rebalance_every``.

**Seeds without a model** (a new section; a seed whose articles carry no dates) get an
adaptive interval in the manner of Apache Nutch's ``AdaptiveFetchSchedule``: start at
``initial_interval``; after a fetch that found new links multiply it by
``1 - adaptive_decrease`` (0.8), after one that found none by ``1 + adaptive_increase``
(1.4); clamp to the bounds. It settles where about 60% of fetches find something
(``ln 1.4 / (ln 1.4 - ln 0.8)``). Its fetches are taken out of the budget before the
split.

The first call for a seed only records the fetch: with no earlier fetch to compare with,
its ``new_links`` say nothing about the rate.

Pure module: no Scrapy, no I/O; the predictor and the clock are injected.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # imported where used: a crawl without TWOLEVEL_RECRAWL starts 65 ms sooner
    import numpy as np

HOUR = 3600.0
DAY = 86400.0


@dataclass(frozen=True)
class Plan:
    """A seed's next fetch: when (the planner's clock), and the request to send (opaque)."""

    seed: str
    due: float
    request: bytes


class RatePredictor(Protocol):
    """What the planner needs of a model: a seed's predicted new articles per hour at ``t``.

    The rate is taken as constant over each ``step`` of the planner's grid (an hour for
    :class:`~.model.RecrawlPredictor`); ``None`` means "no model for this seed".
    """

    def rate(self, seed_key: str, t: float) -> float | None: ...

    def seeds(self) -> Iterable[str]: ...


@dataclass
class _Seed:
    limit: float | None = None  # the scroll-off limit, articles between fetches
    last_fetch: float | None = None
    observed: float = 0.0
    expected: float = 0.0
    learned_at: float | None = None
    interval: float | None = None  # adaptive fallback only


class RecrawlPlanner:
    """Next fetch times for seed pages: a predicted rate, a fetch budget, and guards.

    ``budget``: fetches per day over all seeds, or ``None`` to fetch at ``threshold``
    instead. ``gamma``: 1 for the k rule (most hits per fetch), ½ for the least mean delay.
    ``list_size``: the items a list page shows (one number, or per seed key); ``None``
    disables the scroll-off guard.
    """

    def __init__(
        self,
        predictor: RatePredictor | None,
        *,
        budget: float | None = None,
        gamma: float = 0.5,
        threshold: float | None = None,
        min_interval: float = 60.0,
        max_interval: float = DAY,
        list_size: int | Mapping[str, int] | None = None,
        scroll_fraction: float = 0.5,
        learn: bool = True,
        prior_articles: float = 10.0,
        half_life: float = 2 * DAY,
        step: float = HOUR,
        horizon: float = 7 * DAY,
        rebalance_every: float = HOUR,
        initial_interval: float = HOUR,
        adaptive_decrease: float = 0.2,
        adaptive_increase: float = 0.4,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(
                f"gamma must be in [0, 1] (1: the k rule, 0.5: least delay), got {gamma}"
            )
        if budget is None and threshold is None and predictor is not None:
            raise ValueError("give a fetch budget (fetches per day) or a threshold")
        if budget is not None and not budget > 0:
            raise ValueError(f"budget must be > 0 fetches per day, got {budget}")
        if threshold is not None and not threshold > 0:
            raise ValueError(f"threshold must be > 0, got {threshold}")
        if not 0 < min_interval <= max_interval:
            raise ValueError(
                f"need 0 < min_interval <= max_interval, got {min_interval}, {max_interval}"
            )
        if not 0.0 < scroll_fraction <= 1.0:
            raise ValueError(f"scroll_fraction must be in (0, 1], got {scroll_fraction}")
        if not (0.0 <= adaptive_decrease < 1.0 and adaptive_increase >= 0.0):
            raise ValueError("need 0 <= adaptive_decrease < 1 and adaptive_increase >= 0")
        if step <= 0 or horizon < step or prior_articles <= 0 or half_life <= 0:
            raise ValueError("step, horizon, prior_articles and half_life must be > 0")
        self.predictor = predictor
        self.budget = budget
        self.gamma = gamma
        self.min_interval = float(min_interval)
        self.max_interval = float(max_interval)
        self.list_size = list_size
        self.scroll_fraction = scroll_fraction
        self.learn = learn
        self.prior_articles = prior_articles
        self.half_life = half_life
        self.step = step
        self.horizon = horizon
        self.rebalance_every = rebalance_every
        self.initial_interval = initial_interval
        self.adaptive_decrease = adaptive_decrease
        self.adaptive_increase = adaptive_increase
        self._clock = clock
        self._seeds: dict[str, _Seed] = {}
        #: θ of the rule; ``inf`` when the budget does not even cover the guards' floor.
        self.theta = math.inf if threshold is None else float(threshold)
        self._balanced_at: float | None = None
        self._balanced_seeds: frozenset[str] = frozenset()
        self._sampled_at: float | None = None
        self._sampled_seeds: list[str] = []
        self._rates: np.ndarray | None = None
        #: ``"ok"``, or why the budget could not be met exactly (see :meth:`_rebalance`).
        self.budget_status = "not solved yet"

    # -- the public answer --------------------------------------------------------------

    def next_fetch(self, seed_key: str, now: float | None, new_links: int) -> float:
        """The absolute time to fetch ``seed_key`` next, after a fetch at ``now``.

        ``new_links``: how many links the fetch found that earlier fetches had not.
        ``now=None`` reads the planner's clock.
        """
        if now is None:
            now = self._clock()
        if new_links < 0:
            raise ValueError(f"new_links must be >= 0, got {new_links}")
        state = self._seeds.get(seed_key)
        if state is None:
            state = self._seeds[seed_key] = _Seed(limit=self.scroll_limit(seed_key))
        previous = state.last_fetch
        state.last_fetch = now
        if self.predictor is None or self.predictor.rate(seed_key, now) is None:
            return self._adaptive(state, now, new_links, first=previous is None)
        if previous is not None and now > previous and self.learn:
            self._learn(seed_key, state, previous, now, new_links)
        if self.budget is not None:
            self._maybe_rebalance(seed_key, now)
        return self._model_next(seed_key, state, previous, now, new_links)

    def multiplier(self, seed_key: str) -> float:
        """The online correction ``m`` of the seed's predicted rate (1 before any evidence)."""
        state = self._seeds.get(seed_key)
        if state is None:
            return 1.0
        a = self.prior_articles
        return (a + state.observed) / (a + state.expected)

    def set_predictor(self, predictor: RatePredictor | None) -> None:
        """Plan with a newly trained model from now on; the budget is split again."""
        self.predictor = predictor
        self._balanced_at = self._sampled_at = None
        self._rates = None

    def forget(self, seed_key: str) -> None:
        """Drop what the planner holds about a seed (it is no longer crawled)."""
        self._seeds.pop(seed_key, None)

    def scroll_limit(self, seed_key: str) -> float | None:
        """At most this many new articles are expected between two fetches, or ``None``."""
        size = self.list_size
        if isinstance(size, Mapping):
            size = size.get(seed_key)
        return None if size is None else self.scroll_fraction * size

    # -- the rule -------------------------------------------------------------------------

    def _rate(self, seed_key: str, t: float) -> float:
        assert self.predictor is not None
        return max(0.0, self.predictor.rate(seed_key, t) or 0.0)

    def _cells(
        self, seed_key: str, start: float, end: float
    ) -> Iterable[tuple[float, float, float]]:
        """``(t0, t1, λ̂)`` over ``[start, end)``, cut at the ``step`` grid."""
        t = start
        step = self.step
        while t < end:
            t1 = min((math.floor(t / step) + 1) * step, end)
            if t1 <= t:  # float rounding at a cell edge
                t1 = min(t + step, end)
            yield t, t1, self._rate(seed_key, t)
            t = t1

    def _model_next(
        self, seed_key: str, state: _Seed, previous: float | None, now: float, new_links: int
    ) -> float:
        a = self.prior_articles
        m = (a + state.observed) / (a + state.expected)
        limit = state.limit
        gamma, theta = self.gamma, self.theta
        latest = now + self.max_interval
        acc = 0.0
        when = latest
        for t0, t1, lam in self._cells(seed_key, now, latest):
            lam *= m
            r = 0.0 if math.isinf(theta) else lam**gamma / theta  # fetches per hour
            if limit is not None:
                r = max(r, lam / limit)
            gain = r * (t1 - t0) / HOUR
            if r > 0 and acc + gain >= 1.0:
                when = t0 + (1.0 - acc) / r * HOUR
                break
            acc += gain
        # A burst the model does not know: keep the observed rate within the page too.
        if limit is not None and previous is not None and new_links > 0 and now > previous:
            observed_rate = new_links / (now - previous)  # per second
            when = min(when, now + limit / observed_rate)
        return min(max(when, now + self.min_interval), latest)

    def _learn(self, seed_key: str, state: _Seed, previous: float, now: float, found: int) -> None:
        expected = sum(
            lam * (t1 - t0) / HOUR for t0, t1, lam in self._cells(seed_key, previous, now)
        )
        if state.learned_at is not None:
            decay = 0.5 ** ((now - state.learned_at) / self.half_life)
            state.observed *= decay
            state.expected *= decay
        state.observed += found
        state.expected += expected
        state.learned_at = now

    def _adaptive(self, state: _Seed, now: float, new_links: int, first: bool) -> float:
        if first or state.interval is None:
            interval = self.initial_interval
        elif new_links > 0:
            interval = state.interval * (1.0 - self.adaptive_decrease)
        else:
            interval = state.interval * (1.0 + self.adaptive_increase)
        state.interval = min(max(interval, self.min_interval), self.max_interval)
        return now + state.interval

    # -- the budget split -----------------------------------------------------------------

    def _model_seeds(self, now: float) -> list[str]:
        assert self.predictor is not None
        known = set(self.predictor.seeds()) | set(self._seeds)
        return sorted(s for s in known if self.predictor.rate(s, now) is not None)

    def _maybe_rebalance(self, seed_key: str, now: float) -> None:
        if (
            self._balanced_at is None
            or now - self._balanced_at >= self.rebalance_every
            or seed_key not in self._balanced_seeds
        ):
            self._rebalance(now, self._model_seeds(now))

    def _rebalance(self, now: float, seeds: list[str]) -> None:
        """Solve θ so that the expected fetches per day over all seeds equal the budget."""
        import numpy as np

        assert self.budget is not None
        resample_every = min(self.horizon, DAY)
        if (
            self._rates is None
            or self._sampled_at is None
            or now - self._sampled_at >= resample_every
            or seeds != self._sampled_seeds
        ):
            cells = max(1, round(self.horizon / self.step))
            self._rates = np.array(
                [[self._rate(s, now + i * self.step) for i in range(cells)] for s in seeds],
                dtype=float,
            ).reshape(len(seeds), cells)
            self._sampled_at, self._sampled_seeds = now, seeds
        self._balanced_at, self._balanced_seeds = now, frozenset(seeds)
        adaptive = sum(
            DAY / st.interval
            for key, st in self._seeds.items()
            if st.interval is not None and key not in self._balanced_seeds
        )
        target = self.budget - adaptive
        self.theta, self.budget_status = solve_theta(
            self._rates * np.array([[self.multiplier(s)] for s in seeds]).reshape(-1, 1),
            target,
            gamma=self.gamma,
            limits=[self.scroll_limit(s) for s in seeds],
            step=self.step,
            min_interval=self.min_interval,
            max_interval=self.max_interval,
        )


def fetches_per_day(
    rates: np.ndarray,
    theta: float,
    *,
    gamma: float,
    limits: list[float | None],
    step: float,
    min_interval: float,
    max_interval: float,
) -> float:
    """Expected fetches per day of seeds with ``rates[seed, cell]`` (articles per hour).

    Per cell the fetch rate is ``clip(max(rate^gamma / θ, rate / limit), 1 / max_interval,
    1 / min_interval)``.
    """
    curve = _Curve(rates, gamma, limits, step, min_interval, max_interval)
    return curve.per_day(0.0 if math.isinf(theta) else 1.0 / theta)


class _Curve:
    """Fetches per day as a function of ``u = 1 / θ``, with what does not depend on it."""

    def __init__(
        self,
        rates: np.ndarray,
        gamma: float,
        limits: list[float | None],
        step: float,
        min_interval: float,
        max_interval: float,
    ) -> None:
        import numpy as np

        inverse = np.array([0.0 if lim is None else 1.0 / lim for lim in limits])
        self.ceiling = HOUR / min_interval
        # The floor of each cell: the scroll-off guard, within the interval bounds.
        self.floor = np.clip(rates * inverse.reshape(-1, 1), HOUR / max_interval, self.ceiling)
        self.base = rates**gamma
        cells = rates.shape[1] if rates.ndim == 2 else 0
        self.scale = (step / HOUR) / (cells * step / DAY) if cells else 0.0

    def per_day(self, u: float) -> float:
        import numpy as np

        # clip(b u, floor, ceiling) == clip(max(b u, guard), 1/max_interval, 1/min_interval)
        return float(np.clip(self.base * u, self.floor, self.ceiling).sum() * self.scale)

    def solve(self, target: float) -> float:
        """The ``u`` where :meth:`per_day` is ``target`` (between the floor and the ceiling).

        ``per_day`` is piecewise linear and increasing in ``u``: a cell with ``b > 0`` is at
        its floor f up to ``u = f / b``, then ``b u`` up to ``u = ceiling / b``, then at the
        ceiling. Sorting those breakpoints gives the exact solution in one pass.
        """
        import numpy as np

        b = self.base.ravel()
        f = np.broadcast_to(self.floor, self.base.shape).ravel()
        moving = b > 0
        b, f = b[moving], f[moving]
        fixed = float(np.broadcast_to(self.floor, self.base.shape).ravel()[~moving].sum())
        # Each breakpoint changes the constant part and the slope of the sum.
        points = np.concatenate([f / b, self.ceiling / b])
        d_const = np.concatenate([-f, np.full(b.size, self.ceiling)])
        d_slope = np.concatenate([b, -b])
        order = np.argsort(points, kind="stable")
        points, const, slope = points[order], np.cumsum(d_const[order]), np.cumsum(d_slope[order])
        const += fixed + float(f.sum())
        goal = target / self.scale
        # Value just after each breakpoint; the first one reaching the goal ends the segment.
        values = const + slope * points
        k = int(np.searchsorted(values, goal))
        if k == 0:
            return float(points[0])
        c, sl = const[k - 1], slope[k - 1]
        return float((goal - c) / sl) if sl > 0 else float(points[k - 1])


def solve_theta(
    rates: np.ndarray,
    target: float,
    *,
    gamma: float,
    limits: list[float | None],
    step: float,
    min_interval: float,
    max_interval: float,
) -> tuple[float, str]:
    """θ for which :func:`fetches_per_day` is ``target`` (the Lagrange multiplier).

    Returns ``(θ, status)``; status is ``"ok"``, or says which bound the budget hit: below
    the floor (every seed at ``max_interval`` or at its scroll-off guard; θ = inf) or above
    the ceiling (every hour with a positive rate at ``min_interval``).
    """
    if rates.size == 0:
        return math.inf, "no seed with a model"
    curve = _Curve(rates, gamma, limits, step, min_interval, max_interval)
    floor = curve.per_day(0.0)
    if target <= floor:
        return math.inf, f"budget {target:.1f}/day is below the floor of {floor:.1f}/day"
    positive = curve.base[curve.base > 0]
    if positive.size == 0:
        return math.inf, "every predicted rate is 0"
    # At u = ceiling / min(b), every cell with a positive rate is at the ceiling.
    top = curve.ceiling / float(positive.min())
    ceiling = curve.per_day(top)
    if target >= ceiling:
        return 1.0 / top, f"budget {target:.1f}/day is above the ceiling of {ceiling:.1f}/day"
    return 1.0 / curve.solve(target), "ok"
