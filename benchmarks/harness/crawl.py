"""Crawls and workers run in subprocesses, and reading what they report.

Every measured crawl or configuration runs in a process of its own, so that its CPU time,
RSS and Twisted reactor are its own. Two kinds:

- a crawl of the test web (:func:`crawl_test_web`): ``python -m scrapy_twolevel.testweb
  crawl`` on a web file, each setting passed as JSON, with ``benchmarks/`` on
  ``PYTHONPATH`` so that a setting can name an extension defined in a script; the crawl
  leaves its result at ``out``;
- a worker (:func:`worker_result`): the script itself re-run with ``--worker``, which prints
  its result as the last line of JSON; a failed worker becomes a row with an ``error``.
  Workers import a :class:`Snapshot` of ``scrapy_twolevel`` taken when the run starts, so
  that edits to the checkout during a long run do not mix two versions in one table.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import BENCH


def pythonpath(*dirs: Path | str | None) -> dict[str, str]:
    """The environment with ``dirs`` (those not None) before its ``PYTHONPATH``."""
    env = dict(os.environ)
    paths = [str(d) for d in dirs if d is not None]
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [*paths, env.get("PYTHONPATH")]))
    return env


def crawl_test_web(
    web_file: Path,
    out: Path,
    settings: dict[str, Any],
    timeout: float,
    delay_scale: float = 1.0,
) -> subprocess.CompletedProcess[str]:
    """One crawl of the test web; raises :class:`subprocess.TimeoutExpired` after ``timeout``.

    ``delay_scale`` multiplies every host's delays (the server's ``--delay-scale``).
    """
    out.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "scrapy_twolevel.testweb", "crawl", "--web", str(web_file)]
    cmd += ["--output", str(out), "--delay-scale", repr(delay_scale)]
    for name, value in settings.items():
        cmd += ["--set", f"{name}={json.dumps(value)}"]
    env = pythonpath(BENCH)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)


class Snapshot:
    """A temporary copy of ``scrapy_twolevel`` (made by ``take``) that the workers import."""

    def __init__(self, prefix: str, take: Callable[[Path], dict[str, Any]]) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=prefix))
        self.code = take(self.dir)
        self.expected = str(self.dir / "scrapy_twolevel")

    def check(self, run: dict[str, Any]) -> None:
        """Refuse a worker's result measured on other code than the copy."""
        where = run.get("scrapy_twolevel_from", self.expected)
        if where != self.expected:
            raise RuntimeError(f"worker imported {where}, not {self.expected}")

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def worker_result(returncode: int, stdout: str, tail: str, **ident: Any) -> dict[str, Any]:
    """The worker's last JSON line, or ``ident`` with the error and ``tail``'s last lines."""
    lines = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    if returncode != 0 or not lines:
        last = tail.strip().splitlines()[-5:]
        return {**ident, "error": f"worker exited {returncode}: " + " | ".join(last)}
    return json.loads(lines[-1])
