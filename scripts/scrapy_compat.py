"""Scrapy's own crawl-level tests as a compatibility suite for scrapy_twolevel.

Downloads the sdist of the installed Scrapy with pip (cached under ``.cache/``), installs
what its tests need, and runs the crawl-level test files (:data:`FILES`) twice: stock, and
with the two-level scheduler, the seen-cache dupefilter, the host metrics middleware and the
duplicate-links middleware as Scrapy's defaults (``scrapy_compat_plugin``). Every test
whose outcome differs must be in :data:`DELIBERATE` (the docs list them, with why). Exit
status 0 when that holds. The time of both runs is reported; ``--max-ratio R`` also fails
a run with our components that took more than R times the stock one (not in the test
command: speed is judged from the committed run, not by a timed test on a noisy machine).

The stock outcomes depend only on Scrapy's version, the test files and what their tests
need, so they are committed, one small JSON per Scrapy version (``scripts/compat/
stock-<version>.json``): the stock run is made only when that file is missing or was made
for other files or requirements (or with ``--refresh-stock``, ``--docs`` or ``--max-ratio``,
which time both runs side by side); the run with our components is made every time.

Usage (from the checkout, with its venv)::

    python scripts/scrapy_compat.py                 # ours; stock from its file, ~1 min
    python scripts/scrapy_compat.py --refresh-stock # both runs, the stock file rewritten
    python scripts/scrapy_compat.py --docs          # also rewrite docs/results/scrapy_compat.inc
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import scrapy

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "scrapy-compat"
#: The committed stock outcomes, one file per Scrapy version.
STOCK_DIR = ROOT / "scripts" / "compat"
#: The crawl-level tests: the engine, the crawl, closing, the scheduler interface, the
#: spider-middleware and pipeline crawls, request callbacks and the downloader core; then
#: the downloader middlewares and media pipelines a real project has.
FILES = (
    "test_crawl.py",
    "test_engine.py",
    "test_engine_loop.py",
    "test_engine_stop_download_bytes.py",
    "test_engine_stop_download_headers.py",
    "test_closespider.py",
    "test_scheduler_base.py",
    "test_pipeline_crawl.py",
    "test_pipelines.py",
    "test_request_attribute_binding.py",
    "test_request_cb_kwargs.py",
    "test_request_left.py",
    "test_signals.py",
    "test_spidermiddleware_output_chain.py",
    "test_spidermiddleware_httperror.py",
    "test_core_downloader.py",
    "test_core_scraper.py",
    "test_downloaderslotssettings.py",
    "test_logformatter.py",
    # The seams real projects meet (issue 32): robots.txt, the media pipelines (their
    # downloads bypass the scheduler), the HTTP cache, proxies, and the downloader
    # middlewares around ours.
    "test_downloadermiddleware.py",
    "test_downloadermiddleware_robotstxt.py",
    "test_robotstxt_interface.py",
    "test_downloadermiddleware_httpcache.py",
    "test_downloadermiddleware_httpproxy.py",
    "test_downloadermiddleware_retry.py",
    "test_downloadermiddleware_redirect.py",
    "test_downloadermiddleware_downloadtimeout.py",
    "test_downloadermiddleware_stats.py",
    "test_pipeline_media.py",
    "test_pipeline_files.py",
    "test_pipeline_images.py",
)
#: What the tests need beyond Scrapy and pytest (Scrapy's tox.ini, test-requirements).
TEST_REQUIREMENTS = (
    "pytest-twisted>=1.14.3",
    "pyftpdlib>=2.0.1",
    "pexpect>=4.8.0",
    "sybil",
    # the media pipelines' tests build S3 stores
    "botocore",
)
#: Tests whose outcome differs on purpose, and why (docs/compat.rst says the same).
_ORDER = (
    "asserts Scrapy's order of equal-priority requests under its LIFO queues "
    "(SCHEDULER_START_MEMORY_QUEUE, shared start and other queues); the two-level "
    "scheduler does not use Scrapy's queue settings: it serves hosts in sessions, and a "
    "host's equal-quality requests first come, first served"
)
_ONE_AT_A_TIME = (
    "may fail under load: its check that its own parameters mean something (without a "
    "download delay, responses 0.25 s apart at most, from a server that takes up to 0.4 s) "
    "assumes requests to one host overlap, as Scrapy's up to 8 per domain do; the two-level "
    "scheduler sends one at a time per host, so the average sits at the bound"
)
DELIBERATE: dict[str, str] = {
    "tests.test_engine_loop.TestRequestSendOrder::test_lifo_start": _ORDER,
    "tests.test_engine_loop.TestRequestSendOrder::test_shared_queues": _ORDER,
    "tests.test_crawl.TestCrawl::test_fixed_delay": _ONE_AT_A_TIME,
    "tests.test_crawl.TestCrawl::test_randomized_delay": _ONE_AT_A_TIME,
}


def sdist_tests() -> Path:
    """The sdist's folder (downloaded and unpacked once)."""
    version = scrapy.__version__
    folder = CACHE / f"scrapy-{version}"
    if (folder / "tests").is_dir():
        return folder
    CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--no-binary",
            ":all:",
            f"scrapy=={version}",
            "-d",
            str(CACHE),
        ],
        check=True,
    )
    with tarfile.open(CACHE / f"scrapy-{version}.tar.gz") as tar:
        tar.extractall(CACHE, filter="data")
    return folder


def install_requirements() -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            *list(TEST_REQUIREMENTS),
        ],
        check=True,
    )


def run(folder: Path, ours: bool, junit: Path) -> float:
    """One pytest run of :data:`FILES`; its wall time."""
    env = dict(os.environ)
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml", junit]
    if ours:
        paths = [str(ROOT / "scripts"), env.get("PYTHONPATH")]
        env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
        args += ["-p", "scrapy_compat_plugin"]
    args += [f"tests/{name}" for name in FILES]
    started = time.monotonic()
    subprocess.run(args, cwd=folder, env=env, stdout=subprocess.DEVNULL, check=False)
    return time.monotonic() - started


def stock_file() -> Path:
    return STOCK_DIR / f"stock-{scrapy.__version__}.json"


def load_stock() -> tuple[dict[str, str], float] | None:
    """The committed stock outcomes and the stock run's time, if they were made for this
    Scrapy version, these files and these requirements; else None."""
    path = stock_file()
    if not path.exists():
        return None
    saved = json.loads(path.read_text())
    if (saved["scrapy"], saved["files"], saved["requirements"]) != (
        scrapy.__version__,
        list(FILES),
        list(TEST_REQUIREMENTS),
    ):
        return None
    return saved["outcomes"], saved["seconds"]


def save_stock(stock: dict[str, str], seconds: float) -> None:
    STOCK_DIR.mkdir(parents=True, exist_ok=True)
    saved = {
        "scrapy": scrapy.__version__,
        "files": list(FILES),
        "requirements": list(TEST_REQUIREMENTS),
        "python": ".".join(map(str, sys.version_info[:2])),
        "seconds": round(seconds, 1),
        "outcomes": dict(sorted(stock.items())),
    }
    stock_file().write_text(json.dumps(saved, indent=1) + "\n")


def outcomes(junit: Path) -> dict[str, str]:
    """``module.Class::test`` -> passed, failure, error or skipped."""
    found = {}
    for case in ET.parse(junit).iter("testcase"):
        kind = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                kind = child.tag
        found[f"{case.get('classname')}::{case.get('name')}"] = kind
    return found


def report(
    stock: dict[str, str],
    ours: dict[str, str],
    times: tuple[float, float],
    stock_saved: bool = False,
) -> list[str]:
    """The run as reST lines (docs/results/scrapy_compat.inc) and the verdict's inputs;
    ``stock_saved``: the stock time is the committed run's, not this run's."""
    count = {k: sum(v == k for v in ours.values()) for k in ("passed", "failure", "error")}
    when = " (committed run)" if stock_saved else ""
    lines = [
        f"Scrapy {scrapy.__version__}'s tests, {len(FILES)} files, {len(stock)} tests: stock "
        f"{times[0]:.0f} s{when}; with scrapy_twolevel's components as the defaults "
        f"{times[1]:.0f} s ({times[1] / times[0]:.2f}x); {count['passed']} passed, "
        f"{count['failure']} failed, {count['error']} errors. Regenerate with "
        "``python scripts/scrapy_compat.py --docs --max-ratio 1.5``.",
        "",
    ]
    differ = sorted(name for name in stock if stock[name] != ours.get(name))
    if differ:
        lines += [".. list-table::", "   :header-rows: 1", ""]
        lines += ["   * - test", "     - stock", "     - ours", "     - why"]
        for name in differ:
            why = DELIBERATE.get(name, "NOT EXPLAINED")
            lines += [f"   * - ``{name}``", f"     - {stock[name]}", f"     - {ours.get(name)}"]
            lines += [f"     - {why}"]
    else:
        lines.append("No test's outcome differs.")
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-ratio", type=float, default=None)
    parser.add_argument("--docs", action="store_true", help="write docs/results/scrapy_compat.inc")
    parser.add_argument(
        "--refresh-stock",
        action="store_true",
        help="run stock Scrapy's tests even if scripts/compat holds their outcomes",
    )
    args = parser.parse_args(argv)
    folder = sdist_tests()
    install_requirements()
    junits = (CACHE / "stock.xml", CACHE / "ours.xml")
    fresh = args.refresh_stock or args.docs or args.max_ratio is not None
    saved = None if fresh else load_stock()
    if saved is None:
        stock_time = run(folder, False, junits[0])
        stock = outcomes(junits[0])
        save_stock(stock, stock_time)
        print(f"Stock outcomes written to {stock_file().relative_to(ROOT)}")
    else:
        stock, stock_time = saved
        print(f"Stock outcomes read from {stock_file().relative_to(ROOT)}")
    times = (stock_time, run(folder, True, junits[1]))
    ours = outcomes(junits[1])
    lines = report(stock, ours, times, stock_saved=saved is not None)
    print("\n".join(lines))
    if args.docs:
        (ROOT / "docs" / "results" / "scrapy_compat.inc").write_text("\n".join(lines))
    differ = [name for name in stock if stock[name] != ours.get(name)]
    unexplained = [name for name in differ if name not in DELIBERATE]
    missing = [name for name in stock if name not in ours]
    ratio = times[1] / times[0]
    for name in unexplained:
        print(f"NOT EXPLAINED: {name}: stock {stock[name]}, ours {ours.get(name)}")
    if unexplained and saved is not None:
        where = stock_file().relative_to(ROOT)
        print(f"(stock outcomes read from {where}; --refresh-stock runs stock Scrapy again)")
    too_slow = args.max_ratio is not None and ratio > args.max_ratio
    if too_slow:
        print(f"TOO SLOW: {ratio:.2f}x the stock run (at most {args.max_ratio}x)")
    return 1 if unexplained or missing or too_slow else 0


if __name__ == "__main__":
    raise SystemExit(main())
