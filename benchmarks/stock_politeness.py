"""How many requests at once does Scrapy's stock downloader send to one host?

``CONCURRENT_REQUESTS_PER_DOMAIN`` promises at most N transfers per download slot. On the
asyncio reactor (Scrapy's default), Scrapy 2.19's ``Downloader._process_queue`` pops every
queued request of a slot before the first one is marked transferring, so a host can
receive more. This script counts it from the server's side: the local test web (5 hosts x
40 pages, 50 ms per response) crawled with the stock scheduler at
``CONCURRENT_REQUESTS = 16`` and ``CONCURRENT_REQUESTS_PER_DOMAIN`` = 1, 2 and 8, then with
``TwoLevelScheduler``, three runs each.

Usage::

    python benchmarks/stock_politeness.py      # about a minute

Writes ``benchmarks/results/stock_politeness.json`` and ``docs/results/stock_politeness.inc``.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import reporting
from harness import report
from harness.crawl import crawl_test_web
from scrapy_twolevel.testweb import HostProfile, generate_web
from scrapy_twolevel.testweb.spider import CrawlResult

RUNS = 3
PER_DOMAIN = (1, 2, 8)
TWOLEVEL = {"ADDONS": {"scrapy_twolevel.Addon": 0}}


def crawl(workdir: Path, web_file: Path, settings: dict[str, Any]) -> CrawlResult:
    out = workdir / "result.json"
    crawl_test_web(web_file, out, settings, timeout=300).check_returncode()
    return CrawlResult.from_dict(json.loads(out.read_text()))


def main() -> int:
    web = generate_web(
        5,
        40,
        seed=5,
        n_seeds=5,
        host_profiles=[HostProfile(connect_delay=0.005, response_delay=0.05)] * 5,
    )
    configs: list[tuple[str, dict[str, Any]]] = [
        (f"stock, PER_DOMAIN = {n}", {"CONCURRENT_REQUESTS_PER_DOMAIN": n}) for n in PER_DOMAIN
    ]
    configs.append(
        ("TwoLevelScheduler, PER_DOMAIN = 1", {**TWOLEVEL, "CONCURRENT_REQUESTS_PER_DOMAIN": 1})
    )
    results: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        web_file = Path(tmp) / "web.json"
        web_file.write_text(web.to_json())
        for label, settings in configs:
            results[label] = []
            for _ in range(RUNS):
                result = crawl(Path(tmp), web_file, {"CONCURRENT_REQUESTS": 16, **settings})
                server = result.server
                results[label].append(
                    {
                        "max_concurrent_per_host": list(
                            server.max_concurrent_requests_per_host().values()
                        ),
                        "connections_per_host": list(server.connections_per_host().values()),
                        "overlapping_requests": server.overlapping_requests(),
                        "pages": len(server.fetch_counts()),
                    }
                )
            print(label, results[label], flush=True)
    rows = [
        [
            label,
            "; ".join(", ".join(map(str, r["max_concurrent_per_host"])) for r in runs),
            "; ".join(
                f"{min(r['connections_per_host'])}-{max(r['connections_per_host'])}" for r in runs
            ),
            "; ".join(str(r["overlapping_requests"]) for r in runs),
        ]
        for label, runs in results.items()
    ]
    table: reporting.Table = (
        [
            "scheduler, CONCURRENT_REQUESTS_PER_DOMAIN",
            "most concurrent requests per host (hosts 0-4), per run",
            "connections per host (min-max), per run",
            "requests overlapping another to the same host, per run",
        ],
        rows,
    )
    import scrapy

    command = report.command_line(__file__, [])
    env = reporting.environment()
    intro = (
        f"Command: ``{command}``; {env['date']}, Scrapy {scrapy.__version__} on its default "
        f"asyncio reactor; {len(web.hosts)} hosts x 40 pages, 50 ms per response, "
        f"CONCURRENT_REQUESTS = 16, {RUNS} runs each."
    )
    print(reporting.markdown(table))
    (reporting.RESULTS_DIR / "stock_politeness.json").write_text(
        json.dumps({"command": command, "environment": env, "results": results}, indent=1) + "\n",
        encoding="utf-8",
    )
    reporting.write_docs_fragment("stock_politeness", [intro, "", reporting.rst(table)])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
