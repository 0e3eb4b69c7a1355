"""What a ``JOBDIR`` holds, read without touching it: ``scrapy twolevel status`` for a crawl
on one machine, running or dead (killed with -9 included).

The frontier file is opened read-only: SQLite's write-ahead log lets a reader in beside a
running crawl, and a reader never checkpoints, so a dead crawl resumes from exactly what
it left. Host estimates come from ``hosts.json`` (written when a crawl stops; a crawl
killed before its first stop has none). No Scrapy here.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from ..errors import StateError
from .sqlite import written_by
from .state_files import read_hosts

FRONTIER_FILE = "frontier.sqlite3"


def jobdir_status(jobdir: str | Path, *, top: int = 50) -> dict[str, Any]:
    """Pending requests (leases of a dead crawl included: they are fetched again on
    resume) overall and for the ``top`` hosts with the most, their best queued quality,
    the seen keys, and the hosts' saved estimates; :class:`StateError` if the ``JOBDIR``
    holds no twolevel frontier or a file that is not one."""
    statedir = Path(jobdir, "twolevel")
    path = statedir / FRONTIER_FILE
    if not path.exists():
        raise StateError(f"{path} does not exist: no scrapy_twolevel crawl has used this JOBDIR")
    written = max(p.stat().st_mtime for p in statedir.glob(f"{FRONTIER_FILE}*"))
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            # A leased row (handed out, not finished) has its host id negated.
            pending, leased = db.execute(
                "SELECT COUNT(*), COUNT(CASE WHEN host < 0 THEN 1 END) FROM requests"
            ).fetchone()
            per_host = (
                "SELECT h.key AS key, COUNT(*) AS n, -MIN(r.negq) AS q FROM requests r "
                "JOIN hosts h ON h.id = abs(r.host) GROUP BY h.id"
            )
            hosts_queued, plain = db.execute(
                f"SELECT COUNT(CASE WHEN key != '' THEN 1 END), "
                f"COALESCE(SUM(CASE WHEN key = '' THEN n END), 0) FROM ({per_host})"
            ).fetchone()
            seen = db.execute("SELECT COUNT(*) FROM seen").fetchone()[0]
            version = written_by(db)
            rows = db.execute(
                f"SELECT key, n, q FROM ({per_host}) WHERE key != '' ORDER BY n DESC, key LIMIT ?",
                (top,),
            ).fetchall()
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        raise StateError(f"{path} cannot be read as a twolevel frontier ({exc})") from exc
    estimates = read_hosts(statedir / "hosts.json")
    hosts = []
    for key, queued, best in rows:
        row: dict[str, Any] = {"host": key, "queued": queued, "best_quality": best}
        estimate = estimates.get(key)
        if estimate is not None:
            row.update(
                connection_s=round(estimate.connection_time, 4),
                service_s=round(estimate.service_time + estimate.transfer_time(), 4),
                success_rate=round(estimate.success_rate, 4),
                refusals=estimate.refusals,
            )
        hosts.append(row)
    return {
        "jobdir": str(jobdir),
        "written_by": version,
        "pending": pending,
        "leased": leased,
        "hosts_with_requests": hosts_queued,
        # Requests of no host lane (no host name: data: URLs, or URLs Scrapy will refuse).
        "without_host": plain,
        "seen_keys": seen,
        "hosts_estimated": len(estimates),
        "last_written_s_ago": round(time.time() - written, 1),
        "hosts": hosts,
    }


def render_jobdir_status(report: dict[str, Any]) -> str:
    """The report as a summary and a table, for a terminal."""
    lines = [
        f"JOBDIR {report['jobdir']}: {report['pending']} requests pending on "
        f"{report['hosts_with_requests']} hosts, {report['seen_keys']} seen keys; last "
        f"written {report['last_written_s_ago']:g} s ago; {report['hosts_estimated']} hosts "
        f"with saved estimates; written by scrapy-twolevel {report['written_by']}",
    ]
    if report["hosts"]:
        lines.append(f"{'host':40} {'queued':>8} {'best Q':>10} {'service s':>10} {'S':>6}")
        for row in report["hosts"]:
            service = row.get("service_s")
            rate = row.get("success_rate")
            lines.append(
                f"{row['host']:40} {row['queued']:>8} {row['best_quality']:>10.4g} "
                f"{'-' if service is None else f'{service:.3f}':>10} "
                f"{'-' if rate is None else f'{rate:.2f}':>6}"
            )
    return "\n".join(lines)
