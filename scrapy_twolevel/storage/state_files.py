"""The small JSON files of a JOBDIR crawl: host estimates and the topics' state.

``twolevel/hosts.json`` keeps what the crawl measured of each host (written when the crawl
stops) and ``twolevel/topics.json`` the topic selector's counts and turns (written with
every frontier commit). Each carries a format marker; a file that does not match is
reported (:class:`~scrapy_twolevel.errors.StateError`), never overwritten. Writes go to a
temporary file that replaces the old one, so a kill never leaves half a file.

No Scrapy here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ..errors import StateError
from ..frontier.estimates import HostEstimate

HOSTS_FORMAT = "scrapy_twolevel.hosts/1"
TOPICS_FORMAT = "scrapy_twolevel.topics/1"


def write_json(path: Path, data: Any) -> None:
    """Replace ``path`` with ``data`` as JSON, atomically."""
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, path)


def read_hosts(path: Path) -> dict[str, HostEstimate]:
    """Host estimates saved in a JOBDIR; :class:`StateError` for a file that is not ours."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("format") != HOSTS_FORMAT:
            found = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise StateError(
                f"{path} holds {found!r}, expected {HOSTS_FORMAT!r}: probably a JOBDIR "
                "from another version or tool. It was left untouched; use a fresh JOBDIR."
            )
        return {k: HostEstimate.from_dict(v) for k, v in data["hosts"].items()}
    except StateError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise StateError(
            f"{path} is corrupt ({exc}). It was left untouched; fix or delete it, or use a "
            "fresh JOBDIR."
        ) from exc


def write_hosts(path: Path, estimates: Mapping[str, HostEstimate]) -> None:
    write_json(
        path, {"format": HOSTS_FORMAT, "hosts": {k: e.to_dict() for k, e in estimates.items()}}
    )


def load_topics(path: Path, restore: Callable[[Mapping[str, Any]], None]) -> None:
    """Hand the topic selector's saved state to ``restore`` (nothing saved: no call);
    :class:`StateError` if the file, or the state in it, is damaged."""
    if not path.exists():
        return
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("format") != TOPICS_FORMAT:
            raise ValueError(f"format {data.get('format') if isinstance(data, dict) else data!r}")
        restore(data["state"])
    except (ValueError, KeyError) as exc:
        raise StateError(
            f"{path} is not a topic state this version can read ({exc}). It was left "
            "untouched; fix or delete it, or use a fresh JOBDIR."
        ) from exc


def write_topics(path: Path, state: Mapping[str, Any]) -> None:
    write_json(path, {"format": TOPICS_FORMAT, "state": state})
