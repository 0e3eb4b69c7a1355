"""Command line for the test web.

``serve`` runs a server until SIGINT/SIGTERM and announces itself (port, seeds, control URL)
on stdout and, atomically, in ``--ready-file``, so a test or benchmark in another process can
wait for the file instead of sleeping. ``crawl`` serves a web and crawls it with
:class:`~scrapy_twolevel.testing.spider.TestWebSpider` in this one process and reactor, then
writes the :class:`~scrapy_twolevel.testing.spider.CrawlResult` as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from .web import WebSpec, generate_web


def _write_atomically(path: str, text: str) -> None:
    """Readers polling for ``path`` never see a half-written file."""
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, target)


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

    def shutdown(signum: int, frame: object) -> None:
        reactor.callFromThread(reactor.stop)

    # Our own handlers: Twisted leaves SIGINT alone when it starts ignored, as it does for
    # background jobs of a non-interactive shell, and we must stop on it there too. They
    # are installed before announcing readiness, so a signal sent right after is handled.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, shutdown)
    ready = json.dumps({"port": port, "seeds": server.seeds_urls, "control": server.control_url})
    if args.ready_file:
        _write_atomically(args.ready_file, ready)
    print(ready, flush=True)
    reactor.run(installSignalHandlers=False)
    return 0


def _crawl(args: argparse.Namespace) -> int:
    from .spider import run_crawl

    result = run_crawl(
        _web_from_args(args),
        dict(args.set),
        delay_scale=args.delay_scale,
        port=args.port,
        interrupt_after=args.interrupt_after,
        extra_seeds=args.extra_seed,
    )
    if args.output:
        _write_atomically(args.output, json.dumps(result.to_dict()))
    per_host = result.server.max_concurrent_requests_per_host()
    print(
        json.dumps(
            {
                "pages_fetched": len(result.server.fetch_counts()),
                "responses": result.server.total.responses_total,
                "connections": result.server.total.connections_total,
                "max_concurrent_requests_per_host": max(per_host.values(), default=0),
                "items": len(result.items),
            }
        ),
        flush=True,
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The CLI's parser (public so docs and tests can inspect it)."""
    parser = argparse.ArgumentParser(prog="python -m scrapy_twolevel.testing")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, helptext in (
        ("serve", "serve a test web until SIGINT/SIGTERM"),
        ("crawl", "serve a test web and crawl it once in this process"),
    ):
        cmd = commands.add_parser(name, help=helptext)
        cmd.add_argument("--hosts", type=int, default=20)
        cmd.add_argument("--pages-per-host", type=int, default=30)
        cmd.add_argument("--seed", type=int, default=0)
        cmd.add_argument("--web", metavar="PATH", help="WebSpec JSON (overrides --hosts etc.)")
        cmd.add_argument("--delay-scale", type=float, default=1.0)
    serve = commands.choices["serve"]
    serve.add_argument("--port", type=int, default=0)
    serve.add_argument("--ready-file", metavar="PATH")
    serve.set_defaults(func=_serve)
    crawl = commands.choices["crawl"]
    crawl.add_argument(
        "--set",
        metavar="NAME=VALUE",
        type=_parse_setting,
        action="append",
        default=[],
        help="Scrapy setting; VALUE is parsed as JSON when it can be",
    )
    crawl.add_argument("--output", metavar="PATH", help="write the CrawlResult JSON here")
    crawl.add_argument(
        "--extra-seed", metavar="URL", action="append", default=[], help="another start URL"
    )
    crawl.add_argument("--port", type=int, default=0, help="serve on this port (0: any free)")
    crawl.add_argument(
        "--interrupt-after",
        type=int,
        metavar="N",
        help="send this process SIGINT (Ctrl-C) after N responses: a graceful stop",
    )
    crawl.set_defaults(func=_crawl)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
