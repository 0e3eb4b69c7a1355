"""How well the recrawl planner refetches news seed pages, against fixed and adaptive intervals.

The question: fed 30 days of discovered articles, does the forest-driven planner
(:mod:`scrapy_twolevel.recrawl`) find new articles sooner, for the same number of fetches,
than fetching every seed at one fixed interval or at a Nutch-style adaptive interval? And
how close does it come to a planner that knows the true rates, and to a clairvoyant that
knows every publish time?

- **Worlds.** ``newssim.generate(seed, n_sites=10, volume_range=(5, 1000))``: 10 sites,
  one to five seed pages each (about 25-40 seeds), each seed publishing as a
  non-homogeneous Poisson process (daily and weekly rhythms in its newsroom's time zone,
  bursts of breaking news), log-uniform from 5 to 1,000 articles a day, its list page
  showing the latest 10-30. One world per simulator seed (default 0-4).
- **History and training.** A crawler fetched every seed every 1-8 minutes (with rare
  outages of 1-4 hours) for 30 days; 90% of article pages carry a publish time, the others
  are dated by the midpoint rule or left out. The predictor is fitted on those
  ``(seed_key, publish_time)`` pairs as of the end of the history
  (``fit_predictor(events, t0)``, library defaults, ``random_state`` = the world's seed)
  and used through its saved JSON form.
- **Evaluation.** Virtual time from the end of the history: one day of warm-up, then a
  7-day window (fetches made and articles published in it are counted), then half a day
  more so every article of the window is either found or scrolled off. The methods that
  choose their intervals share the bounds [30 s, 6 h].
- **Methods.** The ten fixed intervals (10 s ... 2 h, each seed at a random phase); the
  Nutch-style adaptive interval (x0.8 after a fetch with new links, x1.4 after one
  without, clamped; tuned to a cost by changing the 1.4); the planner (square-root rule,
  gamma = 0.5, with a fetch budget; gamma = 0.75 and 1 for the reference comparison); a
  per-seed constant rate (the same square-root budget split, on each seed's mean rate:
  what the hour and weekday add); the true-rate planner (the same planner fed the
  simulator's rate, bursts and drift included, on a 5-minute grid; no online learning);
  and the clairvoyant, which places each seed's fetches at publish times to minimise the
  total delay for a number of fetches (exact, O(n), for a cost per fetch tuned to the
  count), plus a fetch whenever a list page would otherwise overflow.
- **Equal cost.** The planner's budget is set to 0.89 x the median fixed interval's fetches
  (the reference's -11%); every other method is tuned to the same number of fetches (its
  knob adjusted by secant steps until within 1%). The same is done at the untuned Nutch
  schedule's own cost, and the planner and the true-rate planner are also run at each
  fixed interval's cost (the curves of the plot).
- **Drift.** The same worlds, but half the sites (drawn per seed) publish twice as much
  from the start of the window on: after training, unknown to the model. The planner
  learns online; it is also run with learning off. The other methods are tuned to its
  number of fetches; the true-rate planner knows the doubled rates.
- **Measures**, over the window: fetches; hit rate (share of fetches that found a new
  link); mean and 90th-percentile delay from publication to the fetch that found an
  article (over found articles); missed articles (scrolled off before any fetch). Means
  over the worlds with 95% confidence intervals (Student t); ratios are taken per world.

Usage::

    python benchmarks/recrawl.py              # 5 worlds, 2 processes: about 10 minutes
    python benchmarks/recrawl.py --quick      # 1 world, 3-day window; writes nothing

Writes ``benchmarks/results/recrawl.json`` (every figure, per world),
``benchmarks/results/recrawl.md``, ``docs/results/recrawl.inc`` and
``docs/results/recrawl_delay_vs_cost.png``.
"""

from __future__ import annotations

import functools
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from harness import DOCS_RESULTS, RESULTS, report
from harness.env import environment, version
from newssim import (
    EPOCH,
    Drift,
    TrueRate,
    World,
    clairvoyant_times,
    crawl_policy,
    crawl_times,
    first_fetches,
    fixed_times,
    generate,
    history_events,
    measure,
)
from newssim.sites import DAY, HOUR
from scrapy_twolevel.recrawl import (
    FitParams,
    RecrawlPlanner,
    RecrawlPredictor,
    build_samples,
    fit_predictor,
)
from scrapy_twolevel.recrawl.model import fit_table
from scrapy_twolevel.recrawl.samples import week_cell

FIXED_INTERVALS = (10, 20, 30, 60, 120, 300, 600, 1800, 3600, 7200)
METRICS = ("fetches", "hit_rate", "mean_delay_s", "p90_delay_s", "missed")
#: Student t quantiles (0.975) by degrees of freedom, for the 95% intervals.
T975 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
}
#: The reference's gains vs the median fixed interval, and the equal-cost targets.
REF_COST, REF_HIT, REF_DELAY = -0.11, 0.46, -0.14
VS_FIXED, VS_NUTCH, VS_TRUE = 0.70, 0.85, 1.3
#: How far the cost may miss -11%: the budget is tuned to it within 1% of the fetches.
COST_TOLERANCE = 0.01


@dataclass(frozen=True)
class Setup:
    """Every parameter of a run (stored in the results)."""

    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    history_days: int = 30
    warmup_days: float = 1.0
    eval_days: float = 7.0
    tail_days: float = 0.5
    n_sites: int = 10
    volume_range: tuple[float, float] = (5.0, 1000.0)
    min_interval: float = 30.0
    max_interval: float = 6 * HOUR
    history_gaps: tuple[float, float] = (60.0, 480.0)
    outages: float = 0.002
    drift_factor: float = 2.0
    drift_share: float = 0.5
    ref_cost_ratio: float = 0.89
    gammas: tuple[float, ...] = (0.5, 0.75, 1.0)
    curve_intervals: tuple[int, ...] = (300, 600, 1800, 3600)
    nutch_increases: tuple[float, ...] = (0.02, 0.05, 0.1, 0.4, 1.0)
    nutch_decrease: float = 0.2
    nutch_increase: float = 0.4
    true_rate_step: float = 300.0
    tolerance: float = 0.01


QUICK = Setup(seeds=(0,), eval_days=3.0, curve_intervals=(300, 1800), nutch_increases=(0.05, 0.4))


# -- one world ------------------------------------------------------------------------------


class Bench:
    """The runs of one world (or its drifted twin): every method, measured the same way."""

    def __init__(self, setup: Setup, seed: int, world: World) -> None:
        self.setup, self.seed, self.world = setup, seed, world
        self.t0 = EPOCH + setup.history_days * DAY
        self.w0 = self.t0 + setup.warmup_days * DAY
        self.w1 = self.w0 + setup.eval_days * DAY
        self.t_end = self.w1 + setup.tail_days * DAY
        self.sizes = {s.key: s.list_size for s in world.seeds}

    def _measure(self, log: Any, **extra: Any) -> dict[str, Any]:
        return {**measure(self.world, log, self.w0, self.w1), **extra}

    def fixed(self, interval: float) -> dict[str, Any]:
        rng = np.random.default_rng([self.seed, 4, int(interval * 1000)])
        times = fixed_times(self.world, self.t0, self.t_end, interval, rng)
        return self._measure(crawl_times(self.world, self.t0, times), knob=interval)

    def _policy(self, planner: RecrawlPlanner, **extra: Any) -> dict[str, Any]:
        first = first_fetches(self.world, self.t0, np.random.default_rng([self.seed, 5]))
        log = crawl_policy(self.world, self.t0, self.t_end, first, planner.next_fetch)
        return self._measure(log, **extra)

    def planner(self, predictor: Any, budget: float, **kwargs: Any) -> dict[str, Any]:
        s = self.setup
        planner = RecrawlPlanner(
            predictor,
            budget=budget,
            min_interval=s.min_interval,
            max_interval=s.max_interval,
            list_size=self.sizes,
            **kwargs,
        )
        return self._policy(planner, knob=budget)

    def nutch(self, increase: float) -> dict[str, Any]:
        s = self.setup
        planner = RecrawlPlanner(
            None,
            min_interval=s.min_interval,
            max_interval=s.max_interval,
            initial_interval=HOUR,
            adaptive_decrease=s.nutch_decrease,
            adaptive_increase=increase,
        )
        return self._policy(planner, knob=increase)

    def clairvoyant(self, cost: float) -> dict[str, Any]:
        times = clairvoyant_times(self.world, self.t0, self.w1, cost)
        return self._measure(crawl_times(self.world, self.t0, times), knob=cost)

    def budget_for(self, fetches: float) -> float:
        """Fetches per day for ``fetches`` in the window."""
        return fetches / self.setup.eval_days

    def planner_at(self, cost: float, predictor: Any, tol: float, **kwargs: Any) -> dict[str, Any]:
        """The planner, its budget tuned until it makes ``cost`` fetches in the window."""
        run = functools.partial(self.planner, predictor, **kwargs)
        return tune(run, self.budget_for(cost), cost, 1.0, tol)

    def fixed_at(self, cost: float, tol: float) -> dict[str, Any]:
        """The fixed interval tuned until it makes ``cost`` fetches in the window."""
        n_window = len(self.world.seeds) * self.setup.eval_days * DAY
        return tune(self.fixed, n_window / cost, cost, -1.0, tol / 4, 4)


def tune(
    run: Callable[[float], dict[str, Any]],
    x0: float,
    target: float,
    exponent: float,
    tolerance: float,
    max_runs: int = 6,
) -> dict[str, Any]:
    """Run ``run(x)`` with ``x`` adjusted until its fetches are within ``tolerance`` of target.

    Secant steps on ``log fetches`` against ``log x``; ``exponent`` is the first guess of
    that slope. Returns the run closest to the target, with ``runs`` (how many were made).
    """
    sign = 1.0 if exponent > 0 else -1.0
    tried: list[tuple[float, dict[str, Any]]] = []
    x = x0
    for _ in range(max_runs):
        m = run(x)
        tried.append((x, m))
        if m["fetches"] > 0 and abs(m["fetches"] / target - 1.0) <= tolerance:
            break
        if len(tried) >= 2:
            (x1, m1), (x2, m2) = tried[-2], tried[-1]
            if (
                x1 != x2
                and m1["fetches"] > 0
                and m2["fetches"] > 0
                and m1["fetches"] != m2["fetches"]
            ):
                slope = math.log(m2["fetches"] / m1["fetches"]) / math.log(x2 / x1)
                if slope * sign > 0:
                    exponent = sign * min(max(abs(slope), 0.1), 3.0)
        x = x * (target / max(m["fetches"], 1)) ** (1.0 / exponent)
    best_x, best = min(tried, key=lambda p: abs(p[1]["fetches"] / target - 1.0))
    return {**best, "knob": best_x, "runs": len(tried)}


def median_fixed(fixed: dict[int, dict[str, Any]]) -> dict[str, float]:
    """The median of each measure over the ten fixed intervals (its own median for each)."""
    return {k: statistics.median(m[k] for m in fixed.values()) for k in METRICS}


class FlatRate:
    """Each seed at its predicted mean rate, all week: the per-seed constant baseline."""

    def __init__(self, predictor: RecrawlPredictor) -> None:
        self._rates = {s: predictor.mean_rate(s) for s in predictor.seeds()}

    def rate(self, seed_key: str, t: float) -> float | None:
        return self._rates.get(seed_key)

    def seeds(self) -> list[str]:
        return list(self._rates)


def model_rows(
    predictor: RecrawlPredictor, world: World, start: float, hours: int
) -> list[dict[str, Any]]:
    """The predictor's report, with the ceiling computed from the simulator's true rates."""
    index = {s.key: i for i, s in enumerate(world.seeds)}
    rows = []
    for row in predictor.report():
        fit = predictor.fits[row["key"]]
        truth = sum(world.hourly(index[s], start, hours) for s in fit.seeds)
        var, mean = float(np.var(truth)), float(np.mean(truth))
        row["true_r2_ceiling"] = var / (var + mean) if var + mean > 0 else math.nan
        rows.append(row)
    return rows


MODEL_VARIANTS = {
    "forest (the default)": {},
    "forest, one-hot columns only": {"ordinal": False},
    "forest, one-hot columns only, leaves of 20": {"ordinal": False, "min_samples_leaf": 20},
    "Poisson GLM": {"model": "glm"},
}


def model_variants(
    world: World, events: list[tuple[str, float | None]], t0: float, seed: int
) -> dict[str, Any]:
    """Each variant's Poisson deviance on the 7 days after training, minus the true rhythm's.

    Per model key: the variant fitted on the whole history (as the planner's model is),
    its table read for each hour of the next 7 days, against the articles published then
    (of the key's seeds); the true rhythm is the simulator's rate without bursts. Means
    over the keys.
    """
    from sklearn.metrics import mean_poisson_deviance

    samples = build_samples(events, t0)
    index = {s.key: i for i, s in enumerate(world.seeds)}
    hours = min(168, int((world.end - t0) // HOUR))  # --quick worlds end sooner
    cells = [week_cell(t0 + h * HOUR) for h in range(hours)]
    excess: dict[str, list[float]] = {name: [] for name in MODEL_VARIANTS}
    for series in samples.series.values():
        seeds = [index[k] for k in series.seeds]
        truth = sum(world.hourly(i, t0, hours, bursts=False) for i in seeds)
        actual = np.zeros(hours)
        for i in seeds:
            a = world.arrivals[i]
            a = a[(a >= t0) & (a < t0 + hours * HOUR)]
            actual += np.bincount(((a - t0) // HOUR).astype(int), minlength=hours)[:hours]
        base = mean_poisson_deviance(actual, np.maximum(truth, 1e-6))
        for name, change in MODEL_VARIANTS.items():
            table = fit_table(series, FitParams(random_state=seed, compare=False, **change))
            flat = [v for row in table for v in row]
            pred = np.maximum([flat[c] for c in cells], 1e-6)
            excess[name].append(float(mean_poisson_deviance(actual, pred) - base))
    return {name: sum(v) / len(v) for name, v in excess.items()} | {"keys": len(samples.series)}


def evaluate_world(setup: Setup, seed: int) -> dict[str, Any]:
    """Everything measured on one simulator seed's world and its drifted twin."""
    started = time.monotonic()
    s = setup
    days = s.history_days + s.warmup_days + s.eval_days + s.tail_days + 0.05
    world = generate(seed, days=days, n_sites=s.n_sites, volume_range=s.volume_range)
    bench = Bench(s, seed, world)
    rng = np.random.default_rng([seed, 2])
    drift_sites = frozenset(
        int(x) for x in rng.choice(s.n_sites, round(s.n_sites * s.drift_share), replace=False)
    )
    drifted = generate(
        seed,
        days=days,
        n_sites=s.n_sites,
        volume_range=s.volume_range,
        drift=Drift(bench.w0, s.drift_factor, drift_sites),
    )
    dbench = Bench(s, seed, drifted)
    assert all(
        np.array_equal(a[a < bench.w0], b[b < bench.w0])
        for a, b in zip(world.arrivals, drifted.arrivals, strict=True)
    ), "the drifted world must share the history"

    # History -> model, used through its saved form (no scikit-learn object kept).
    events, history = history_events(
        world, EPOCH, bench.t0, np.random.default_rng([seed, 3]), s.history_gaps, s.outages
    )
    t = time.monotonic()
    fitted = fit_predictor(events, bench.t0, params=FitParams(random_state=seed))
    fit_s = time.monotonic() - t
    predictor = RecrawlPredictor.from_dict(json.loads(json.dumps(fitted.to_dict())))
    model = model_rows(predictor, world, fitted.meta["window_start"], s.history_days * 24)
    out: dict[str, Any] = {
        "seed": seed,
        "seeds": len(world.seeds),
        "articles_in_window": None,
        "history": history,
        "fit_s": round(fit_s, 1),
        "fallback": {
            seed_key: route.key
            for seed_key, route in predictor.routes.items()
            if route.key != seed_key
        },
        "model": model,
        "model_variants": model_variants(world, events, bench.t0, seed),
    }

    fixed = {i: bench.fixed(i) for i in FIXED_INTERVALS}
    out["articles_in_window"] = fixed[60]["articles"]
    out["fixed"] = fixed
    med = median_fixed(fixed)
    out["median_fixed"] = med
    target = s.ref_cost_ratio * med["fetches"]
    tol = s.tolerance

    # The reference comparison: the planner at -11% cost, for each gamma.
    reference = {}
    for gamma in s.gammas:
        reference[f"planner_g{gamma:g}"] = bench.planner_at(target, predictor, tol, gamma=gamma)
    out["reference"] = reference
    planner = reference["planner_g0.5"]
    cost = planner["fetches"]

    # Every method at the planner's cost.
    equal = {"planner": planner}
    equal["fixed"] = bench.fixed_at(cost, tol)
    nutch_default = bench.nutch(s.nutch_increase)
    equal["nutch"] = tune(bench.nutch, 0.05, cost, -0.55, tol, 8)
    equal["per_seed_constant"] = bench.planner_at(cost, FlatRate(predictor), tol)
    oracle = TrueRate(world, s.true_rate_step)
    known = {"learn": False, "step": s.true_rate_step}  # the true-rate planner's options
    equal["true_rate"] = bench.planner_at(cost, oracle, tol, **known)
    equal["clairvoyant"] = tune(bench.clairvoyant, 30.0, cost, -0.5, tol / 4, 16)
    out["equal_cost"] = equal

    # Every method at the untuned Nutch-style schedule's own cost.
    cost_n = nutch_default["fetches"]
    at_nutch = {"nutch_untuned": nutch_default}
    at_nutch["fixed"] = bench.fixed_at(cost_n, tol)
    at_nutch["planner"] = bench.planner_at(cost_n, predictor, tol)
    at_nutch["true_rate"] = bench.planner_at(cost_n, oracle, tol, **known)
    at_nutch["clairvoyant"] = tune(bench.clairvoyant, 300.0, cost_n, -0.5, tol / 4, 16)
    out["at_nutch_cost"] = at_nutch

    # Curves: the planners at each curve interval's fixed cost; Nutch over its knob.
    curves: dict[str, list[dict[str, Any]]] = {"planner": [], "true_rate": [], "clairvoyant": []}
    for interval in s.curve_intervals:
        c = fixed[interval]["fetches"]
        curves["planner"].append(bench.planner(predictor, bench.budget_for(c)))
        curves["true_rate"].append(bench.planner(oracle, bench.budget_for(c), **known))
        curves["clairvoyant"].append(tune(bench.clairvoyant, 30.0, c, -0.5, tol, 10))
    curves["nutch"] = [bench.nutch(x) for x in s.nutch_increases]
    out["curves"] = curves

    # Drift: half the sites double their output when the window opens.
    drift = {"planner": dbench.planner(predictor, bench.budget_for(target))}
    cost_d = drift["planner"]["fetches"]
    drift["planner_no_learning"] = dbench.planner_at(cost_d, predictor, tol, learn=False)
    drift["fixed"] = dbench.fixed_at(cost_d, tol)
    drift["nutch"] = tune(dbench.nutch, equal["nutch"]["knob"], cost_d, -0.55, tol, 8)
    d_oracle = TrueRate(drifted, s.true_rate_step)
    drift["true_rate"] = dbench.planner_at(cost_d, d_oracle, tol, **known)
    drift["nutch_untuned"] = dbench.nutch(s.nutch_increase)
    out["drift"] = {
        "sites": sorted(drift_sites),
        "articles_in_window": drift["fixed"]["articles"],
        "methods": drift,
    }
    out["wall_s"] = round(time.monotonic() - started, 1)
    print(f"world {seed}: {len(world.seeds)} seeds, {out['wall_s']:.0f} s", flush=True)
    return out


# -- summaries ------------------------------------------------------------------------------


def mean_ci(values: Sequence[float]) -> dict[str, Any]:
    """Mean and the half-width of its 95% Student-t interval (0 for one value)."""
    xs = [float(v) for v in values]
    n = len(xs)
    mean = sum(xs) / n
    if n < 2:
        return {"mean": mean, "ci95": 0.0, "n": n, "values": xs}
    sd = statistics.stdev(xs)
    return {"mean": mean, "ci95": T975.get(n - 1, 1.96) * sd / math.sqrt(n), "n": n, "values": xs}


def summarize_methods(
    worlds: list[dict[str, Any]], pick: Callable[[dict[str, Any]], dict[str, Any]]
) -> dict[str, Any]:
    """Per method, each measure's mean and CI over the worlds."""
    methods = pick(worlds[0]).keys()
    return {m: {k: mean_ci([pick(w)[m][k] for w in worlds]) for k in METRICS} for m in methods}


def ratio_ci(
    worlds: list[dict[str, Any]], pick: Callable[[dict[str, Any]], float]
) -> dict[str, Any]:
    return mean_ci([pick(w) for w in worlds])


def summarize(worlds: list[dict[str, Any]]) -> dict[str, Any]:
    def delay(section: str, method: str) -> Callable[[dict[str, Any]], float]:
        return lambda w: w[section][method]["mean_delay_s"]

    def rel(a: Callable[[dict[str, Any]], float], b: Callable[[dict[str, Any]], float]):
        return lambda w: a(w) / b(w)

    out: dict[str, Any] = {}
    out["fixed"] = {
        str(i): {k: mean_ci([w["fixed"][i][k] for w in worlds]) for k in METRICS}
        for i in FIXED_INTERVALS
    }
    out["median_fixed"] = {k: mean_ci([w["median_fixed"][k] for w in worlds]) for k in METRICS}
    out["reference"] = summarize_methods(worlds, lambda w: w["reference"])
    gains = {}
    for name in worlds[0]["reference"]:
        gains[name] = {
            "cost": ratio_ci(
                worlds,
                lambda w, n=name: w["reference"][n]["fetches"] / w["median_fixed"]["fetches"] - 1,
            ),
            "hit_rate": ratio_ci(
                worlds,
                lambda w, n=name: w["reference"][n]["hit_rate"] / w["median_fixed"]["hit_rate"] - 1,
            ),
            "mean_delay": ratio_ci(
                worlds,
                lambda w, n=name: (
                    w["reference"][n]["mean_delay_s"] / w["median_fixed"]["mean_delay_s"] - 1
                ),
            ),
            # Gains no schedule can pass at this cost: hits <= articles; and, for one that
            # knows only rates, about 1 - exp(-articles / fetches) (Jensen on P(hit)).
            "hit_rate_gain_bound": ratio_ci(
                worlds,
                lambda w, n=name: (
                    min(1.0, w["articles_in_window"] / w["reference"][n]["fetches"])
                    / w["median_fixed"]["hit_rate"]
                    - 1
                ),
            ),
            "hit_rate_gain_bound_rates": ratio_ci(
                worlds,
                lambda w, n=name: (
                    (1 - math.exp(-w["articles_in_window"] / w["reference"][n]["fetches"]))
                    / w["median_fixed"]["hit_rate"]
                    - 1
                ),
            ),
        }
    out["reference_gains"] = gains
    out["equal_cost"] = summarize_methods(worlds, lambda w: w["equal_cost"])
    out["at_nutch_cost"] = summarize_methods(worlds, lambda w: w["at_nutch_cost"])
    out["drift"] = summarize_methods(worlds, lambda w: w["drift"]["methods"])

    def ratios(
        section: Callable[[dict[str, Any]], dict[str, Any]], others: Sequence[str]
    ) -> dict[str, Any]:
        r = {}
        for other in others:
            r[f"delay_vs_{other}"] = ratio_ci(
                worlds,
                lambda w, o=other: (
                    section(w)["planner"]["mean_delay_s"] / section(w)[o]["mean_delay_s"]
                ),
            )
            r[f"missed_minus_{other}"] = ratio_ci(
                worlds, lambda w, o=other: section(w)["planner"]["missed"] - section(w)[o]["missed"]
            )
            r[f"fetches_vs_{other}"] = ratio_ci(
                worlds,
                lambda w, o=other: section(w)["planner"]["fetches"] / section(w)[o]["fetches"],
            )
        return r

    out["equal_cost_ratios"] = ratios(
        lambda w: w["equal_cost"],
        ("fixed", "nutch", "per_seed_constant", "true_rate"),
    )
    out["at_nutch_cost_ratios"] = ratios(
        lambda w: w["at_nutch_cost"], ("fixed", "nutch_untuned", "true_rate")
    )
    out["drift_ratios"] = ratios(
        lambda w: w["drift"]["methods"],
        ("fixed", "nutch", "planner_no_learning", "true_rate"),
    )
    curves = {}
    for name in ("planner", "true_rate", "clairvoyant", "nutch"):
        # The knob sweeps, and the runs at the planner's and at Nutch's own cost.
        def points(w: dict[str, Any], name: str = name) -> list[dict[str, Any]]:
            more = [w["equal_cost"][name]]
            if name in w["at_nutch_cost"]:
                more.append(w["at_nutch_cost"][name])
            return [*w["curves"][name], *more]

        curves[name] = [
            {k: mean_ci([points(w)[p][k] for w in worlds]) for k in METRICS}
            for p in range(len(points(worlds[0])))
        ]
    curves["fixed"] = [out["fixed"][str(i)] for i in FIXED_INTERVALS]
    out["curves"] = curves
    out["model"] = model_summary(worlds)
    out["model_variants"] = {
        name: mean_ci([w["model_variants"][name] for w in worlds]) for name in MODEL_VARIANTS
    }
    return out


def model_summary(worlds: list[dict[str, Any]]) -> dict[str, Any]:
    rows = [r for w in worlds for r in w["model"]]
    busy = [r for r in rows if r["r2_ceiling"] >= 0.6]
    low = [r for r in rows if r["r2_ceiling"] < 0.6]

    def avg(rs: list[dict[str, Any]], key: str) -> float:
        xs = [r[key] for r in rs if r.get(key) is not None and not math.isnan(r[key])]
        return sum(xs) / len(xs) if xs else math.nan

    def group(rs: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "keys": len(rs),
            "forest_wins_tail_deviance": sum(
                1 for r in rs if r["best_by_tail_deviance"] == "forest"
            ),
            **{
                k: avg(rs, k)
                for k in (
                    "articles_per_day",
                    "cv_r2_forest",
                    "cv_r2_glm",
                    "tail_r2_forest",
                    "tail_r2_glm",
                    "r2_ceiling",
                    "true_r2_ceiling",
                    "tail_deviance_forest",
                    "tail_deviance_glm",
                )
            },
            "in_reference_range": sum(1 for r in rs if 0.6 <= r["cv_r2"] <= 0.9),
        }

    return {
        "all": group(rows),
        "ceiling_at_least_0.6": group(busy),
        "ceiling_below_0.6": group(low),
    }


# -- checks ---------------------------------------------------------------------------------


def _check(
    ident: str, shape: str, target: str, measured: str, met: bool, strict: bool | None = None
) -> dict[str, Any]:
    return {
        "id": ident,
        "shape": shape,
        "target": target,
        "measured": measured,
        "met": met,
        "met_at_ci_edge": strict,
    }


def _r(x: dict[str, Any], pct: bool = False, digits: int = 2) -> str:
    if pct:
        return f"{100 * x['mean']:+.1f}% ± {100 * x['ci95']:.1f}"
    return f"{x['mean']:.{digits}f} ± {x['ci95']:.{digits}f}"


def checks(summary: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for name, g in summary["reference_gains"].items():
        cost, hit, delay = g["cost"], g["hit_rate"], g["mean_delay"]
        # The cost is set by the budget (tuned to -11% within 1%): it is checked with that
        # tolerance; hit rate and delay are what the planner does with it.
        cost_ok = cost["mean"] <= REF_COST + COST_TOLERANCE
        met = cost_ok and hit["mean"] >= REF_HIT and delay["mean"] <= REF_DELAY
        strict = (
            cost_ok
            and hit["mean"] - hit["ci95"] >= REF_HIT
            and delay["mean"] + delay["ci95"] <= REF_DELAY
        )
        out.append(
            _check(
                f"reference-{name}",
                f"{name.replace('_g', ', gamma = ')}: the reference's gains vs the median "
                "fixed interval",
                "cost <= -11% (set by the budget, within 1%), hit rate >= +46%, mean delay <= -14%",
                f"cost {_r(cost, True)}, hit rate {_r(hit, True)}, delay {_r(delay, True)}; "
                f"at this cost no schedule passes {_r(g['hit_rate_gain_bound'], True)} on hit "
                "rate (hits <= articles), and one that knows only rates about "
                f"{_r(g['hit_rate_gain_bound_rates'], True)}",
                met,
                strict,
            )
        )
    for section, label in (
        ("equal_cost_ratios", "equal cost"),
        ("drift_ratios", "drift, equal cost"),
    ):
        r = summary[section]
        for other, limit, text in (
            ("fixed", VS_FIXED, ">= 30% lower mean delay than the fixed interval"),
            ("nutch", VS_NUTCH, ">= 15% lower mean delay than the Nutch-style schedule"),
            ("true_rate", VS_TRUE, "mean delay within 1.3x of the true-rate planner"),
        ):
            x = r[f"delay_vs_{other}"]
            worlds = sum(v <= limit for v in x["values"])
            out.append(
                _check(
                    f"{section}-{other}",
                    f"{label}: {text}",
                    f"planner / {other} delay <= {limit}",
                    f"{_r(x, digits=3)} (within the target in {worlds} of {x['n']} worlds)",
                    x["mean"] <= limit,
                    x["mean"] + x["ci95"] <= limit,
                )
            )
        # Missed articles are counts, mostly 0: judged world by world, not by a t interval.
        x = r["missed_minus_nutch"]
        worlds = sum(v <= 0 for v in x["values"])
        out.append(
            _check(
                f"{section}-missed",
                f"{label}: no more missed articles than the Nutch-style schedule",
                "planner missed <= Nutch missed, in every world",
                f"difference {x['mean']:+.1f} ± {x['ci95']:.1f} articles per world; planner "
                f"<= Nutch-style in {worlds} of {x['n']} worlds",
                worlds == x["n"],
                worlds == x["n"],
            )
        )
    return out


# -- tables ---------------------------------------------------------------------------------

LABELS = {
    "fixed": "fixed interval (tuned to the cost)",
    "nutch": "Nutch-style adaptive (increase tuned)",
    "nutch_untuned": "Nutch-style adaptive (x0.8 / x1.4)",
    "per_seed_constant": "per-seed constant rate (sqrt split of mean rates)",
    "planner": "forest planner (gamma = 0.5)",
    "planner_no_learning": "forest planner, no online learning",
    "true_rate": "true-rate planner (bound)",
    "clairvoyant": "clairvoyant (bound)",
    "planner_g0.5": "forest planner, gamma = 0.5 (square-root rule)",
    "planner_g0.75": "forest planner, gamma = 0.75",
    "planner_g1": "forest planner, gamma = 1 (k rule)",
}


def _m(x: dict[str, Any], digits: int = 1, scale: float = 1.0) -> str:
    return f"{x['mean'] * scale:,.{digits}f} ± {x['ci95'] * scale:,.{digits}f}"


def _figures(m: dict[str, Any]) -> list[str]:
    """A method's cells: fetches, hit rate, mean and p90 delay, missed."""
    return [
        _m(m["fetches"], 0),
        _m(m["hit_rate"], 1, 100),
        _m(m["mean_delay_s"]),
        _m(m["p90_delay_s"]),
        _m(m["missed"]),
    ]


def methods_table(methods: dict[str, Any]) -> report.Table:
    head = ["method", "fetches", "hit rate %", "mean delay s", "p90 delay s", "missed"]
    rows = [
        [
            LABELS.get(name, name),
            *_figures(m),
        ]
        for name, m in methods.items()
    ]
    return head, rows


def ratios_table(r: dict[str, Any], others: Sequence[str]) -> report.Table:
    head = ["planner vs", "fetches ratio", "mean delay ratio", "missed, difference"]
    rows = [
        [
            LABELS.get(o, o),
            _r(r[f"fetches_vs_{o}"], digits=3),
            _r(r[f"delay_vs_{o}"], digits=3),
            f"{r[f'missed_minus_{o}']['mean']:+.1f} ± {r[f'missed_minus_{o}']['ci95']:.1f}",
        ]
        for o in others
    ]
    return head, rows


def reference_table(summary: dict[str, Any]) -> report.Table:
    head = report.columns(
        "method | fetches | hit rate % | mean delay s | p90 delay s | missed | "
        "cost change | hit rate change | delay change"
    )
    med = summary["median_fixed"]
    rows = [
        [
            "median of the ten fixed intervals",
            *_figures(med),
            "",
            "",
            "",
        ]
    ]
    for name, m in summary["reference"].items():
        g = summary["reference_gains"][name]
        rows.append(
            [
                LABELS.get(name, name),
                *_figures(m),
                _r(g["cost"], True),
                _r(g["hit_rate"], True),
                _r(g["mean_delay"], True),
            ]
        )
    rows.append(["reference (target)", "", "", "", "", "", "-11%", "+46%", "-14%"])
    return head, rows


def fixed_table(summary: dict[str, Any]) -> report.Table:
    head = ["interval", "fetches", "hit rate %", "mean delay s", "p90 delay s", "missed"]
    rows = []
    for i in FIXED_INTERVALS:
        m = summary["fixed"][str(i)]
        label = f"{i} s" if i < 60 else f"{i // 60} min" if i < 3600 else f"{i // 3600} h"
        rows.append(
            [
                label,
                *_figures(m),
            ]
        )
    return head, rows


def curve_table(summary: dict[str, Any], setup: Setup) -> report.Table:
    head = report.columns(
        "cost of fixed | fetches | fixed delay s | planner delay s | true-rate delay s | "
        "clairvoyant delay s | fixed missed | planner missed"
    )
    rows = []
    for k, i in enumerate(setup.curve_intervals):
        f = summary["fixed"][str(i)]
        p = summary["curves"]["planner"][k]
        t = summary["curves"]["true_rate"][k]
        c = summary["curves"]["clairvoyant"][k]
        label = f"{i // 60} min" if i < 3600 else f"{i // 3600} h"
        rows.append(
            [
                label,
                _m(f["fetches"], 0),
                *(_m(x["mean_delay_s"]) for x in (f, p, t, c)),
                *(_m(x["missed"]) for x in (f, p)),
            ]
        )
    return head, rows


def model_table(rows: list[dict[str, Any]]) -> report.Table:
    head = report.columns(
        "key | kind | seeds | articles (30 d) | per day | CV R² | tail R² | "
        "ceiling (est.) | ceiling (true) | tail dev. forest | tail dev. GLM | CV R² GLM | "
        "tail R² GLM | best"
    )
    out = []
    for r in rows:
        out.append(
            [
                r["key"],
                r["kind"],
                str(r["seeds"]),
                f"{r['articles']:,}",
                f"{r['articles_per_day']:.0f}",
                *(_f(r[k]) for k in ("cv_r2", "tail_r2", "r2_ceiling", "true_r2_ceiling")),
                *(_f(r[f"tail_deviance_{k}"], 3) for k in ("forest", "glm")),
                *(_f(r[k]) for k in ("cv_r2_glm", "tail_r2_glm")),
                r["best_by_tail_deviance"],
            ]
        )
    return head, out


def model_summary_table(ms: dict[str, Any]) -> report.Table:
    head = report.columns(
        "keys | count | articles/day | CV R² forest | CV R² GLM | tail R² forest | "
        "tail R² GLM | ceiling (est.) | ceiling (true) | tail dev. forest | tail dev. GLM | "
        "forest best by tail dev. | CV R² in 0.6-0.9"
    )
    rows = []
    for name, label in (
        ("all", "all"),
        ("ceiling_at_least_0.6", "ceiling >= 0.6"),
        ("ceiling_below_0.6", "ceiling < 0.6 (low volume)"),
    ):
        g = ms[name]
        rows.append(
            [
                label,
                str(g["keys"]),
                _f(g["articles_per_day"], 0),
                *(_f(g[f"{k}_{m}"]) for k in ("cv_r2", "tail_r2") for m in ("forest", "glm")),
                *(_f(g[k]) for k in ("r2_ceiling", "true_r2_ceiling")),
                *(_f(g[f"tail_deviance_{m}"], 3) for m in ("forest", "glm")),
                f"{g['forest_wins_tail_deviance']}/{g['keys']}",
                f"{g['in_reference_range']}/{g['keys']}",
            ]
        )
    return head, rows


def variants_table(summary: dict[str, Any], worlds: list[dict[str, Any]]) -> report.Table:
    keys = sum(w["model_variants"]["keys"] for w in worlds)
    head = ["model", f"excess Poisson deviance, next 7 days ({keys} keys)"]
    rows = [[name, _r(x, digits=3)] for name, x in summary["model_variants"].items()]
    return head, rows


def checks_table(items: list[dict[str, Any]]) -> report.Table:
    rows = []
    for c in items:
        verdict = "yes" if c["met"] else "**no**"
        if c["met"] and c["met_at_ci_edge"] is False:
            verdict = "yes (mean; not at the CI's edge)"
        rows.append([c["shape"], c["target"], c["measured"], verdict])
    return ["target", "rule", "measured (mean ± 95% CI over worlds)", "met"], rows


def _f(x: Any, digits: int = 2) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


# -- plot -----------------------------------------------------------------------------------

COLORS = {
    "fixed": "#7f7f7f",
    "nutch": "#ff7f0e",
    "planner": "#1f77b4",
    "true_rate": "#2ca02c",
    "clairvoyant": "#d62728",
    "per_seed_constant": "#9467bd",
}


def plot(summary: dict[str, Any], path: Any, setup: Setup) -> None:
    """Delay and missed articles against fetches: each method's curve over its knob."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 5.4))
    labels = {
        "fixed": "fixed intervals (10 s ... 2 h)",
        "nutch": "Nutch-style adaptive (x0.8; increase 0.02 ... 1)",
        "true_rate": "true-rate planner (bound)",
        "clairvoyant": "clairvoyant (bound)",
        "planner": "forest planner (gamma = 0.5)",
    }
    styles = {"true_rate": {"linestyle": "--"}, "planner": {"linewidth": 2.2}}
    # The clairvoyant's delay is 0 once it may fetch at every publication: drawn at 1 s.
    floor = 1.0
    for name, label in labels.items():
        pts = sorted(summary["curves"][name], key=lambda p: p["fetches"]["mean"])
        x = [p["fetches"]["mean"] for p in pts]
        for ax, key, low in ((axes[0], "mean_delay_s", floor), (axes[1], "missed", 0.0)):
            y = [max(p[key]["mean"], low) for p in pts]
            ci = [p[key]["ci95"] for p in pts]
            below = [min(c, v - low) for c, v in zip(ci, y, strict=True)]
            ax.errorbar(
                x,
                y,
                yerr=[below, ci],
                marker="o",
                ms=4,
                capsize=2,
                color=COLORS[name],
                label=label,
                **styles.get(name, {}),
            )
    eq = summary["equal_cost"]
    for name in ("fixed", "nutch", "per_seed_constant", "planner", "true_rate", "clairvoyant"):
        m = eq[name]
        axes[0].plot(
            m["fetches"]["mean"],
            max(m["mean_delay_s"]["mean"], floor),
            marker="*",
            ms=14,
            color=COLORS[name],
            markeredgecolor="black",
            linestyle="none",
            zorder=5,
            label=LABELS[name] if name == "per_seed_constant" else None,
        )
    axes[0].plot(
        [],
        [],
        marker="*",
        ms=12,
        color="white",
        markeredgecolor="black",
        linestyle="none",
        label="stars: each method tuned to the planner's fetches",
    )
    axes[0].set_xscale("log")
    axes[0].set_yscale("log")
    axes[0].set_ylim(bottom=0.8 * floor)
    axes[0].set_ylabel("mean delay, publication to discovery (s)")
    axes[0].set_title("delay vs cost (the clairvoyant's 0 s drawn at 1 s)")
    axes[1].set_xscale("log")
    axes[1].set_yscale("symlog", linthresh=10)
    axes[1].set_ylim(bottom=0)
    axes[1].set_ylabel("articles missed (scrolled off before any fetch)")
    axes[1].set_title("missed articles vs cost")
    for ax in axes:
        ax.set_xlabel(f"fetches in the {setup.eval_days:g}-day window (all seeds)")
        ax.grid(alpha=0.3, which="both")
    axes[0].legend(fontsize=8, loc="upper right")
    fig.suptitle(
        f"Recrawl planner on simulated news sites: means over {len(setup.seeds)} worlds "
        "(error bars: 95% CI over the worlds)",
        fontsize=10,
    )
    report.save_figure(fig, path)


# -- output ---------------------------------------------------------------------------------


def _jsonable(x: Any) -> Any:
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    raise TypeError(type(x).__name__)


def _clean(x: Any) -> Any:
    """NaN -> None and dict keys -> str, so the JSON is strict."""
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if isinstance(x, float) and math.isnan(x):
        return None
    return x


def findings(summary: dict[str, Any], checklist: list[dict[str, Any]]) -> list[str]:
    """The report's first paragraph: what was met, what was not, and where the gain is from."""
    met = [c for c in checklist if c["met"]]
    eq, an, dr = (summary[k] for k in ("equal_cost_ratios", "at_nutch_cost_ratios", "drift_ratios"))

    def mean(section: str, method: str, key: str) -> float:
        return summary[section][method][key]["mean"]

    ref = summary["reference_gains"]
    gammas = sorted(ref, key=lambda n: float(n.split("_g")[1]))
    model, variants = summary["model"], summary["model_variants"]
    out = [f"{len(met)} of {len(checklist)} targets met (on the mean over the worlds)."]
    out.append(
        "At the planner's cost (0.89 x the median fixed interval's fetches) its mean delay is "
        f"{eq['delay_vs_fixed']['mean']:.2f} x the fixed interval's, "
        f"{eq['delay_vs_nutch']['mean']:.2f} x the Nutch-style schedule's (tuned to the same "
        f"cost) and {eq['delay_vs_true_rate']['mean']:.2f} x the true-rate planner's; it missed "
        f"{mean('equal_cost', 'planner', 'missed'):.1f} articles per world, the Nutch-style "
        f"schedule {mean('equal_cost', 'nutch', 'missed'):.1f}, the fixed interval "
        f"{mean('equal_cost', 'fixed', 'missed'):.1f}."
    )
    flat = mean("equal_cost", "per_seed_constant", "mean_delay_s") / mean(
        "equal_cost", "fixed", "mean_delay_s"
    )
    out.append(
        "Most of the gain over a fixed interval comes from splitting the fetches between seeds "
        "by the square root of their rates: each seed at its own constant rate already has "
        f"{flat:.2f} x the fixed interval's delay; the hour-and-weekday model takes the "
        f"planner {100 * (1 - eq['delay_vs_per_seed_constant']['mean']):.0f}% lower still."
    )
    gains = ", ".join(
        f"{100 * ref[n]['hit_rate']['mean']:+.0f}% at gamma = {n.split('_g')[1]}" for n in gammas
    )
    out.append(
        "Against the median fixed interval, at 11% fewer fetches, the delay target (-14%) is "
        f"met ({100 * ref[gammas[0]]['mean_delay']['mean']:+.0f}% at gamma = 0.5) and the "
        f"hit-rate target (+46%) is not: {gains}. At that cost a schedule that knows only the "
        f"rates can reach about {100 * ref[gammas[0]]['hit_rate_gain_bound_rates']['mean']:+.0f}% "
        "(1 - exp(-articles / fetches) against the median's hit rate): in these worlds the "
        "reference's hit-rate gain is at or beyond that bound."
    )
    out.append(
        f"At the untuned Nutch-style schedule's own cost (it settles at a "
        f"{100 * mean('at_nutch_cost', 'nutch_untuned', 'hit_rate'):.0f}% hit rate), the "
        f"planner's delay is {an['delay_vs_nutch_untuned']['mean']:.2f} x its, and it missed "
        f"{mean('at_nutch_cost', 'planner', 'missed'):.1f} articles per world against "
        f"{mean('at_nutch_cost', 'nutch_untuned', 'missed'):.1f}."
    )
    out.append(
        "When half the sites double their output after training, the ratios hold (delay "
        f"{dr['delay_vs_fixed']['mean']:.2f} x the fixed interval's, "
        f"{dr['delay_vs_nutch']['mean']:.2f} x the Nutch-style schedule's, "
        f"{dr['delay_vs_true_rate']['mean']:.2f} x the true-rate planner's); learning online "
        f"lowers the delay by {100 * (1 - dr['delay_vs_planner_no_learning']['mean']):.1f}% "
        "against the same planner without it. The square-root split is forgiving: a rate "
        "wrong by 2x moves a seed's fetch rate by only 1.4x."
    )
    a = model["all"]
    out.append(
        f"Models: the forest has the lower tail deviance on {a['forest_wins_tail_deviance']} "
        f"of {a['keys']} keys against the GLM; mean CV R² {a['cv_r2_forest']:.2f} vs "
        f"{a['cv_r2_glm']:.2f}, tail R² {a['tail_r2_forest']:.2f} vs {a['tail_r2_glm']:.2f}; "
        "on the 7 days after training, its deviance in excess of the true rhythm's is "
        f"{variants['forest (the default)']['mean']:.3f} against the GLM's "
        f"{variants['Poisson GLM']['mean']:.3f}. {a['in_reference_range']} of {a['keys']} keys "
        "have a CV R² in the reference's 0.6-0.9; "
        f"{model['ceiling_below_0.6']['keys']} keys (about "
        f"{model['ceiling_below_0.6']['articles_per_day']:.0f} articles a day) have a ceiling "
        "below 0.6 and cannot get there with any model."
    )
    if len(met) < len(checklist):
        out.append("Not met: " + "; ".join(c["shape"] for c in checklist if not c["met"]) + ".")
    return out


def scenario_section(
    summary: dict[str, Any], scenario: str, others: Sequence[str], title: str, note: str
) -> report.Section:
    """A scenario's methods at equal cost, then their ratios to the planner per world."""
    ratios = ratios_table(summary[f"{scenario}_ratios"], others)
    return title, note, [("", methods_table(summary[scenario])), ("Ratios, per world", ratios)]


def write_outputs(
    setup: Setup,
    worlds: list[dict[str, Any]],
    summary: dict[str, Any],
    checklist: list[dict[str, Any]],
    command: str,
    run_time: float,
) -> None:
    env = environment("numpy", **{"scikit-learn": version("sklearn")})

    def flat(methods: dict[str, Any]) -> dict[str, Any]:
        return {
            name: {
                **{k: m[k]["mean"] for k in METRICS},
                **{f"{k}_ci95": m[k]["ci95"] for k in METRICS},
            }
            for name, m in methods.items()
        }

    # Every method's five figures (means over the worlds, and their 95% CIs), per scenario.
    per_method = {
        "fixed_intervals": flat(
            {f"fixed {i} s": summary["fixed"][str(i)] for i in FIXED_INTERVALS}
        ),
        "reference_cost": flat(summary["reference"]),
        "equal_cost": flat(summary["equal_cost"]),
        "at_nutch_cost": flat(summary["at_nutch_cost"]),
        "drift": flat(summary["drift"]),
    }
    data = {
        "command": command,
        "environment": env,
        "run_time_s": round(run_time, 1),
        "setup": asdict(setup),
        "targets": checklist,
        "methods": per_method,
        "summary": summary,
        "worlds": worlds,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "recrawl.json").write_text(
        report.compact_json(_clean(data), allow_nan=False, default=_jsonable) + "\n",
        encoding="utf-8",
    )
    n = len(setup.seeds)
    w0 = worlds[0]
    intro = [
        f"Command: ``{command}``; {env['date']}, {env['cpus']} CPUs, scikit-learn "
        f"{env['scikit-learn']}; the whole run took {run_time / 60:.1f} minutes.",
        f"{n} simulated worlds (simulator seeds {', '.join(map(str, setup.seeds))}), "
        f"{setup.n_sites} news sites each ({statistics.mean(w['seeds'] for w in worlds):.0f} seed "
        f"pages on average), {setup.volume_range[0]:g}-{setup.volume_range[1]:g} articles a day "
        f"per seed (log-uniform); 30 days of history, then 1 day of warm-up and a "
        f"{setup.eval_days:g}-day window. Every figure is a mean over the worlds ± the "
        "half-width of its 95% confidence interval (Student t); ratios are per world. See "
        "the docstring of benchmarks/recrawl.py for the methods.",
    ]
    sections: list[report.Section] = [
        ("What the numbers show", "\n\n".join(findings(summary, checklist)), []),
        ("Targets", "", [("", checks_table(checklist))]),
        ("Delay and missed articles vs cost", "recrawl_delay_vs_cost.png", []),
        (
            "The reference comparison: vs the median of the ten fixed intervals",
            "The planner's budget is 0.89 x the median fixed interval's fetches (each measure's "
            "median is taken on its own over the ten intervals). A hit rate cannot exceed "
            "articles / fetches, and for a schedule that knows only the rates, about "
            "1 - exp(-articles / fetches): the bounds on the gain are in Targets.",
            [("", reference_table(summary))],
        ),
        scenario_section(
            summary,
            "equal_cost",
            ("fixed", "nutch", "per_seed_constant", "true_rate"),
            "Every method at the planner's cost",
            "Each method's knob tuned to the forest planner's number of fetches (within 1%). "
            "The clairvoyant needs no more than one fetch per article (plus one wherever a "
            "list page would overflow): at this cost it fetches every article the moment it "
            "is published, with fewer fetches than the others.",
        ),
        scenario_section(
            summary,
            "at_nutch_cost",
            ("fixed", "nutch_untuned", "true_rate"),
            "At the untuned Nutch-style schedule's own cost",
            "x0.8 after new links, x1.4 after none: it settles where about 60% of fetches find "
            "something, and so fetches far less than the median fixed interval.",
        ),
        scenario_section(
            summary,
            "drift",
            ("fixed", "nutch", "planner_no_learning", "true_rate"),
            "Drift: half the sites double their output after training",
            f"From the start of the window, the seeds of half the sites publish "
            f"{setup.drift_factor:g}x as much; the model does not know. The planner keeps its "
            "budget and learns each seed's multiplier online; the others are tuned to its "
            "number of fetches; the true-rate planner knows the new rates.",
        ),
        (
            "The planners at each fixed interval's cost",
            "The forest and true-rate planners with the budget of a fixed interval's fetches; "
            "the clairvoyant tuned to them.",
            [("", curve_table(summary, setup))],
        ),
        ("The ten fixed intervals", "", [("", fixed_table(summary))]),
        (
            "Models",
            "Per key, over all worlds: the forest (the planner's model) and the Poisson GLM "
            "baseline (log λ = a_hour + b_weekday), ranked by mean Poisson deviance on the last "
            "7 days of the history when trained on the 23 before. The ceiling is "
            "Var(λ)/(Var(λ)+E[λ]): estimated from the counts, and computed from the simulator's "
            "true hourly rates (bursts included). Keys below 0.6 cannot reach the reference's "
            "R² of 0.6-0.9 with any model: their hourly counts are mostly Poisson noise.",
            [
                ("", model_summary_table(summary["model"])),
                (
                    "Model variants: deviance on the 7 days after training, in excess of the "
                    "true rhythm's (mean over keys; ± over worlds)",
                    variants_table(summary, worlds),
                ),
                (f"Every key of world {w0['seed']}", model_table(w0["model"])),
            ],
        ),
    ]
    definitions = {
        "fetches": f"fetches made in the {setup.eval_days:g}-day window, all seeds together",
        "hit rate": "share of those fetches that found at least one new link",
        "delay": "time from an article's publication to the fetch that found it (found "
        "articles of the window; the 90th percentile over all of them, pooled)",
        "missed": "articles of the window that scrolled off their list page before any fetch",
        "equal cost": "each method's knob tuned until its fetches are within 1% of the target",
        "CI": "half-width of the 95% Student-t interval of the mean over the worlds",
    }
    png = DOCS_RESULTS / "recrawl_delay_vs_cost.png"
    report.publish(
        "recrawl",
        "Recrawl planner: news seed pages",
        intro,
        sections,
        definitions,
        figures=lambda: plot(summary, png, setup),
    )


def main() -> int:
    parser = report.arg_parser(__doc__, quick="1 world, 3-day window; writes nothing")
    parser.add_argument("--seeds", type=int, help="number of worlds (simulator seeds 0..N-1)")
    parser.add_argument("--jobs", type=int, default=2, help="worlds evaluated in parallel (2)")
    args = parser.parse_args()
    setup = QUICK if args.quick else Setup()
    if args.seeds is not None:
        if args.seeds < 1:
            parser.error("--seeds must be >= 1")
        setup = replace(setup, seeds=tuple(range(args.seeds)))
    started = time.monotonic()
    if args.jobs > 1 and len(setup.seeds) > 1:
        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            worlds = list(pool.map(evaluate_world, [setup] * len(setup.seeds), setup.seeds))
    else:
        worlds = [evaluate_world(setup, seed) for seed in setup.seeds]
    run_time = time.monotonic() - started
    summary = summarize(worlds)
    checklist = checks(summary)
    if args.quick:
        print(report.markdown(methods_table(summary["equal_cost"])))
        print(report.markdown(methods_table(summary["at_nutch_cost"])))
        print(report.markdown(reference_table(summary)))
        print(report.markdown(methods_table(summary["drift"])))
        print(report.markdown(checks_table(checklist)))
        print(f"--quick: nothing written ({run_time:.0f} s)")
        return 0
    command = report.command_line(__file__, sys.argv[1:])
    write_outputs(setup, worlds, summary, checklist, command, run_time)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
