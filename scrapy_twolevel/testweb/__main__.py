"""Command line for the test web.

``serve`` runs a server until SIGINT/SIGTERM and announces itself (port, seeds, control URL)
on stdout and, atomically, in ``--ready-file``, so a test or benchmark in another process can
wait for the file instead of sleeping; ``news`` does the same for the recrawl news site.
``crawl`` serves a web and crawls it with
:class:`~scrapy_twolevel.testweb.spider.TestWebSpider` in this one process and reactor, then
writes the :class:`~scrapy_twolevel.testweb.spider.CrawlResult` as JSON and prints a one-line
JSON summary of what the server saw. Every option has a help text (``--help``); the
reference is ``docs/testweb.rst``.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .process import write_atomically
from .web import WebSpec, generate_web


def _web_from_args(args: argparse.Namespace) -> WebSpec:
    if args.web:
        return WebSpec.from_json(Path(args.web).read_text())
    return generate_web(args.hosts, args.pages_per_host, seed=args.seed)


def _parse_setting(text: str) -> tuple[str, Any]:
    name, sep, raw = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        value = json.loads(raw)  # numbers, booleans, lists, dicts
    except ValueError:
        value = raw
    return name, value


def _serve(args: argparse.Namespace) -> int:
    from twisted.internet import reactor

    from .server import TestWebServer

    server = TestWebServer(_web_from_args(args), delay_scale=args.delay_scale, reactor=reactor)
    port = server.start(args.port)
    reactor.addSystemEventTrigger("before", "shutdown", server.stop)
    ready = {"port": port, "seeds": server.seeds_urls, "control": server.control_url}
    return _run_until_signalled(ready, args.ready_file)


def _run_until_signalled(ready: dict[str, Any], ready_file: str | None) -> int:
    """Announce ``ready`` (stdout, and ``ready_file`` atomically), then run the reactor
    until SIGINT or SIGTERM."""
    from twisted.internet import reactor

    def shutdown(signum: int, frame: object) -> None:
        # Stub gap: every reactor provides IReactorFromThreads; Twisted's type of the
        # global reactor leaves it out.
        reactor.callFromThread(reactor.stop)  # type: ignore[attr-defined]

    # Our own handlers: Twisted leaves SIGINT alone when it starts ignored, as it does for
    # background jobs of a non-interactive shell, and we must stop on it there too. They
    # are installed before announcing readiness, so a signal sent right after is handled.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, shutdown)
    line = json.dumps(ready)
    if ready_file:
        write_atomically(ready_file, line)
    print(line, flush=True)
    # Stub gap: the reactors' run() takes installSignalHandlers; IReactorCore.run() does not.
    reactor.run(installSignalHandlers=False)  # type: ignore[call-arg]
    return 0


def _serve_news(args: argparse.Namespace) -> int:
    from ..recrawl.clock import ScaledClock
    from .news import NewsSite, listen_news_site, parse_sections

    try:
        sections = parse_sections(args.sections)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    site = NewsSite(sections, ScaledClock(args.time_scale, args.time_origin), args.seed)
    port = listen_news_site(site, args.port).getHost().port
    base = f"http://127.0.0.1:{port}"
    seeds = [f"{base}/{name}/" for name in site.sections]
    return _run_until_signalled({"port": port, "url": base, "seeds": seeds}, args.ready_file)


def _crawl(args: argparse.Namespace) -> int:
    from scrapy.utils.misc import load_object

    from .spider import run_crawl

    result = run_crawl(
        _web_from_args(args),
        dict(args.set),
        spider_cls=load_object(args.spider),
        delay_scale=args.delay_scale,
        port=args.port,
        interrupt_after=args.interrupt_after,
        extra_seeds=args.extra_seed,
    )
    if args.output:
        write_atomically(args.output, json.dumps(result.to_dict()))
    per_host = result.server.max_concurrent_requests_per_host()
    fetches = result.server.fetch_counts()
    print(
        json.dumps(
            {
                "pages_fetched": len(fetches),
                "refetches": sum(fetches.values()) - len(fetches),
                "failed_requests": result.crawl_stats.get("downloader/exception_count", 0),
                "responses": result.server.total.responses_total,
                "connections": result.server.total.connections_total,
                "max_concurrent_requests_per_host": max(per_host.values(), default=0),
                "items": len(result.items),
            }
        ),
        flush=True,
    )
    return 0


def _number(
    kind: Callable[[str], Any], rule: str, ok: Callable[[Any], bool]
) -> Callable[[str], Any]:
    """An argparse type that rejects out-of-range values with the rule, not a traceback."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {rule}, got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"expected {rule}, got {text!r}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


_POSITIVE = _number(int, "an integer >= 1", lambda v: v >= 1)
_PORT = _number(int, "a port in 0..65535", lambda v: 0 <= v <= 65535)
_SCALE = _number(float, "a number >= 0", lambda v: v >= 0)


def build_parser() -> argparse.ArgumentParser:
    """The CLI's parser (public so docs and tests can inspect it)."""
    parser = argparse.ArgumentParser(
        prog="python -m scrapy_twolevel.testweb",
        description="Serve the local multi-host test web, or serve it and crawl it once.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, helptext in (
        ("serve", "serve a test web until SIGINT/SIGTERM"),
        ("crawl", "serve a test web and crawl it once in this process"),
    ):
        cmd = commands.add_parser(
            name,
            help=helptext,
            description=helptext[0].upper() + helptext[1:] + ".",
        )
        web = cmd.add_argument_group("the web to serve")
        web.add_argument(
            "--hosts",
            type=_POSITIVE,
            default=20,
            metavar="N",
            help="number of hosts (default: %(default)s)",
        )
        web.add_argument(
            "--pages-per-host",
            type=_POSITIVE,
            default=30,
            metavar="N",
            help="pages on each host (default: %(default)s)",
        )
        web.add_argument(
            "--seed",
            type=int,
            default=0,
            help="seed of the generated web: the same seed, the same web (default: %(default)s)",
        )
        web.add_argument(
            "--web",
            metavar="PATH",
            help="serve this WebSpec JSON (as /_web returns) instead of generating one; "
            "overrides --hosts, --pages-per-host and --seed",
        )
        web.add_argument(
            "--delay-scale",
            type=_SCALE,
            default=1.0,
            metavar="X",
            help="multiply every host's connection and response delays by X; 0: no delays "
            "(default: %(default)s)",
        )
    serve = commands.choices["serve"]
    serve.add_argument(
        "--port",
        type=_PORT,
        default=0,
        help="port for every host address and the control address; 0 (the default): any free port",
    )
    serve.add_argument(
        "--ready-file",
        metavar="PATH",
        help="also write the ready JSON line ({port, seeds, control}) to PATH, atomically, "
        "once the server listens",
    )
    serve.set_defaults(func=_serve)
    crawl = commands.choices["crawl"]
    crawl.add_argument(
        "--set",
        metavar="NAME=VALUE",
        type=_parse_setting,
        action="append",
        default=[],
        help="a Scrapy setting, repeatable; VALUE is parsed as JSON when it can be",
    )
    crawl.add_argument(
        "--output", metavar="PATH", help="write the CrawlResult as JSON to PATH, atomically"
    )
    crawl.add_argument(
        "--spider",
        metavar="PATH",
        default="scrapy_twolevel.testweb.spider.TestWebSpider",
        help="import path of the spider class (default: the test web's own spider)",
    )
    crawl.add_argument(
        "--extra-seed",
        metavar="URL",
        action="append",
        default=[],
        help="another start URL, crawled after the web's seeds; repeatable",
    )
    crawl.add_argument(
        "--port",
        type=_PORT,
        default=0,
        help="serve on this port; 0 (the default): any free port. Fix it to resume a JOBDIR crawl",
    )
    crawl.add_argument(
        "--interrupt-after",
        type=_POSITIVE,
        metavar="N",
        help="send this process SIGINT (Ctrl-C) after N responses: Scrapy's graceful stop, "
        "as a user's Ctrl-C (default: crawl to the end)",
    )
    crawl.set_defaults(func=_crawl)
    news = commands.add_parser(
        "news",
        help="serve the recrawl news site until SIGINT/SIGTERM",
        description="Serve the recrawl news site (scrapy_twolevel.testweb.news) on its "
        "sped-up clock until SIGINT/SIGTERM, for crawls in other processes "
        "(TWOLEVEL_TESTWEB_NEWS_URL).",
    )
    news.add_argument(
        "--sections",
        default="day:120,night:120",
        help="profile:articles-per-day, comma-separated (default: %(default)s)",
    )
    news.add_argument("--seed", type=int, default=0, help="the site's seed (default: 0)")
    news.add_argument(
        "--time-scale",
        type=_number(float, "a number > 0", lambda v: v > 0),
        default=3600.0,
        help="site seconds per real second, as TWOLEVEL_RECRAWL_TIME_SCALE (default: %(default)s)",
    )
    news.add_argument(
        "--time-origin",
        type=float,
        default=1_790_000_000.0,
        help="epoch seconds, as TWOLEVEL_RECRAWL_TIME_ORIGIN (default: %(default)s, the "
        "example project's)",
    )
    news.add_argument("--port", type=_PORT, default=0, help="0 (the default): any free port")
    news.add_argument(
        "--ready-file",
        metavar="PATH",
        help="also write the ready JSON line ({port, url, seeds}) to PATH, atomically",
    )
    news.set_defaults(func=_serve_news)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = build_parser().parse_args(argv)
    status: int = args.func(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
