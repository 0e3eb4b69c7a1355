"""The crawler's CPU per page and per byte, fitted from a crawl, for the CPU-aware reference.

A crawl process samples its CPU time (:class:`realweb.crawl.CpuSampler`); the server's log
says when each response ended and how big it was. Over 1-s bins in which the crawler
answered pages, the CPU it spent is fitted, by least squares without an intercept, as
``per_page * pages + per_byte * bytes`` of the 200 responses that ended in the bin: what a
page costs whatever its size (Scrapy's engine, the middlewares, the scheduler) and what a
byte costs (decoding, the spider's parsing, its links). A CPU-bound crawl keeps its core
busy in every bin, so the fit is told apart by how pages and bytes vary from bin to bin.
If a coefficient comes out negative, one column alone is fitted (the better of the two).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from realweb.judge import Request

BIN = 1.0


@dataclass(frozen=True)
class CpuModel:
    """Seconds of the crawler's one core per page and per byte of it."""

    per_page_s: float
    per_byte_s: float
    bins: int

    def cost(self, size: int) -> float:
        return self.per_page_s + self.per_byte_s * size


def fit(samples: list[list[float]], requests: list[Request], origin: float) -> CpuModel | None:
    """Fit from ``(wall time, CPU s)`` samples and the judged log (its clock starts at
    ``origin``); ``None`` with fewer than 5 bins of pages or a degenerate fit."""
    if len(samples) < 2:
        return None
    times = [t - origin for t, _ in samples]
    cpus = [c for _, c in samples]
    end = min(times[-1], max((r.end for r in requests), default=0.0))
    n = int(end // BIN)
    pages, sizes = [0.0] * n, [0.0] * n
    for r in requests:
        i = int(r.end // BIN)
        if r.status == 200 and 0 <= i < n:
            pages[i] += 1
            sizes[i] += r.bytes
    rows = []
    for i in range(n):
        if pages[i] and times[0] <= i * BIN:
            used = _cpu_at(times, cpus, (i + 1) * BIN) - _cpu_at(times, cpus, i * BIN)
            rows.append((pages[i], sizes[i], used))
    if len(rows) < 5:
        return None
    a, b = _least_squares(rows)
    if a < 0 or b < 0:
        # One column alone, whichever leaves the smaller residual.
        a_only = sum(p * y for p, _, y in rows) / sum(p * p for p, _, _ in rows)
        b_only = sum(s * y for _, s, y in rows) / (sum(s * s for _, s, _ in rows) or 1.0)
        a_err = sum((y - a_only * p) ** 2 for p, _, y in rows)
        b_err = sum((y - b_only * s) ** 2 for _, s, y in rows)
        a, b = (a_only, 0.0) if a_err <= b_err else (0.0, b_only)
    return CpuModel(a, b, len(rows))


def _cpu_at(times: list[float], cpus: list[float], t: float) -> float:
    """CPU seconds at time ``t``, linear between the samples around it."""
    i = bisect.bisect_left(times, t)
    if i <= 0:
        return cpus[0]
    if i >= len(times):
        return cpus[-1]
    t0, t1 = times[i - 1], times[i]
    return cpus[i - 1] + (cpus[i] - cpus[i - 1]) * (t - t0) / (t1 - t0 or 1.0)


def _least_squares(rows: list[tuple[float, float, float]]) -> tuple[float, float]:
    """``y = a * x1 + b * x2`` without an intercept: the 2x2 normal equations."""
    s11 = sum(x1 * x1 for x1, _, _ in rows)
    s12 = sum(x1 * x2 for x1, x2, _ in rows)
    s22 = sum(x2 * x2 for _, x2, _ in rows)
    t1 = sum(x1 * y for x1, _, y in rows)
    t2 = sum(x2 * y for _, x2, y in rows)
    det = s11 * s22 - s12 * s12
    if not det:
        return (t1 / s11 if s11 else 0.0), 0.0
    return (t1 * s22 - t2 * s12) / det, (s11 * t2 - s12 * t1) / det
