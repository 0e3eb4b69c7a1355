"""Workers run in subprocesses, and reading what they report.

Every measured configuration runs in a process of its own, so that its CPU time, RSS and
Twisted reactor are its own: the script itself re-run with ``--worker``, which prints its
result as the last line of JSON (:func:`worker_result`; a failed worker becomes a row with
an ``error``). Workers import a :class:`Snapshot` of ``scrapy_twolevel`` taken when the run
starts (:func:`snapshot_package`), so that edits to the checkout during a long run do not
mix two versions in one table; :func:`pythonpath` puts the copy first.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def pythonpath(*dirs: Path | str | None) -> dict[str, str]:
    """The environment with ``dirs`` (those not None) before its ``PYTHONPATH``."""
    env = dict(os.environ)
    paths = [str(d) for d in dirs if d is not None]
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [*paths, env.get("PYTHONPATH")]))
    return env


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False)


def snapshot_package(dest: Path, source: str = "head", rev: str = "HEAD") -> dict[str, Any]:
    """Copy ``scrapy_twolevel`` to ``dest`` so every worker runs the same code.

    The checkout is edited while the benchmark runs; the workers import the copy
    (``PYTHONPATH`` comes before the editable install's finder). ``source="head"`` takes the
    package as committed at ``rev`` (``git archive``), ``"worktree"`` as it is on disk now.
    Returns the commit, which source was used, whether the working tree differed from the
    commit, and a hash of the copied sources.
    """
    import hashlib
    import io
    import tarfile

    import scrapy_twolevel

    src = Path(scrapy_twolevel.__file__).resolve().parent
    repo = src.parent
    commit = _git(repo, "rev-parse", rev).stdout.decode().strip()
    dirty = bool(_git(repo, "status", "--porcelain", "--", src.name).stdout.strip())
    archive = _git(repo, "archive", "--format=tar", rev, src.name) if source == "head" else None
    if rev != "HEAD" and (archive is None or archive.returncode != 0):
        raise ValueError(f"cannot take scrapy_twolevel at revision {rev!r}")
    if archive is not None and archive.returncode == 0:
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(dest, filter="data")
    else:
        source = "worktree"
        shutil.copytree(src, dest / src.name, ignore=shutil.ignore_patterns("__pycache__"))
    digest = hashlib.sha256()
    for path in sorted((dest / src.name).rglob("*.py")):
        digest.update(path.relative_to(dest).as_posix().encode())
        digest.update(path.read_bytes())
    return {
        "commit": commit,
        "source": source,
        "worktree_differs_from_commit": dirty,
        "package_sha256": digest.hexdigest(),
    }


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
