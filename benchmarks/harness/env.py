"""The record of the machine and software a result was measured on.

Every results JSON stores one under ``"environment"``, so that runs on different machines
or versions can be told apart. The keys are the ones the committed results use: the short
record (date to the minute, ``cpus``) of the crawl and simulation studies, and the detailed
one (ISO date, ``cpu_count``, memory) of the studies that measure CPU and RSS per request,
each with the versions of what it measures and any facts of its own after them.
"""

from __future__ import annotations

import datetime as dt
import importlib
import os
import platform
from importlib import metadata
from typing import Any


def version(name: str) -> str | None:
    """The installed version of ``name``: its module's ``__version__``, else its
    distribution's; ``"sqlite"`` is the SQLite library's. None if it has none."""
    if name == "sqlite":
        import sqlite3

        return sqlite3.sqlite_version
    found = getattr(importlib.import_module(name), "__version__", None)
    if found is None:
        try:
            found = metadata.version(name)
        except metadata.PackageNotFoundError:
            return None
    return str(found)


def environment(*packages: str, detailed: bool = False, **extra: Any) -> dict[str, Any]:
    """Date, Python, the version of each of ``packages`` (by name, see :func:`version`),
    platform, CPUs (and memory when ``detailed``), then ``extra``."""
    now = dt.datetime.now(dt.UTC)
    env: dict[str, Any] = {
        "date": now.isoformat(timespec="seconds")
        if detailed
        else now.strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        **{name: version(name) for name in packages},
        "platform": platform.platform(),
    }
    if detailed:
        import psutil

        env["cpu_count"] = os.cpu_count()
        env["memory_gib"] = round(psutil.virtual_memory().total / 2**30, 1)
    else:
        env["cpus"] = os.cpu_count()
    return {**env, **extra}
