"""A snapshot (:mod:`.snapshot`) in Prometheus's text exposition format (version 0.0.4).

Crawl-wide gauges and counters, hosts by state and, for those waiting or given up, by
why; then per-host series. Names follow Prometheus's naming guide and pass ``promtool
check metrics``: base units (seconds), ``_total`` on counters only, each dimension a
label and never a part of the name. A ``host`` label is a series per host, and series
are what a Prometheus server pays for, so per-host series cover only the first
``max_hosts`` rows of the snapshot (``TWOLEVEL_PROMETHEUS_MAX_HOSTS``: the hosts in
session, then the best by score), however many hosts the crawl has. No Scrapy here.
"""

from __future__ import annotations

import math
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
    (
        "errors",
        "twolevel_failed_requests_total",
        "counter",
        "Requests that failed (timeouts, refused or reset connections, DNS errors).",
    ),
    (
        "refusals",
        "twolevel_refused_requests_total",
        "counter",
        "Requests the servers refused for now (429/503 by default).",
    ),
)
#: Per-host figures of a snapshot row: row key, metric name, type, help. The counters
#: only grow while the crawl runs (a host's series is absent while it is not in the top
#: rows, which Prometheus's ``rate()`` takes as a gap, not a reset).
HOST_METRICS = (
    ("queued", "twolevel_host_queued_requests", "gauge", "Requests queued for the host."),
    ("score", "twolevel_host_score", "gauge", "The host's score under the crawl's policy."),
    (
        "service_s",
        "twolevel_host_service_seconds",
        "gauge",
        "Seconds of host time per page, smoothed.",
    ),
    (
        "connection_s",
        "twolevel_host_connection_seconds",
        "gauge",
        "Seconds to open a connection to the host, smoothed.",
    ),
    ("fetched", "twolevel_host_pages_total", "counter", "Responses the host gave."),
    (
        "refusals",
        "twolevel_host_refusals_total",
        "counter",
        "Requests the host refused (429/503).",
    ),
)


def escape(value: str) -> str:
    """A label value as the format wants it: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: Any) -> str:
    number = float(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    return repr(number)


def _family(name: str, kind: str, help_text: str, samples: Iterable[str]) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *samples]


def render(snap: Mapping[str, Any], *, max_hosts: int) -> str:
    """The whole exposition for ``snap``, ending with a newline; per-host series for the
    first ``max_hosts`` rows of ``snap["hosts"]`` only (``0``: none)."""
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
    held = []
    for key, n in snap["reasons"].items():
        state, _, why = key.partition(": ")  # "<state>: <why>" (docs/watching.rst)
        labels = f'state="{escape(state)}",reason="{escape(why)}"'
        held.append(f"twolevel_hosts_held{{{labels}}} {_number(n)}")
    lines += _family(
        "twolevel_hosts_held", "gauge", "Hosts waiting or given up, by state and why.", held
    )
    rows = snap["hosts"][:max_hosts]
    for key, name, kind, help_text in HOST_METRICS:
        lines += _family(
            name,
            kind,
            help_text,
            [
                f'{name}{{host="{escape(row["host"])}"}} {_number(row[key])}'
                for row in rows
                if row.get(key) is not None
            ],
        )
    return "\n".join(lines) + "\n"
