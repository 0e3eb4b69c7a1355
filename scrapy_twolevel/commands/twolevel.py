"""``scrapy twolevel status|reset [SPIDER]``: look at (or clear) a distributed crawl in Redis,
or (``status`` with ``-s JOBDIR=...`` and no ``TWOLEVEL_REDIS_URL``) at a crawl's
``JOBDIR``, running or dead: pending requests, the hosts with the most, their best queued
quality and saved estimates (:mod:`scrapy_twolevel.storage.jobdir_status`).

``status`` prints the nodes of the crawl (alive or not, buckets owned and held, pending
requests, inbox length) and the requests pending in buckets nobody holds (a dead node's,
waiting to be reaped). ``reset`` deletes the crawl's keys, so the next crawl of that id
starts from scratch; it keeps the crawl's recrawl history and model (the training data)
unless given ``--history``, and refuses while a node is alive. The crawl is ``TWOLEVEL_CRAWL_ID``,
else the spider's name (pass SPIDER, or ``--crawl-id``); Redis is ``TWOLEVEL_REDIS_URL``.
Read-only apart from ``reset``; nothing read from Redis is unpickled.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import UsageError

from . import ReportCommand

if TYPE_CHECKING:
    import argparse

ACTIONS = ("status", "reset")


class Command(ReportCommand):
    requires_project = False
    usage = "status|reset [<spider>] [--crawl-id ID] [-s JOBDIR=DIR]"
    description = "Show or reset a distributed crawl in Redis, or show a crawl's JOBDIR"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--crawl-id", default=None, help="the crawl (default: see above)")
        parser.add_argument("--json", action="store_true", help="print JSON")
        parser.add_argument(
            "--history",
            action="store_true",
            help="reset: also delete the recrawl history and model (kept by default)",
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        from ..config import ClusterConfig, node_name
        from ..distributed.connect import connect
        from ..errors import SettingsError

        if not args or args[0] not in ACTIONS or len(args) > 2:
            raise UsageError()
        assert self.settings is not None
        if (
            args[0] == "status"
            and self.settings.get("JOBDIR")
            and not self.settings.get("TWOLEVEL_REDIS_URL")
        ):
            self.exitcode = jobdir(self.settings["JOBDIR"], as_json=opts.json)
            return
        try:
            config = ClusterConfig.from_settings(self.settings)
        except SettingsError as exc:
            raise UsageError(str(exc)) from exc
        crawl_id = opts.crawl_id or config.crawl_id or (args[1] if len(args) == 2 else None)
        if crawl_id is None:
            raise UsageError("Name the crawl: a spider name, --crawl-id or TWOLEVEL_CRAWL_ID")
        try:
            node_name("the crawl id", crawl_id)
        except SettingsError as exc:
            raise UsageError(str(exc)) from exc
        if config.redis_url is None:
            raise UsageError(
                "TWOLEVEL_REDIS_URL is not set (e.g. -s TWOLEVEL_REDIS_URL=redis://...)"
            )
        try:
            redis = connect(config.redis_url)
        except SettingsError as exc:
            print(exc)
            self.exitcode = 1
            return
        if args[0] == "reset":
            self.exitcode = reset(redis, crawl_id, history=opts.history)
            return
        from ..distributed.node import status

        report = status(redis, crawl_id)
        print(json.dumps(report, indent=2) if opts.json else render(report))


def jobdir(path: str, *, as_json: bool) -> int:
    """Print a JOBDIR's status; 1 if it holds no readable twolevel frontier."""
    from ..errors import StateError
    from ..storage.jobdir_status import jobdir_status, render_jobdir_status

    try:
        report = jobdir_status(path)
    except StateError as exc:
        print(exc)
        return 1
    print(json.dumps(report, indent=2) if as_json else render_jobdir_status(report))
    return 0


def render(report: dict[str, Any]) -> str:
    """The status as a table."""
    buckets = f"{report['buckets']} buckets" if report["buckets"] else "no bucket table"
    lines = [
        f"crawl {report['crawl_id']}: epoch {report['epoch']}, {buckets}, "
        f"{report['pending']} requests pending ({report['pending_unheld']} in unheld buckets), "
        f"{report['seen_keys']} URLs seen"
        + (f", {report['seed_plans']} seeds planned" if report["seed_plans"] else "")
    ]
    if not report["nodes"]:
        lines.append("no nodes")
        return "\n".join(lines)
    lines.append(f"{'node':<30} {'alive':>5} {'owned':>6} {'held':>6} {'pending':>8} {'inbox':>6}")
    for node, row in report["nodes"].items():
        lines.append(
            f"{node:<30} {'yes' if row['alive'] else 'NO':>5} {row['buckets_owned']:>6} "
            f"{row['buckets_held']:>6} {row['pending']:>8} {row['inbox']:>6}"
        )
    return "\n".join(lines)


def reset(redis: Any, crawl_id: str, *, history: bool = False) -> int:
    """Delete the crawl's keys; the recrawl history and model too with ``history``."""
    from ..distributed.history import clear_history
    from ..distributed.keys import crawl_prefix, history_prefix
    from ..distributed.node import clear_crawl

    alive = [k.decode() for k in redis.scan_iter(f"{crawl_prefix(crawl_id)}alive:*")]
    if alive:
        print(f"crawl {crawl_id} has live nodes ({len(alive)}); stop them first")
        return 1
    print(f"deleted {clear_crawl(redis, crawl_id)} keys of crawl {crawl_id}")
    if history:
        print(f"deleted {clear_history(redis, crawl_id)} keys of its recrawl history")
    elif next(iter(redis.scan_iter(f"{history_prefix(crawl_id)}*", count=100)), None):
        print(
            f"kept its recrawl history and model ({history_prefix(crawl_id)}*; "
            "--history deletes them too)"
        )
    return 0
