"""A snapshot (:mod:`.snapshot`) in Prometheus's text exposition format (version 0.0.4).

Crawl-wide gauges and counters, hosts by state and by the reason they wait, and per-host
series for the snapshot's rows only (the top hosts by score, those in session and those
asked for), so the number of series stays bounded however many hosts the crawl has.
No Scrapy here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: Crawl-wide figures: snapshot key, metric name, type, help.
CRAWL_METRICS = (
    ("pending", "twolevel_pending_requests", "gauge", "Requests queued in the frontier."),
    ("hosts", "twolevel_hosts_known", "gauge", "Hosts the frontier knows."),
    ("pages", "twolevel_pages_total", "counter", "Responses received."),
    ("quality", "twolevel_quality_gathered_total", "counter", "Quality of the pages fetched."),
    ("in_flight", "twolevel_requests_in_flight", "gauge", "Requests in the downloader."),
)
#: Per-host figures of a snapshot row: row key, metric name, help.
HOST_METRICS = (
    ("queued", "twolevel_host_queued_requests", "Requests queued for the host."),
    ("score", "twolevel_host_score", "The host's score under the crawl's policy."),
    ("service_s", "twolevel_host_service_seconds", "Seconds per page of host time, smoothed."),
    ("connection_s", "twolevel_host_connection_seconds", "Connection time, smoothed."),
    ("fetched", "twolevel_host_pages_total", "Pages the host gave."),
    ("refusals", "twolevel_host_refusals_total", "Requests the host refused (429/503)."),
)


def escape(value: str) -> str:
    """A label value as the format wants it: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: Any) -> str:
    return repr(float(value))


def _family(name: str, kind: str, help_text: str, samples: Iterable[str]) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *samples]


def render(snap: Mapping[str, Any]) -> str:
    """The whole exposition for ``snap``, ending with a newline."""
    lines: list[str] = []
    crawl = snap["crawl"]
    for key, name, kind, help_text in CRAWL_METRICS:
        if crawl.get(key) is not None:
            lines += _family(name, kind, help_text, [f"{name} {_number(crawl[key])}"])
    lines += _family(
        "twolevel_hosts",
        "gauge",
        "Hosts by state (in session, waiting, ready, given up, idle).",
        [f'twolevel_hosts{{state="{escape(s)}"}} {_number(n)}' for s, n in snap["states"].items()],
    )
    lines += _family(
        "twolevel_hosts_by_reason",
        "gauge",
        "Hosts waiting or given up, by why.",
        [
            f'twolevel_hosts_by_reason{{reason="{escape(r)}"}} {_number(n)}'
            for r, n in snap["reasons"].items()
        ],
    )
    for key, name, help_text in HOST_METRICS:
        kind = "counter" if name.endswith("_total") else "gauge"
        lines += _family(
            name,
            kind,
            help_text,
            [
                f'{name}{{host="{escape(row["host"])}"}} {_number(row[key])}'
                for row in snap["hosts"]
                if row.get(key) is not None
            ],
        )
    return "\n".join(lines) + "\n"
