"""The temporary seen-keys store of a crawl without JOBDIR, and the sweep of those left
behind by crawls that were killed.

A crawl without JOBDIR keeps the seen keys that spill out of RAM in a SQLite file in the
system's temporary directory, removed when the crawl closes. A crawl stopped by ``kill -9``
(or a crash) never closes, and its file stays: hundreds of MB after a broad crawl. Each
file's name carries the id of the process that made it, so the next crawl on the machine
removes the files whose process is gone.

No Scrapy here.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

PREFIX = "twolevel-seen-"
SUFFIX = ".sqlite3"
#: SQLite's own files beside a database (WAL mode; a rollback journal).
COMPANIONS = ("-wal", "-shm", "-journal")
_NAME = re.compile(rf"^{re.escape(PREFIX)}(\d+)-[^/]*{re.escape(SUFFIX)}$")


def create(directory: Path | None = None) -> Path:
    """A new empty store file named after this process."""
    fd, name = tempfile.mkstemp(prefix=f"{PREFIX}{os.getpid()}-", suffix=SUFFIX, dir=directory)
    os.close(fd)
    return Path(name)


def remove(path: Path) -> int:
    """Remove a store file and SQLite's companions; the bytes freed."""
    freed = 0
    for candidate in (path, *(Path(f"{path}{suffix}") for suffix in COMPANIONS)):
        try:
            size = candidate.stat().st_size
            candidate.unlink()
        except FileNotFoundError:
            continue
        except OSError:  # another user's file in a shared /tmp: theirs to remove
            continue
        freed += size
    return freed


def process_alive(pid: int) -> bool:
    """Whether a process with this id runs (one of another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep(
    directory: Path | None = None, alive: Callable[[int], bool] = process_alive
) -> tuple[int, int]:
    """Remove the store files whose process is gone: (files, bytes freed). Files of
    running processes, and names this module did not make, are left alone."""
    folder = Path(directory or tempfile.gettempdir())
    files = freed = 0
    try:
        names = os.listdir(folder)
    except OSError:
        return 0, 0
    for name in names:
        match = _NAME.match(name)
        if match is None:
            continue
        pid = int(match.group(1))
        if pid == os.getpid() or alive(pid):
            continue
        gone = remove(folder / name)
        if not (folder / name).exists():
            files += 1
            freed += gone
    return files, freed
