"""The release as a user meets it: the sdist and the wheel built and checked as for PyPI, the
wheel installed into a fresh venv and used from a project made by ``scrapy startproject``
with the one-line add-on, and a JOBDIR written by the previous release resumed by this one
(docs/compat.rst: what a release keeps).
"""

from __future__ import annotations

import email
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import scrapy_twolevel
from scrapy_twolevel.testweb.process import ServerProcess
from scrapy_twolevel.testweb.web import HostProfile, generate_web

pytestmark = pytest.mark.crawl

ROOT = Path(__file__).parents[1]
#: What the sdist is built from: the files setuptools ships, copied out of the checkout so
#: the build writes nothing into it (egg-info, build/).
SOURCES = ("pyproject.toml", "setup.cfg", "README.md", "LICENSE", "scrapy_twolevel")
FIXTURES = Path(__file__).parent / "fixtures"


def run(args: list[str | Path], **kwargs: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=600, **kwargs
    )  # type: ignore[call-overload]
    assert proc.returncode == 0, f"{args}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


def build_release(tmp_path: Path) -> tuple[Path, Path]:
    """``python -m build`` (sdist, then the wheel from the sdist, as for an upload)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
            shutil.copytree(ROOT / name, src / name, ignore=ignore)
        else:
            shutil.copy2(ROOT / name, src / name)
    out = tmp_path / "dist"
    run([sys.executable, "-m", "build", "--outdir", out, src])
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return sdist, wheel


def check_the_release(sdist: Path, wheel: Path) -> None:
    """``twine check --strict`` and the metadata a user (and PyPI) reads."""
    version = scrapy_twolevel.__version__
    assert sdist.name == f"scrapy_twolevel-{version}.tar.gz"
    assert wheel.name == f"scrapy_twolevel-{version}-py3-none-any.whl"
    checked = run([sys.executable, "-m", "twine", "check", "--strict", sdist, wheel])
    assert checked.stdout.count("PASSED") == 2, checked.stdout

    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        info = f"scrapy_twolevel-{version}.dist-info"
        meta = email.message_from_bytes(zf.read(f"{info}/METADATA"))
        entry_points = zf.read(f"{info}/entry_points.txt").decode()
    # Package data: the dashboard (no CDN) and the typing marker.
    assert {"scrapy_twolevel/live/dashboard.html", "scrapy_twolevel/py.typed"} <= names
    assert not any(n.startswith(("tests/", "benchmarks/", "example_project/")) for n in names)
    assert "twolevel = scrapy_twolevel.commands.twolevel:Command" in entry_points
    assert "recrawl = scrapy_twolevel.commands.recrawl:Command" in entry_points
    assert meta["Version"] == version
    assert meta["Requires-Python"] == ">=3.11"
    assert meta["License"] == "BSD-3-Clause"
    classifiers = meta.get_all("Classifier")
    for wanted in (
        "Framework :: Scrapy",
        "Programming Language :: Python :: 3.11",
        "Development Status :: 3 - Alpha",
        "Typing :: Typed",
        "License :: OSI Approved :: BSD License",
    ):
        assert wanted in classifiers
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert {"Documentation", "Source", "Changelog"} <= set(urls)
    assert "scrapy" in meta["Keywords"]
    requires = meta.get_all("Requires-Dist")
    assert any(
        re.fullmatch(r"scrapy<2\.20,>=2\.13\.4|scrapy>=2\.13\.4,<2\.20", r) for r in requires
    )
    assert any(r.startswith("redis") and 'extra == "distributed"' in r for r in requires)
    assert meta.get_payload().startswith("# scrapy_twolevel")  # the README, as Markdown


USER_SPIDER = '''
import scrapy
from scrapy.linkextractors import LinkExtractor


class SiteSpider(scrapy.Spider):
    """A spider as a user writes one: every link of the site, every page an item."""

    name = "site"
    start_urls = {seeds!r}

    def parse(self, response):
        yield {{"url": response.url}}
        for link in LinkExtractor().extract_links(response):
            yield response.follow(link, self.parse)
'''


@pytest.mark.long
def test_the_release_builds_passes_twine_and_crawls_a_startproject_project(tmp_path):
    """The sdist and the wheel built (once: the build is the slow part) and checked; then
    a new user's path: the wheel (with the ``distributed`` extra) into a clean venv,
    ``scrapy startproject``, the one-line add-on, the template's ``ROBOTSTXT_OBEY = True``
    (and its ``DOWNLOAD_DELAY``), ``scrapy crawl``; then ``scrapy twolevel status`` and
    ``scrapy recrawl --help`` from that install."""
    sdist, wheel = build_release(tmp_path)
    check_the_release(sdist, wheel)
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", venv])
    bin_dir = venv / "bin"
    # --no-compile: byte-compiling Scrapy, scikit-learn and the rest took half the time,
    # and is not what is tested here (the first import compiles what it needs).
    run([bin_dir / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check",
         "--no-compile", f"{wheel}[distributed]"])  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    where = run(
        [bin_dir / "python", "-c",
         "import redis, scrapy_twolevel as t; print(t.__file__); print(t.__version__)"],
        cwd=tmp_path, env=env,
    ).stdout.split()  # fmt: skip
    assert Path(where[0]).is_relative_to(venv) and where[1] == scrapy_twolevel.__version__

    scrapy = bin_dir / "scrapy"
    run([scrapy, "startproject", "shop"], cwd=tmp_path, env=env)
    project = tmp_path / "shop"
    settings = project / "shop" / "settings.py"
    template = settings.read_text()
    assert re.search(r"^ROBOTSTXT_OBEY = True$", template, re.M)
    settings.write_text(template + '\nADDONS = {"scrapy_twolevel.Addon": 0}\n')

    profile = HostProfile(connect_delay=0.002, response_delay=0.004)
    web = generate_web(5, 3, seed=3, host_profiles=[profile] * 5)
    jobdir = tmp_path / "job"
    with ServerProcess(web, tmp_path) as server:
        (project / "shop" / "spiders" / "site.py").write_text(
            USER_SPIDER.format(seeds=server.seeds)
        )
        crawl = run(
            [scrapy, "crawl", "site", "-s", f"JOBDIR={jobdir}", "-s", "LOG_LEVEL=INFO"],
            cwd=project, env=env,
        )  # fmt: skip
        stats = server.stats()
    log = crawl.stderr
    assert " ERROR: " not in log, log[-3000:]
    assert "<scrapy_twolevel.addon.Addon object" in log  # Scrapy's "Enabled addons" line
    assert "'finish_reason': 'finished'" in log
    assert "'twolevel/hosts':" in log  # the two-level scheduler's own stats
    # Every page once, robots.txt once per host, never two requests in flight at a host.
    # As with Scrapy's own scheduler, a start URL is requested with dont_filter=True and
    # so is not marked seen: a link back to it fetches it again.
    linked = {target for page in web.pages for target in page.links}
    twice = {seed for seed in web.seeds if seed in linked}
    assert stats.fetch_counts() == {page: 1 + (page in twice) for page in web.reachable()}
    assert {i: h.paths.get("/robots.txt", 0) for i, h in stats.hosts.items()} == dict.fromkeys(
        range(len(web.hosts)), 1
    )
    assert max(stats.max_concurrent_requests_per_host().values()) == 1

    status = run(
        [scrapy, "twolevel", "status", "site", "-s", f"JOBDIR={jobdir}", "--json"],
        cwd=project, env=env,
    )  # fmt: skip
    report = json.loads(status.stdout)
    assert (report["pending"], report["written_by"]) == (0, scrapy_twolevel.__version__)
    assert report["seen_keys"] >= len(web.reachable())
    recrawl = run([scrapy, "recrawl", "--help"], cwd=project, env=env)
    assert recrawl.stdout.startswith("Usage") and "train" in recrawl.stdout


def test_a_jobdir_written_by_0_1_0_is_refused_naming_both_releases_and_left_untouched(
    tmp_path,
):
    """tests/fixtures/jobdir-0.1.0: the README's demo stopped by 0.1.0 after 12 of its 48
    pages. Its frontier file is in a format this release does not read: the crawl stops at
    start-up saying which release wrote it and which this is, and changes none of its
    files."""
    jobdir = tmp_path / "job"
    shutil.copytree(FIXTURES / "jobdir-0.1.0", jobdir)
    before = {p.relative_to(jobdir): p.read_bytes() for p in jobdir.rglob("*") if p.is_file()}
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("scrapy")), "crawl", "testweb",
         "-s", "LOG_LEVEL=WARNING", "-s", f"JOBDIR={jobdir}", "-s", "TWOLEVEL_TESTWEB_PORT=28431"],
        cwd=ROOT / "example_project", capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1
    frontier = jobdir / "twolevel" / "frontier.sqlite3"
    assert (
        f"StateError: {frontier} was written by scrapy-twolevel 0.1.0 (format "
        f"'scrapy_twolevel.frontier/2'); this is scrapy-twolevel {scrapy_twolevel.__version__}, "
        "which reads 'scrapy_twolevel.frontier/4'. The file was left untouched: finish that "
        "crawl with the release that started it, or use a fresh JOBDIR"
    ) in proc.stderr
    after = {p.relative_to(jobdir): p.read_bytes() for p in jobdir.rglob("*") if p.is_file()}
    assert {name: after[name] for name in before} == before
