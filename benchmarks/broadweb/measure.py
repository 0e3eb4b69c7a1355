"""What the driver reads about a running crawl: ``/proc``, the server, the ``JOBDIR``, py-spy.

- :func:`proc_sample`: CPU seconds (``utime + stime`` from ``/proc/<pid>/stat``), RSS and
  its peak (``VmRSS``, ``VmHWM`` from ``/proc/<pid>/status``) and open descriptors;
- :class:`WebServer`: the generated web's server process and its control paths;
- :func:`dir_bytes`: bytes allocated under a directory (``st_blocks * 512``);
- :func:`jobdir_rows`: the requests a killed two-level crawl left in its ``JOBDIR``
  (``twolevel/frontier.sqlite3``, format ``scrapy_twolevel.frontier/4``: table
  ``requests``, one JSON row per request, leased rows with a negated host), as positions
  in the web; read with SQLite as the resumed crawl will read it;
- :class:`Profile`: ``py-spy record --native --format raw`` on the crawler, and the share
  of samples in the garbage collector, in the scheduler's code, and elsewhere.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from harness.crawl import pythonpath

HERE = Path(__file__).resolve().parent.parent
_TICK = os.sysconf("SC_CLK_TCK")
_URL = re.compile(rb"h(\d+)\.broad\.test:\d+/p/(\d+)")

# -- the crawler process ---------------------------------------------------------------------


def proc_sample(pid: int) -> dict[str, float] | None:
    """CPU s, RSS and peak RSS (bytes) and open descriptors of ``pid``; None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    memory = {}
    for line in status.splitlines():
        if line.startswith(("VmRSS:", "VmHWM:")):
            name, value = line.split(":")
            memory[name] = int(value.split()[0]) * 1024
    return {
        "cpu_s": (int(fields[11]) + int(fields[12])) / _TICK,
        "rss": memory.get("VmRSS", 0),
        "hwm": memory.get("VmHWM", 0),
        "fds": fds,
    }


def dir_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


# -- the server ------------------------------------------------------------------------------


class WebServer:
    """:mod:`broadweb.server` in a process of its own, for one web."""

    def __init__(self, workdir: Path, web: dict[str, int], latency: float, idle: float) -> None:
        ready = workdir / "server.ready.json"
        ready.unlink(missing_ok=True)
        config = workdir / "server.json"
        config.write_text(
            json.dumps({**web, "latency": latency, "idle_timeout": idle, "ready": str(ready)})
        )
        self.log = open(workdir / "server.log", "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "broadweb.server", str(config)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            env=pythonpath(HERE),
        )
        deadline = time.monotonic() + 60
        while not ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the web server did not start: see {workdir}/server.log")
            time.sleep(0.05)
        self.port = int(json.loads(ready.read_text())["port"])

    def get(self, path: str, timeout: float = 30.0) -> bytes:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request("GET", path, headers={"Host": "control", "Connection": "close"})
            return conn.getresponse().read()
        finally:
            conn.close()

    def json(self, path: str) -> dict[str, Any]:
        return dict(json.loads(self.get(path)))

    def stop(self) -> dict[str, Any]:
        """Its CPU time over its whole life, then stop it."""
        stats = self.json("/__stats")
        self.proc.terminate()
        self.proc.wait(30)
        self.log.close()
        return {"server_cpu_s": stats["server_cpu_s"]}


# -- the JOBDIR left by a kill ---------------------------------------------------------------


def jobdir_rows(jobdir: Path, offsets: list[int]) -> dict[str, Any] | None:
    """Rows (and leased rows) in the two-level ``JOBDIR``, and the web positions they hold."""
    path = jobdir / "twolevel" / "frontier.sqlite3"
    if not path.exists():
        return None
    db = sqlite3.connect(path)
    try:
        rows = leased = 0
        positions: list[int] = []
        for host, data in db.execute("SELECT host, data FROM requests"):
            rows += 1
            leased += host < 0
            found = _URL.search(data)
            if found:
                positions.append(offsets[int(found.group(1))] + int(found.group(2)))
    finally:
        db.close()
    return {"rows": rows, "leased": leased, "positions": positions}


# -- profiles --------------------------------------------------------------------------------

#: Native frames of CPython's cyclic collector (3.11-3.13 names; ``collect`` in 3.11's
#: ``gcmodule.c`` is inlined into ``gc_collect_main``).
GC_FRAMES = frozenset(
    {
        "gc_collect_main",
        "gc_collect_with_callback",
        "gc_collect_generations",
        "collect",
        "collect_with_callback",
        "collect_generations",
        "_PyGC_Collect",
        "gc_collect_impl",
        "gc_collect_region",
        "gc_collect_full",
        "gc_collect_young",
        "gc_collect_increment",
    }
)
#: Files of the scheduler under test: the package, or Scrapy's stock scheduler, its
#: priority and disk queues (queuelib included) and its dupefilter.
STOCK_SCHEDULER_FILES = (
    "/scrapy/core/scheduler.py",
    "/scrapy/pqueues.py",
    "/scrapy/squeues.py",
    "/scrapy/dupefilters.py",
    "/queuelib/",
)


def py_spy() -> str | None:
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


class Profile:
    """``py-spy record`` on ``pid`` until :meth:`stop` (SIGINT makes py-spy write it out)."""

    def __init__(self, pid: int, out: Path, rate: int) -> None:
        self.out = out
        exe = py_spy()
        if exe is None:
            raise RuntimeError("--profile needs py-spy (pip install py-spy)")
        self.proc = subprocess.Popen(
            [
                exe,
                "record",
                "--pid",
                str(pid),
                "--native",
                "--full-filenames",
                "--format",
                "raw",
                "--rate",
                str(rate),
                "--output",
                str(out),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def stop(self, ours: bool) -> dict[str, Any]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return classify(self.out, ours)


def classify(path: Path, ours: bool) -> dict[str, Any]:
    """Shares of the samples: GC first (wherever it ran), then the scheduler, then the rest.

    A sample is *gc* when any frame is one of :data:`GC_FRAMES`; else *scheduler* when the
    code running is called by ``scrapy_twolevel`` (ours) or :data:`STOCK_SCHEDULER_FILES`
    (stock), not by the spider's output a middleware of the package iterates
    (:func:`_in_scheduler`); else *rest*. ``top`` is the innermost Python frame of the most
    frequent samples.
    """
    counts = Counter({"gc": 0, "scheduler": 0, "rest": 0})
    work: Counter[str] = Counter()
    top: Counter[str] = Counter()
    total = 0
    if not path.exists():
        return {"samples": 0}
    mine = ("/scrapy_twolevel/",) if ours else STOCK_SCHEDULER_FILES
    for line in path.read_text(errors="replace").splitlines():
        stack, _, number = line.rpartition(" ")
        if not number.isdigit():
            continue
        n = int(number)
        total += n
        frames = stack.split(";")
        names = {f.split(" (", 1)[0] for f in frames}
        kind = _work(frames, stack, names, mine)
        work[kind] += n
        counts[kind if kind in ("gc", "scheduler") else "rest"] += n
        python = [f for f in frames if ".py:" in f]
        if python:
            top[_short(python[-1])] += n
    shares = {k: v / total for k, v in counts.items()} if total else {}
    return {
        "samples": total,
        "shares": shares,
        "work": {k: v / total for k, v in work.items()} if total else {},
        "top": [[name, n / total] for name, n in top.most_common(15)] if total else [],
    }


#: Frames through which the package's spider middlewares run the code before them (the
#: spider's callback and ``start()``, the middlewares closer to the spider): not the
#: scheduler's work.
UPSTREAM_FRAMES = ("/scrapy/core/spidermw.py", "/scrapy/spidermiddlewares/", "/broadweb/crawl.py")


def _in_scheduler(frames: list[str], mine: tuple[str, ...]) -> bool:
    """Whether the innermost frame that decides is the scheduler's, outermost first: a
    frame of ``mine`` makes what it calls the scheduler's, a frame of
    :data:`UPSTREAM_FRAMES` below it hands the sample back (the duplicate-links middleware
    iterating the spider's output must not count the spider's parsing as its own)."""
    inside = False
    for frame in frames:
        if any(m in frame for m in mine):
            inside = True
        elif inside and any(u in frame for u in UPSTREAM_FRAMES):
            inside = False
    return inside


#: What a sample of the crawler was doing, the first that matches, for ``work`` in
#: :func:`classify`: the collector, the scheduler's code (as for the shares), opening a
#: connection (endpoint, TCP connect, name resolution), the spider's callback, the HTTP/1.1
#: download handler and Twisted's client, Scrapy's middlewares, its engine, scraper and
#: signals; "other" is the event loop and the rest.
WORK_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "new connection",
        (
            "_newConnection",
            "HostnameEndpoint",
            "connectTCP",
            "TCP4ClientEndpoint",
            "startConnecting",
            "doConnect",
            "resolveHostName",
            "getaddrinfo",
        ),
    ),
    ("spider callback", ("BroadSpider.parse (",)),
    ("download handler", ("/http11.py", "/twisted/web/")),
    ("Scrapy's middlewares", ("/downloadermiddlewares/", "/spidermiddlewares/")),
    (
        "engine, scraper, signals",
        (
            "/core/engine.py",
            "/core/scraper.py",
            "signalmanager",
            "pydispatch",
            "/downloader/__init__",
        ),
    ),
)


def _work(frames: list[str], stack: str, names: set[str], mine: tuple[str, ...]) -> str:
    if names & GC_FRAMES:
        return "gc"
    if _in_scheduler(frames, mine):
        return "scheduler"
    for kind, markers in WORK_KINDS:
        if any(m in stack for m in markers):
            return kind
    return "other"


def _short(frame: str) -> str:
    """``func (/long/path/site-packages/scrapy/x.py:12)`` -> ``func (scrapy/x.py:12)``."""
    name, _, where = frame.partition(" (")
    for marker in ("site-packages/", "/benchmarks/", "/lib/python3"):
        if marker in where:
            where = where.split(marker, 1)[1]
            break
    where = re.sub(r"^.*/(scrapy_twolevel/)", r"\1", where)
    return f"{name} ({where}"
