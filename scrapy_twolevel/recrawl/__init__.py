"""Recrawl-interval prediction for news seed pages: when to refetch each one.

:mod:`.publish_time` reads an article's publish time from its page, :mod:`.samples` turns
discovered articles into per-seed hourly counts (with the midpoint rule for articles
without a date), :mod:`.model` fits and persists each seed's rate by hour of day and
weekday, and :mod:`.planner` turns the predicted rates into next-fetch times within a
fetch budget. No Scrapy here: any program can drive it with its own event stream and
clock (see ``docs/recrawl.rst``).
"""

from .model import FitParams, RecrawlPredictor, fit_predictor, fit_samples
from .planner import RatePredictor, RecrawlPlanner
from .samples import Samples, build_samples, known_or_midpoint, midpoint_time, seed_key

__all__ = [
    "FitParams",
    "RatePredictor",
    "RecrawlPlanner",
    "RecrawlPredictor",
    "Samples",
    "build_samples",
    "fit_predictor",
    "fit_samples",
    "known_or_midpoint",
    "midpoint_time",
    "seed_key",
]
