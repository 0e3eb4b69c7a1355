"""The crawler's CPU per page and per byte, fitted from a crawl, and per TLS handshake,
measured apart, for the CPU-aware reference.

A crawl process samples its CPU time (:class:`realweb.crawl.CpuSampler`); the server's log
says when each response ended, how big it was and whether it was the first on its
connection. Over 1-s bins in which the crawler answered pages, the CPU it spent, less the
handshakes of the bin (new connections to the hosts that speak TLS, at the cost
:mod:`realweb.handshake` measured directly), is fitted, by least squares without an
intercept, as ``per_page * pages + per_byte * bytes`` of the 200 responses that ended in
the bin: what a page costs whatever its size (Scrapy's engine, the middlewares, the
scheduler) and what a byte costs (decoding, the spider's parsing, its links). The
handshake is not a third column of the fit: bins in which many connections open are also
bins of other work, and such a column took 7 to 94 ms a handshake where the direct
measurement gives 4. A CPU-bound crawl keeps its core busy in every bin, so the fit is
told apart by how pages and bytes vary from bin to bin. If a coefficient comes out
negative, one column alone is fitted (the better of the two).
"""

from __future__ import annotations

import bisect
from collections.abc import Collection
from dataclasses import dataclass

from realweb.judge import Request

BIN = 1.0


@dataclass(frozen=True)
class CpuModel:
    """Seconds of the crawler's one core per page, per byte of it and per TLS handshake."""

    per_page_s: float
    per_byte_s: float
    bins: int
    per_handshake_s: float = 0.0

    def cost(self, size: int, handshake: bool = False) -> float:
        return (
            self.per_page_s + self.per_byte_s * size + (self.per_handshake_s if handshake else 0.0)
        )


def fit(
    samples: list[list[float]],
    requests: list[Request],
    origin: float,
    tls_hosts: Collection[str] = (),
    per_handshake_s: float = 0.0,
) -> CpuModel | None:
    """Fit from ``(wall time, CPU s)`` samples and the judged log (its clock starts at
    ``origin``); ``tls_hosts``: the addresses whose new connections are handshakes, each
    ``per_handshake_s`` of CPU (measured apart). ``None`` with fewer than 5 bins of pages
    or a degenerate fit."""
    if len(samples) < 2:
        return None
    times = [t - origin for t, _ in samples]
    cpus = [c for _, c in samples]
    end = min(times[-1], max((r.end for r in requests), default=0.0))
    n = int(end // BIN)
    pages, sizes, handshakes = [0.0] * n, [0.0] * n, [0.0] * n
    for r in requests:
        i = int(r.end // BIN)
        if not 0 <= i < n:
            continue
        if r.status == 200:
            pages[i] += 1
            sizes[i] += r.bytes
        if r.on_connection == 1 and r.host in tls_hosts:
            handshakes[i] += 1
    rows = []
    for i in range(n):
        if pages[i] and times[0] <= i * BIN:
            used = _cpu_at(times, cpus, (i + 1) * BIN) - _cpu_at(times, cpus, i * BIN)
            used -= per_handshake_s * handshakes[i]
            rows.append(((pages[i], sizes[i]), used))
    if len(rows) < 5:
        return None
    a, b = _non_negative_fit(rows)
    return CpuModel(a, b, len(rows), per_handshake_s)


def _cpu_at(times: list[float], cpus: list[float], t: float) -> float:
    """CPU seconds at time ``t``, linear between the samples around it."""
    i = bisect.bisect_left(times, t)
    if i <= 0:
        return cpus[0]
    if i >= len(times):
        return cpus[-1]
    t0, t1 = times[i - 1], times[i]
    return cpus[i - 1] + (cpus[i] - cpus[i - 1]) * (t - t0) / (t1 - t0 or 1.0)


def _non_negative_fit(rows: list[tuple[tuple[float, float], float]]) -> tuple[float, float]:
    """``y = a * x1 + b * x2`` without an intercept (the 2x2 normal equations); if a
    coefficient comes out negative, one column alone, whichever leaves the smaller
    residual."""
    s11 = sum(x1 * x1 for (x1, _), _ in rows)
    s12 = sum(x1 * x2 for (x1, x2), _ in rows)
    s22 = sum(x2 * x2 for (_, x2), _ in rows)
    t1 = sum(x1 * y for (x1, _), y in rows)
    t2 = sum(x2 * y for (_, x2), y in rows)
    det = s11 * s22 - s12 * s12
    if not det:
        a, b = (t1 / s11 if s11 else 0.0), 0.0
    else:
        a, b = (t1 * s22 - t2 * s12) / det, (s11 * t2 - s12 * t1) / det
    if a >= 0 and b >= 0:
        return a, b
    a_only = t1 / s11
    b_only = t2 / (s22 or 1.0)
    a_err = sum((y - a_only * x1) ** 2 for (x1, _), y in rows)
    b_err = sum((y - b_only * x2) ** 2 for (_, x2), y in rows)
    return (a_only, 0.0) if a_err <= b_err else (0.0, b_only)
