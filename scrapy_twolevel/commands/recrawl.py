"""``scrapy recrawl train|report SPIDER``: fit and inspect the seed recrawl model.

``train`` reads the spider's recrawl history (where its crawls put it: see
:func:`~.glue.seed_planner.recrawl_paths`), fits each seed key's hourly rate as of now
on the planner clock (``TWOLEVEL_RECRAWL_TRAIN_DAYS`` days, keys with fewer than
``TWOLEVEL_RECRAWL_MIN_SAMPLES`` dated articles pooled by host), saves the model where the
next crawl loads it, and prints the report. ``report`` prints the saved model's report:
per key the articles, cross-validated and tail R², the R² ceiling, and the tail Poisson
deviance of the forest and of the GLM baseline. With ``TWOLEVEL_REDIS_URL`` set, the
history and the model are the distributed crawl's, in Redis
(:mod:`~scrapy_twolevel.distributed.history`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import UsageError

from .._engine import get_spider_loader
from . import ReportCommand

if TYPE_CHECKING:
    import argparse

    from scrapy.settings import Settings

    from ..storage.model_store import ModelStore

ACTIONS = ("train", "report")


class Command(ReportCommand):
    requires_project = True
    usage = "train|report <spider>"
    description = "Train or report the seed recrawl model of a spider"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument(
            "--as-of",
            type=float,
            default=None,
            help="train as of this time (epoch seconds on the planner clock; default: now)",
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 2 or args[0] not in ACTIONS:
            raise UsageError()
        from ..errors import SettingsError

        action, spider_name = args
        assert self.settings is not None
        settings = self._spider_settings(spider_name)
        try:
            if action == "train":
                self.exitcode = train(settings, spider_name, opts.as_of)
            else:
                self.exitcode = report(settings, spider_name)
        except SettingsError as exc:  # a bad or unreachable TWOLEVEL_REDIS_URL, say
            print(exc)
            self.exitcode = 1

    def _spider_settings(self, spider_name: str) -> Settings:
        """The project's settings with the spider's ``custom_settings`` on top, as a crawl."""
        assert self.settings is not None
        settings = self.settings.copy()
        try:
            spidercls = get_spider_loader(settings).load(spider_name)
        except KeyError as exc:
            raise UsageError(f"Spider not found: {spider_name}") from exc
        spidercls.update_settings(settings)
        return settings


@contextmanager
def _stores(settings: Settings, spider_name: str) -> Iterator[tuple[Any, ModelStore, str] | None]:
    """``(history, model store, where the history is)`` of the spider's crawls: files
    (:func:`~.glue.seed_planner.recrawl_paths`), or Redis with ``TWOLEVEL_REDIS_URL``;
    ``None`` if there is no history file yet."""
    from ..config import ClusterConfig
    from ..distributed.connect import connect
    from ..glue.seed_planner import recrawl_paths
    from ..storage.model_store import FileModelStore
    from ..storage.recrawl_history import HistoryStore

    cluster = ClusterConfig.from_settings(settings)
    if cluster.redis_url is not None:
        from ..distributed.history import RedisHistoryStore, RedisModelStore

        crawl_id = cluster.crawl_id or spider_name
        redis = connect(cluster.redis_url)
        try:
            history = RedisHistoryStore(redis, crawl_id)
            yield history, RedisModelStore(redis, crawl_id), f"Redis, under {history.prefix}"
        finally:
            redis.close()
        return
    history_path, model_path = recrawl_paths(settings, spider_name)
    if not history_path.exists():
        yield None
        return
    file_history = HistoryStore(history_path)
    try:
        yield file_history, FileModelStore(model_path), str(history_path)
    finally:
        file_history.close()


def train(settings: Settings, spider_name: str, as_of: float | None = None) -> int:
    from ..config import RecrawlConfig
    from ..glue.seed_planner import make_clock, recrawl_paths
    from ..recrawl.model import fit_predictor

    config = RecrawlConfig.from_settings(settings)
    with _stores(settings, spider_name) as stores:
        if stores is None:
            history_path, _ = recrawl_paths(settings, spider_name)
            print(
                f"No recrawl history at {history_path}: crawl with TWOLEVEL_RECRAWL = True first."
            )
            return 1
        history, model_store, where = stores
        events = list(history.events())
        counts = history.counts()
        when = make_clock(config)() if as_of is None else as_of
        predictor = fit_predictor(
            events, when, days=config.train_days, min_samples=config.min_samples
        )
        if not predictor.fits:
            print(
                f"No dated articles in the last {config.train_days} days of {where} "
                f"({counts['articles']} articles, {counts['fetches']} seed fetches): no model."
            )
            return 1
        model_store.save(predictor)
    print(
        f"Trained on {where} ({counts['articles']} articles, {counts['fetches']} "
        f"seed fetches); model saved to {model_store.location}\n"
    )
    print(predictor.report_text())
    return 0


def report(settings: Settings, spider_name: str) -> int:
    from ..glue.seed_planner import recrawl_paths
    from ..storage.model_store import FileModelStore, load_stored_model

    with _stores(settings, spider_name) as stores:
        if stores is None:
            model_store: ModelStore = FileModelStore(recrawl_paths(settings, spider_name)[1])
        else:
            model_store = stores[1]
        predictor = load_stored_model(model_store)
    if predictor is None:
        print(
            f"No recrawl model at {model_store.location}: run `scrapy recrawl train {spider_name}`."
        )
        return 1
    print(f"Model {model_store.location}\n")
    print(predictor.report_text())
    return 0
