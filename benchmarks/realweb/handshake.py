"""The crawler's CPU per TLS handshake, measured directly, for the CPU-aware reference.

Fitting it from a crawl, as a third column beside pages and bytes, gave 7 to 94 ms on
this machine: bins in which many connections open (the start, hosts that allow one
request per connection) are also bins of other work, so the column took that work too. A
direct measurement does not mix them: one Scrapy crawl fetches the same page ``requests``
times, one at a time, from a host of this web that allows one request per connection,
once over HTTPS and once over plain HTTP, each in a fresh process against a fresh Apache
(:mod:`realweb.apache`); the CPU difference over the requests is one handshake (and
whatever else a new HTTPS connection costs Scrapy: its TLS context, the certificate).
Repeated in alternation; the median of the differences. The same code measured
3.7-5.4 ms per handshake when it was written.

``python -m realweb.handshake --requests 300 --repeats 2`` prints it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from realweb.servers import HostProfile


def measure(workdir: Path, *, requests: int = 300, repeats: int = 2) -> dict[str, float]:
    """Seconds of crawler CPU per TLS handshake (``per_handshake_s``), with the runs."""
    runs: dict[str, list[float]] = {"https": [], "http": []}
    for _ in range(repeats):
        for scheme in runs:
            runs[scheme].append(_one(workdir / scheme, scheme, requests))
    diffs = [(s - p) / requests for s, p in zip(runs["https"], runs["http"], strict=True)]
    return {
        "per_handshake_s": max(0.0, statistics.median(diffs)),
        "requests": requests,
        "https_cpu_s": runs["https"],
        "http_cpu_s": runs["http"],
    }


def _one(workdir: Path, scheme: str, requests: int) -> float:
    out = subprocess.run(
        [sys.executable, "-m", "realweb.handshake", "--child", scheme, "--requests",
         str(requests), "--workdir", str(workdir)],
        capture_output=True, text=True, check=True, cwd=Path(__file__).parent.parent,
    )  # fmt: skip
    return float(json.loads(out.stdout.strip().splitlines()[-1])["cpu_s"])


def _child(scheme: str, requests: int, workdir: Path) -> None:
    """One crawl of ``requests`` fetches of one page, one at a time, keep-alive 1."""
    import scrapy
    from scrapy.crawler import CrawlerProcess

    from realweb import apache, corpus

    site = corpus.load_sites(corpus.CORPUS2)[0]
    profile = HostProfile("127.0.1.1", 0.0, 1, None, tls=scheme == "https")
    with apache.Apache(workdir, [site], [profile]) as server:
        url = server.url(0, site.index)

        class Fetch(scrapy.Spider):
            name = "fetch"

            async def start(self):  # type: ignore[no-untyped-def]
                for _ in range(requests):
                    yield scrapy.Request(url, dont_filter=True)

            def parse(self, response):  # type: ignore[no-untyped-def]
                return None

        process = CrawlerProcess(
            {"LOG_LEVEL": "ERROR", "CONCURRENT_REQUESTS": 1, "TELNETCONSOLE_ENABLED": False}
        )
        process.crawl(Fetch)
        started = time.process_time()
        process.start()
        print(json.dumps({"cpu_s": time.process_time() - started}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/twolevel-handshake"))
    parser.add_argument("--child", choices=("https", "http"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.requests, args.workdir)
        return 0
    print(json.dumps(measure(args.workdir, requests=args.requests, repeats=args.repeats)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
