"""The rate model: new articles per hour of each seed, by hour of day and weekday.

**What is fitted.** Per key of :func:`.samples.build_samples` (a seed with enough articles,
or a host pooling the seeds that fell back to it), a regressor from the 31 one-hot
features ``h0..h23, w0..w6`` to the article count of the hour:

- ``"forest"`` (the model): scikit-learn's ``RandomForestRegressor`` with
  ``criterion="poisson"``, ``min_samples_leaf=5`` and ``max_features=0.5``. The counts are
  Poisson-like and often 0 or 1: the Poisson criterion splits on the deviance of a rate
  rather than on squared error (and never makes a leaf of zero rate, which would stop a
  seed from being fetched). 30 days hold only 4-5 hours of each of the 168 (weekday, hour)
  cells, so a leaf of at least 5 hours keeps one busy hour from being learnt as the rhythm.
  Besides the one-hot columns the forest also gets the hour (0-23) and the weekday (0-6)
  as numbers (``ordinal=True``): on one-hot columns alone a tree isolates one hour or one
  day per split, and with leaves of 5 it cannot split a single hour's weekdays from its
  weekend. On two of the benchmark's simulated worlds (46 keys), the mean Poisson
  deviance on the week after training, in excess of the true rhythm's, was 0.50 on one-hot
  columns alone (leaves of 5), 2.6 with leaves of 20, and 0.22 with the two numeric
  columns and half the features per split, as the GLM's (``benchmarks/recrawl.py``
  measures it on every world: "Models").
- ``"glm"`` (the baseline): ``PoissonRegressor``, i.e. ``log λ = a_hour + b_weekday``:
  the same rhythm every day, scaled by day.

**How it is judged.** For each key: the R² of random k-fold cross-validation (out-of-fold
predictions pooled over the folds), the R² and the mean Poisson deviance on the most
recent ``tail_days`` when trained on the days before (rates drift; the tail is what the
planner will face next), and the ceiling no model of the rate can pass,
``Var(λ) / (Var(λ) + E[λ])``, estimated from the counts as ``(Var(y) - E[y]) / Var(y)``
(for Poisson counts ``Var(y) = Var(λ) + E[λ]``). A key publishing 2 articles an hour with
a rhythm between 1 and 3 cannot pass about 0.25, however good the model: the reference's
0.6-0.9 needs busy keys, and the report says which keys cannot get there. Models are
ranked by tail deviance, the likelihood-based score for counts (R² is dominated by the
busiest hours).

**What is kept.** The features are only (hour, weekday), so a fitted model *is* its
prediction for each of the 168 cells: the predictor stores that 7 x 24 table per key
(articles per hour), with the fit's metadata and scores, as JSON — never a pickle — and
answers :meth:`RecrawlPredictor.rate` from the table, without scikit-learn. Refitting on a
schedule (say daily, on the last 30 days) is how the model follows slow change; the
planner corrects faster drift online.

Pure module: no Scrapy; no I/O beyond :meth:`RecrawlPredictor.save` and ``load``.
scikit-learn is imported only by the fitting functions.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .samples import (
    DEFAULT_DAYS,
    DEFAULT_MIN_SAMPLES,
    FEATURE_NAMES,
    HOURS_PER_WEEK,
    ORDINAL_NAMES,
    Route,
    Samples,
    Series,
    build_samples,
    features,
    week_cell,
)

#: Format marker of saved predictors; bump the version when the layout changes.
FORMAT = "scrapy_twolevel.recrawl.predictor"
FORMAT_VERSION = 1
MODELS = ("forest", "glm")
#: Reference R² range; keys whose ceiling is below its low end cannot reach it.
REFERENCE_R2 = (0.6, 0.9)
#: Predictions are clipped to this floor for the Poisson deviance (log of 0).
_FLOOR = 1e-6


@dataclass(frozen=True)
class FitParams:
    """How keys are fitted and validated (every model gets ``random_state``)."""

    model: str = "forest"
    n_estimators: int = 100
    min_samples_leaf: int = 5
    max_features: float = 0.5
    #: Give the forest the hour and weekday as numbers too (the GLM never needs them).
    ordinal: bool = True
    glm_alpha: float = 1e-4
    folds: int = 5
    tail_days: int = 7
    random_state: int = 0
    #: Also fit and score the other model, for the report (doubles the fitting time).
    compare: bool = True

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {self.model!r}")
        if self.folds < 2:
            raise ValueError(f"folds must be >= 2, got {self.folds}")
        if self.tail_days < 1:
            raise ValueError(f"tail_days must be >= 1, got {self.tail_days}")
        if self.min_samples_leaf < 1 or self.n_estimators < 1:
            raise ValueError("min_samples_leaf and n_estimators must be >= 1")


@dataclass(frozen=True)
class ModelScores:
    """One model's validation scores on one key."""

    cv_r2: float
    tail_r2: float
    tail_deviance: float


@dataclass(frozen=True)
class KeyFit:
    """A key's fitted table, its validation and its sample counts."""

    #: ``table[weekday][hour]``: predicted articles per hour, UTC, Monday = 0.
    table: tuple[tuple[float, ...], ...]
    articles: int
    hours: int
    pooled: bool
    seeds: tuple[str, ...]
    #: Per model name; the fitted model's and, with ``compare``, the other's.
    scores: dict[str, ModelScores] = field(default_factory=dict)
    r2_ceiling: float = math.nan
    tail_r2_ceiling: float = math.nan

    @property
    def mean_rate(self) -> float:
        """Articles per hour, averaged over the week."""
        return sum(map(sum, self.table)) / HOURS_PER_WEEK

    def best_model(self) -> str:
        """The model with the lowest tail deviance."""
        return min(self.scores, key=lambda m: self.scores[m].tail_deviance)


# -- fitting ------------------------------------------------------------------------------


def _make(name: str, params: FitParams) -> Any:
    if name == "forest":
        from sklearn.ensemble import RandomForestRegressor

        return RandomForestRegressor(
            n_estimators=params.n_estimators,
            criterion="poisson",
            min_samples_leaf=params.min_samples_leaf,
            max_features=params.max_features,
            random_state=params.random_state,
            n_jobs=1,
        )
    from sklearn.linear_model import PoissonRegressor

    return PoissonRegressor(alpha=params.glm_alpha, max_iter=1000, solver="newton-cholesky")


def _fit_predict(name: str, params: FitParams, x_train: Any, y_train: Any, x_test: Any) -> Any:
    import numpy as np

    if not np.any(y_train):
        # All zeros: both models would fail (the Poisson criterion needs a positive sum).
        return np.zeros(len(x_test))
    model = _make(name, params).fit(x_train, y_train)
    return np.maximum(model.predict(x_test), 0.0)


def r2_ceiling(counts: Sequence[float]) -> float:
    """``Var(λ) / (Var(λ) + E[λ])`` estimated as ``(Var(y) - mean(y)) / Var(y)``, in [0, 1].

    The share of the counts' variance that is variance of the rate: what a model that
    knew the rate exactly would reach as R² (bursts and drift count as rate variance
    here, so an hour-and-weekday model's own ceiling is lower still).
    """
    n = len(counts)
    if n < 2:
        return math.nan
    mean = sum(counts) / n
    var = sum((c - mean) ** 2 for c in counts) / n
    if var <= 0:
        return math.nan
    return min(1.0, max(0.0, (var - mean) / var))


def _scores(name: str, params: FitParams, x: Any, y: Any) -> ModelScores:
    import numpy as np
    from sklearn.metrics import mean_poisson_deviance, r2_score
    from sklearn.model_selection import KFold

    oof = np.zeros(len(y))
    folds = KFold(n_splits=params.folds, shuffle=True, random_state=params.random_state)
    for train, test in folds.split(x):
        oof[test] = _fit_predict(name, params, x[train], y[train], x[test])
    cut = len(y) - params.tail_days * 24
    tail = _fit_predict(name, params, x[:cut], y[:cut], x[cut:])
    return ModelScores(
        cv_r2=float(r2_score(y, oof)),
        tail_r2=float(r2_score(y[cut:], tail)),
        tail_deviance=float(mean_poisson_deviance(y[cut:], np.maximum(tail, _FLOOR))),
    )


def _week_rows(ordinal: bool) -> list[tuple[int, ...]]:
    # Any Monday 00:00 UTC: 1970-01-05 (day 4).
    monday = 4 * 86400.0
    return [features(monday + cell * 3600.0, ordinal) for cell in range(HOURS_PER_WEEK)]


def _ordinal(name: str, params: FitParams) -> bool:
    return name == "forest" and params.ordinal


def fit_table(series: Series, params: FitParams = FitParams()) -> tuple[tuple[float, ...], ...]:
    """``params.model`` fitted on all of ``series``, as its 7 x 24 table; no validation."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    ordinal = _ordinal(params.model, params)
    x = np.asarray(series.features(ordinal), dtype=float)
    y = np.asarray(series.counts, dtype=float)
    week = np.asarray(_week_rows(ordinal), dtype=float)
    with threadpool_limits(limits=1):
        pred = _fit_predict(params.model, params, x, y, week)
    return tuple(tuple(round(float(pred[w * 24 + h]), 6) for h in range(24)) for w in range(7))


def fit_series(series: Series, params: FitParams = FitParams()) -> KeyFit:
    """Validate ``params.model`` (and, with ``compare``, the other) on one key; fit its table."""
    import numpy as np
    from threadpoolctl import threadpool_limits

    if series.hours <= params.tail_days * 24:
        raise ValueError(
            f"{series.key}: {series.hours} hours of samples, not more than the "
            f"{params.tail_days}-day tail; fit over more days or a shorter tail"
        )
    y = np.asarray(series.counts, dtype=float)
    names = MODELS if params.compare else (params.model,)
    xs = {n: np.asarray(series.features(_ordinal(n, params)), dtype=float) for n in names}
    # These are tiny problems: BLAS threads only contend (the GLM took 1.4 s instead of
    # 0.015 s on a busy 2-core machine).
    with threadpool_limits(limits=1):
        scores = {name: _scores(name, params, xs[name], y) for name in names}
    table = fit_table(series, params)
    cut = len(y) - params.tail_days * 24
    return KeyFit(
        table=table,
        articles=series.articles,
        hours=series.hours,
        pooled=series.pooled,
        seeds=series.seeds,
        scores=scores,
        r2_ceiling=r2_ceiling(series.counts),
        tail_r2_ceiling=r2_ceiling(series.counts[cut:]),
    )


def fit_samples(samples: Samples, params: FitParams = FitParams()) -> RecrawlPredictor:
    """A predictor from samples already built (see :func:`.samples.build_samples`)."""
    fits = {key: fit_series(s, params) for key, s in sorted(samples.series.items())}
    meta = {
        "window_start": samples.start,
        "window_end": samples.end,
        "min_samples": samples.min_samples,
        "params": asdict(params),
        "features": {
            "forest": list(FEATURE_NAMES) + (list(ORDINAL_NAMES) if params.ordinal else []),
            "glm": list(FEATURE_NAMES),
        },
        "unknown_publish_times": sum(samples.unknown.values()),
    }
    return RecrawlPredictor(fits, samples.routes, meta=meta)


def fit_predictor(
    events: Iterable[tuple[str, float | None]],
    as_of: float,
    *,
    days: int = DEFAULT_DAYS,
    min_samples: int = DEFAULT_MIN_SAMPLES,
    params: FitParams = FitParams(),
) -> RecrawlPredictor:
    """Fit every seed's rate from ``(seed_key, publish_time)`` pairs (epoch s, UTC).

    Uses the ``days`` whole hours before ``as_of``; seeds with fewer than ``min_samples``
    dated articles fall back to their host (see :mod:`.samples`).
    """
    samples = build_samples(events, as_of, days=days, min_samples=min_samples)
    return fit_samples(samples, params)


# -- the predictor ------------------------------------------------------------------------


class RecrawlPredictor:
    """Predicted new articles per hour of each seed, from per-key 7 x 24 tables.

    ``rate(seed, t) = share(seed) * table[key(seed)][weekday(t)][hour(t)]``; ``None`` for a
    seed without a model. Build it with :func:`fit_predictor` or :meth:`load`.
    """

    def __init__(
        self,
        fits: Mapping[str, KeyFit],
        routes: Mapping[str, Route],
        *,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        for seed, route in routes.items():
            if route.key not in fits:
                raise ValueError(f"seed {seed!r} routed to {route.key!r}, which has no table")
        self.fits = dict(fits)
        self.routes = dict(routes)
        self.meta = dict(meta or {})
        # Flattened week of each seed (share applied): one list index per rate() call.
        self._weeks = {
            seed: [route.share * v for row in fits[route.key].table for v in row]
            for seed, route in routes.items()
        }

    def rate(self, seed_key: str, t: float) -> float | None:
        """Predicted new articles per hour of ``seed_key`` in the UTC hour holding ``t``."""
        week = self._weeks.get(seed_key)
        return None if week is None else week[week_cell(t)]

    def seeds(self) -> list[str]:
        """Seed keys with a model."""
        return sorted(self.routes)

    def week(self, seed_key: str) -> list[float] | None:
        """The seed's 168 predicted hourly rates, Monday 00:00 UTC first."""
        week = self._weeks.get(seed_key)
        return None if week is None else list(week)

    def mean_rate(self, seed_key: str) -> float | None:
        """The seed's predicted articles per hour, averaged over the week."""
        week = self._weeks.get(seed_key)
        return None if week is None else sum(week) / HOURS_PER_WEEK

    # -- report --------------------------------------------------------------------------

    def report(self) -> list[dict[str, Any]]:
        """One row per key: sample counts, CV R², tail R², ceilings and tail deviances."""
        model = self.meta.get("params", {}).get("model", "forest")
        rows = []
        for key, fit in sorted(self.fits.items()):
            own = fit.scores.get(model)
            row: dict[str, Any] = {
                "key": key,
                "kind": "host pool" if fit.pooled else "seed",
                "seeds": len(fit.seeds),
                "articles": fit.articles,
                "hours": fit.hours,
                "articles_per_day": round(fit.articles / (fit.hours / 24), 2),
                "model": model,
                "cv_r2": own.cv_r2 if own else math.nan,
                "tail_r2": own.tail_r2 if own else math.nan,
                "r2_ceiling": fit.r2_ceiling,
                "tail_r2_ceiling": fit.tail_r2_ceiling,
            }
            for name, s in fit.scores.items():
                row[f"tail_deviance_{name}"] = s.tail_deviance
                row[f"cv_r2_{name}"] = s.cv_r2
                row[f"tail_r2_{name}"] = s.tail_r2
            row["best_by_tail_deviance"] = fit.best_model() if fit.scores else model
            ceiling = fit.r2_ceiling
            row["note"] = (
                f"low volume: ceiling {ceiling:.2f} < {REFERENCE_R2[0]}"
                if not math.isnan(ceiling) and ceiling < REFERENCE_R2[0]
                else ""
            )
            rows.append(row)
        return rows

    def report_text(self) -> str:
        """:meth:`report` as a fixed-width table, for a console."""
        head = (
            "key",
            "kind",
            "articles",
            "/day",
            "CV R²",
            "tail R²",
            "ceiling",
            "dev forest",
            "dev glm",
            "best",
            "note",
        )
        lines = [head]
        for r in self.report():
            lines.append(
                (
                    r["key"],
                    r["kind"],
                    str(r["articles"]),
                    f"{r['articles_per_day']:.1f}",
                    _f(r["cv_r2"]),
                    _f(r["tail_r2"]),
                    _f(r["r2_ceiling"]),
                    _f(r.get("tail_deviance_forest", math.nan), 3),
                    _f(r.get("tail_deviance_glm", math.nan), 3),
                    r["best_by_tail_deviance"],
                    r["note"],
                )
            )
        widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
        return "\n".join(
            "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in lines
        )

    # -- persistence ---------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: format marker, metadata, each key's table and scores, the routes."""
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "meta": self.meta,
            "keys": {
                key: {
                    "table": [list(row) for row in fit.table],
                    "articles": fit.articles,
                    "hours": fit.hours,
                    "pooled": fit.pooled,
                    "seeds": list(fit.seeds),
                    "r2_ceiling": _json_float(fit.r2_ceiling),
                    "tail_r2_ceiling": _json_float(fit.tail_r2_ceiling),
                    "scores": {
                        name: {k: _json_float(v) for k, v in asdict(s).items()}
                        for name, s in fit.scores.items()
                    },
                }
                for key, fit in sorted(self.fits.items())
            },
            "routes": {seed: [r.key, r.share] for seed, r in sorted(self.routes.items())},
        }

    @classmethod
    def from_dict(cls, data: Any, source: str = "predictor data") -> RecrawlPredictor:
        """Rebuild from :meth:`to_dict`; ``ValueError`` naming ``source`` on anything else."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            found = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise ValueError(
                f"{source}: not a saved recrawl predictor (format marker {found!r}, "
                f"expected {FORMAT!r})"
            )
        if data.get("version") != FORMAT_VERSION:
            raise ValueError(
                f"{source}: recrawl predictor format version {data.get('version')!r}; this "
                f"version of scrapy_twolevel reads version {FORMAT_VERSION}: fit it again"
            )
        try:
            fits = {key: _fit_from_dict(value) for key, value in data["keys"].items()}
            routes = {
                seed: Route(str(key), float(share)) for seed, (key, share) in data["routes"].items()
            }
            meta = dict(data.get("meta") or {})
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"{source}: corrupt recrawl predictor ({exc!r})") from exc
        for seed, route in routes.items():
            if not (0.0 <= route.share <= 1.0):
                raise ValueError(f"{source}: seed {seed!r} has share {route.share}, not in [0, 1]")
        try:
            return cls(fits, routes, meta=meta)
        except ValueError as exc:
            raise ValueError(f"{source}: corrupt recrawl predictor ({exc})") from exc

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the JSON form to ``path`` (through a temporary file, then renamed)."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(
            json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n", encoding="utf-8"
        )
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> RecrawlPredictor:
        """Read a file written by :meth:`save`; ``ValueError`` if it is not one."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: not a saved recrawl predictor (not JSON: {exc})") from exc
        return cls.from_dict(data, source=str(path))


def _f(x: float, digits: int = 2) -> str:
    return "-" if x is None or math.isnan(x) else f"{x:.{digits}f}"


def _json_float(x: float) -> float | None:
    return None if math.isnan(x) else x


def _nan(x: Any) -> float:
    return math.nan if x is None else float(x)


def _fit_from_dict(value: dict[str, Any]) -> KeyFit:
    table = tuple(tuple(float(v) for v in row) for row in value["table"])
    if len(table) != 7 or any(len(row) != 24 for row in table):
        raise ValueError("a table is not 7 weekdays x 24 hours")
    if not all(math.isfinite(v) and v >= 0 for row in table for v in row):
        raise ValueError("a table holds a negative or non-finite rate")
    scores = {
        str(name): ModelScores(
            cv_r2=_nan(s["cv_r2"]),
            tail_r2=_nan(s["tail_r2"]),
            tail_deviance=_nan(s["tail_deviance"]),
        )
        for name, s in value.get("scores", {}).items()
    }
    return KeyFit(
        table=table,
        articles=int(value["articles"]),
        hours=int(value["hours"]),
        pooled=bool(value["pooled"]),
        seeds=tuple(str(s) for s in value["seeds"]),
        scores=scores,
        r2_ceiling=_nan(value.get("r2_ceiling")),
        tail_r2_ceiling=_nan(value.get("tail_r2_ceiling")),
    )
