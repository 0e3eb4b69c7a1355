"""The rate model: it learns a known weekly table, validates, and survives a JSON round trip
(and refuses files that are not its own)."""

from __future__ import annotations

import json
import math

import pytest

from scrapy_twolevel.recrawl.model import (
    FORMAT,
    FitParams,
    RecrawlPredictor,
    fit_predictor,
    fit_table,
    r2_ceiling,
)
from scrapy_twolevel.recrawl.samples import build_samples

pytestmark = pytest.mark.unit

HOUR = 3600.0
DAY = 86400.0
MONDAY = 1704067200.0  # 2024-01-01 00:00 UTC
FAST = FitParams(n_estimators=10, folds=3, random_state=0)


def expected_rate(t: float) -> int:
    """Weekdays 08:00-17:59: 10 articles an hour; every other hour: 1."""
    weekday = int((t - MONDAY) // DAY) % 7
    hour = int((t - MONDAY) // HOUR) % 24
    return 10 if weekday < 5 and 8 <= hour < 18 else 1


def events(days: int = 21) -> list[tuple[str, float | None]]:
    """Exactly ``expected_rate`` articles in every hour (no noise), for two seeds of a host.

    ``h.example/big`` gets every article; ``h.example/small`` one article a day (it falls
    back to the host) and ``h.example`` three a day.
    """
    out: list[tuple[str, float | None]] = []
    for i in range(days * 24):
        t = MONDAY + i * HOUR
        out += [("h.example/big", t + 60.0 * k) for k in range(expected_rate(t))]
        if i % 24 == 12:
            out.append(("h.example/small", t))
            out += [("h.example", t + 1.0), ("h.example", t + 2.0), ("h.example", t + 3.0)]
    return out


@pytest.fixture(scope="module")
def predictor() -> RecrawlPredictor:
    return fit_predictor(events(), MONDAY + 21 * DAY, days=21, min_samples=100, params=FAST)


def test_r2_ceiling_is_the_share_of_variance_that_is_rate():
    # mean 2, variance 4: half the variance is Poisson noise of mean 2.
    assert r2_ceiling([0, 4, 0, 4]) == pytest.approx(0.5)
    assert r2_ceiling([0, 2, 0, 2]) == 0.0  # variance = mean: all noise
    assert r2_ceiling([0, 1, 0, 1]) == 0.0  # clipped at 0
    assert math.isnan(r2_ceiling([3, 3, 3]))


def test_the_forest_learns_the_weekly_table(predictor):
    rate = predictor.rate
    assert rate("h.example/big", MONDAY + 21 * DAY + 9 * HOUR) == pytest.approx(10, abs=0.5)
    assert rate("h.example/big", MONDAY + 21 * DAY + 3 * HOUR) == pytest.approx(1, abs=0.5)
    assert rate("h.example/big", MONDAY + 27 * DAY + 9 * HOUR) == pytest.approx(1, abs=0.5)
    assert predictor.mean_rate("h.example/big") == pytest.approx(
        sum(expected_rate(MONDAY + i * HOUR) for i in range(168)) / 168, rel=0.05
    )
    assert rate("nowhere.example/x", MONDAY) is None
    assert predictor.week("nowhere.example/x") is None


def test_seeds_pooled_into_the_host_get_their_share(predictor):
    assert predictor.routes["h.example/small"].key == "h.example"
    assert predictor.routes["h.example/small"].share == pytest.approx(0.25)
    t = MONDAY + 21 * DAY + 12 * HOUR  # the pool publishes 4 at noon, 0 otherwise
    pool_rate = predictor.fits["h.example"].table[0][12]
    assert predictor.rate("h.example/small", t) == pytest.approx(0.25 * pool_rate)
    assert predictor.rate("h.example", t) == pytest.approx(0.75 * pool_rate)
    assert predictor.seeds() == ["h.example", "h.example/big", "h.example/small"]


def test_validation_scores_and_report(predictor):
    fit = predictor.fits["h.example/big"]
    assert fit.articles == sum(expected_rate(MONDAY + i * HOUR) for i in range(21 * 24))
    assert fit.hours == 21 * 24 and not fit.pooled
    # No noise: both models explain the counts; the ceiling (variance >> mean) is near 1.
    for name in ("forest", "glm"):
        assert fit.scores[name].cv_r2 > 0.95
        assert fit.scores[name].tail_r2 > 0.95
    assert fit.r2_ceiling > 0.6
    rows = {r["key"]: r for r in predictor.report()}
    assert rows["h.example/big"]["articles"] == fit.articles
    assert rows["h.example/big"]["kind"] == "seed"
    assert rows["h.example"]["kind"] == "host pool" and rows["h.example"]["seeds"] == 2
    assert rows["h.example/big"]["best_by_tail_deviance"] in ("forest", "glm")
    assert rows["h.example/big"]["note"] == ""
    text = predictor.report_text()
    assert "h.example/big" in text and "CV R²" in text and "tail R²" in text


def test_save_and_load_give_the_same_rates_without_refitting(predictor, tmp_path):
    path = tmp_path / "recrawl.json"
    predictor.save(path)
    data = json.loads(path.read_text())
    assert data["format"] == FORMAT and data["meta"]["params"]["random_state"] == 0
    loaded = RecrawlPredictor.load(path)
    for seed in predictor.seeds():
        for h in range(0, 168, 5):
            t = MONDAY + h * HOUR
            assert loaded.rate(seed, t) == predictor.rate(seed, t)
    assert loaded.report() == predictor.report()
    assert loaded.meta == predictor.meta
    assert not list(tmp_path.glob("*.tmp"))


def test_refitting_with_the_same_random_state_gives_the_same_table(predictor):
    series = build_samples(events(), MONDAY + 21 * DAY, days=21, min_samples=100).series
    assert fit_table(series["h.example/big"], FAST) == predictor.fits["h.example/big"].table


def test_glm_model_and_parameter_checks():
    glm = fit_predictor(
        events(),
        MONDAY + 21 * DAY,
        days=21,
        min_samples=100,
        params=FitParams(model="glm", compare=False, folds=3),
    )
    assert list(glm.fits["h.example/big"].scores) == ["glm"]
    assert glm.rate("h.example/big", MONDAY + 9 * HOUR) == pytest.approx(10, rel=0.3)
    with pytest.raises(ValueError, match="model must be one of"):
        FitParams(model="boosting")
    with pytest.raises(ValueError, match="folds"):
        FitParams(folds=1)
    with pytest.raises(ValueError, match="tail"):
        fit_predictor(events(7), MONDAY + 7 * DAY, days=7, min_samples=1, params=FAST)


def test_the_report_says_when_a_key_cannot_reach_the_reference_r2():
    # One article every other hour: variance 0.25 below the mean 0.5, so the counts are
    # what Poisson noise alone would give: ceiling 0.
    sparse = [("s.example/a", MONDAY + 2 * i * HOUR) for i in range(21 * 12)]
    p = fit_predictor(sparse, MONDAY + 21 * DAY, days=21, min_samples=1, params=FAST)
    (row,) = p.report()
    assert row["r2_ceiling"] == 0.0
    assert row["note"] == "low volume: ceiling 0.00 < 0.6"


def test_a_key_with_no_articles_in_some_fold_still_fits():
    few = [("q.example/a", MONDAY + 20 * DAY + 5 * HOUR)]
    p = fit_predictor(few, MONDAY + 21 * DAY, days=21, min_samples=1, params=FAST)
    assert p.rate("q.example/a", MONDAY) >= 0


# -- files that are not predictors ------------------------------------------------------


@pytest.fixture
def saved(predictor, tmp_path) -> dict:
    return predictor.to_dict()


def write(tmp_path, data) -> str:
    path = tmp_path / "p.json"
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def test_load_refuses_what_is_not_json(tmp_path):
    with pytest.raises(ValueError, match="not JSON"):
        RecrawlPredictor.load(write(tmp_path, "{truncated"))
    path = tmp_path / "bin.json"
    path.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ValueError, match="not a saved recrawl predictor"):
        RecrawlPredictor.load(path)


def test_load_refuses_foreign_files(tmp_path, saved):
    with pytest.raises(ValueError, match="format marker"):
        RecrawlPredictor.load(write(tmp_path, [1, 2, 3]))
    with pytest.raises(ValueError, match=r"format marker 'something\.else'"):
        RecrawlPredictor.load(write(tmp_path, {**saved, "format": "something.else"}))
    with pytest.raises(ValueError, match="version 99"):
        RecrawlPredictor.load(write(tmp_path, {**saved, "version": 99}))


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: d["keys"]["h.example/big"]["table"].pop(), "7 weekdays x 24 hours"),
        (lambda d: d["keys"]["h.example/big"]["table"][0].append(1.0), "7 weekdays x 24 hours"),
        (lambda d: d["keys"]["h.example/big"]["table"][3].__setitem__(2, -1.0), "negative"),
        (lambda d: d["keys"]["h.example/big"]["table"][3].__setitem__(2, "x"), "corrupt"),
        (lambda d: d["keys"].pop("h.example"), "no table"),
        (lambda d: d["routes"].__setitem__("h.example/small", ["h.example", 2.0]), "share"),
        (lambda d: d["routes"].__setitem__("h.example/small", "h.example"), "corrupt"),
        (lambda d: d.pop("keys"), "corrupt"),
        (lambda d: d["keys"]["h.example/big"].pop("articles"), "corrupt"),
    ],
)
def test_load_refuses_corrupt_files(tmp_path, saved, damage, message):
    damage(saved)
    with pytest.raises(ValueError, match=message):
        RecrawlPredictor.load(write(tmp_path, saved))
