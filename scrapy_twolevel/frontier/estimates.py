"""Per-host estimates of connection cost, response time and requests per connection.

A crawler's time goes into TCP connections, so the scheduler ranks hosts by what one
kept-alive connection to them is expected to cost. These estimates are what it knows;
they are smoothed with an exponentially weighted moving average so one slow reply does
not reorder the whole crawl.

Pure module: no Scrapy, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

#: A response later than ``DELAY_FACTOR`` times the host's usual latency, and by at least
#: ``DELAY_MIN`` seconds, was held by the server: a rate limit (nginx ``limit_req`` in delay
#: mode, a CDN's) or a queue in front of it. The smallest rate limit that matters to one
#: request at a time holds requests 0.1 s (600 per minute); crawler CPU and loopback noise
#: stay well under 50 ms while the crawler has CPU to spare (a saturated one lags more:
#: see ``PACE_HOLD_SHARE``).
DELAY_MIN = 0.05
DELAY_FACTOR = 2.0
#: Each response not held shrinks a host's pace by this factor: a pace learnt too long (or
#: a limit the server lifted) comes back down, and the first held response corrects it.
PACE_DECAY = 0.95
#: A hold is a pace sample only where it is at least this share of the spacing it implies
#: (the gap since the previous request plus the hold): a server that paces holds a request
#: sent early by what is left of its pace, while a short hold after a long gap is as
#: likely the crawler's own lag. Measured on the real-server benchmark's CPU-bound web: a
#: saturated crawler measured 50 to 60 ms "holds" at a host whose pace was 6 ms, each after
#: 6 s without a request there, and learnt a pace of 6.5 s from them, which kept the web's
#: most valuable host to one request every 6 s for 12 s.
PACE_HOLD_SHARE = 0.1
#: A server that paces never starts two requests closer than its pace, so every response
#: bounds it from above: the pace is at most the gap since the previous request plus this
#: one's latency, which holds any hold (the crawler's own lag only lengthens both, and a
#: hold taken for a new connection's set-up is in it too). A host's pace never exceeds the
#: smallest such spacing seen, and that bound loosens by this factor per response, so a
#: server that slows down is followed. Measured on the real-server benchmark's CPU-bound
#: web: cmake's second page came 0.14 s after its first; its third, sent as the 2.7-MB
#: first page's 1.8 s of parsing began, "waited" 0.7 s after a 6-s gap, and the pace
#: learnt from it (1.5 s, 13 times the server's) kept the web's most valuable host to a
#: request a second for 20 s (and in another run, a request every 6 s for 85 s).
PACE_BOUND_GROWTH = 1.05
#: A request sent this many seconds after the host's previous response is "after idle": it
#: may need a new connection (the server closed the idle one), so it measures what a
#: session of back-to-back requests saves.
IDLE_GAP = 1.0
#: A paced host is ranked again this many seconds before its pace has passed: between the
#: frontier's decision and the request reaching the server there is the crawler's own
#: delay (0.13 s on average, 0.35 s at the 90th percentile, measured at nginx for Scrapy's
#: scheduler on the real-server benchmark), and a request a little early is only held.
PACE_LEAD = 0.25
#: A refusal (429, 503) grows a host's *refusal gap*, the time the crawler leaves between
#: the starts of two requests to it, to ``REFUSAL_GROW`` times what it was (and at least
#: the gap that was refused, and ``REFUSAL_GAP_MIN``); each response shrinks it by
#: ``REFUSAL_SHRINK``. Once it has settled just above the server's rate, a refusal comes
#: about every ln(1.5) / -ln(0.98) = 20 responses (~5% of requests), and the gap stays
#: within 1 to 1.5 times the server's spacing.
REFUSAL_GAP_MIN = 0.5
#: The refusal gap never grows beyond this: a server that keeps refusing at such spacing
#: is not pacing its clients.
REFUSAL_GAP_MAX = 30.0
#: A host that refused this many requests in a row, with the gap grown each time (0.5 s to
#: 2.5 s), does not rate-limit: it refuses everything (a broken or overloaded endpoint). Its
#: refused requests are then passed on (RetryMiddleware) rather than sent again.
REFUSAL_STREAK = 5
REFUSAL_GROW = 1.5
REFUSAL_SHRINK = 0.98
#: A host's typical page size moves towards each response's size in proportion of their
#: logarithms (a geometric mean): one 2.5-MB page among 20-KB ones raises it 2.6 times,
#: not 25. Measured on the real-server benchmark: one such page, whose 4 s of transfer
#: went straight into the host's time per page, ranked the web's most valuable host 500
#: times lower for 9 s. Bodies smaller than ``SIZE_MIN`` bytes are not pages.
SIZE_MIN = 1
#: A host's first page counts against the crawl's typical page (:class:`TypicalPage`) as
#: against this many pages of the host's own: a site's start page is often far from its
#: typical page (on the real-server benchmark's web, cmake's was 2.7 MB, 330 times its
#: typical 8 KB), and a host whose cost is taken from it alone ranks far too low until
#: its next pages correct it, which a host ranked low gets late. 2 is the ratio of the
#: within-site to the between-site variance of the logarithm of page sizes on the
#: benchmarks' two corpora (2.9 and 1.6): the weight an empirical-Bayes estimate gives a
#: prior mean.
PAGE_PRIOR_PAGES = 2.0


def ewma(previous: float, measured: float, alpha: float) -> float:
    """``Est(i) = alpha * Est(i-1) + (1 - alpha) * measured``."""
    return alpha * previous + (1.0 - alpha) * measured


def _update(estimate: float, measured: float, alpha: float, previous_samples: int) -> float:
    return measured if previous_samples == 0 else ewma(estimate, measured, alpha)


@dataclass(frozen=True, slots=True)
class CostParams:
    """The constants of the cost model, all settings (see :mod:`scrapy_twolevel.config`).

    The default times are optimistic priors: a host never measured looks fast, so it is
    opened, measured, and then ranked by what it really costs.
    """

    default_requests_per_connection: float = 50.0
    keepalive_speedup: float = 1.2
    alpha: float = 0.8
    default_connection_time: float = 0.01
    default_response_time: float = 0.01
    #: Requests the crawl has in flight at most (``TWOLEVEL_MAX_OPEN_HOSTS``): a second
    #: of one host's time is ``1 / connections`` of the crawl's connection capacity.
    connections: int = 1
    #: What a second of the crawler's CPU costs, in seconds of the crawl's whole
    #: connection capacity (binding-capability's ``r``; measured, see :mod:`.binding`).
    cpu_price: float = 1.0


@dataclass(frozen=True, slots=True)
class Measurement:
    """What one response tells about its host: measured by the host metrics middleware,
    folded into the host's estimates by :meth:`HostEstimate.observe`.

    ``latency``: seconds from sending the request to the reply's headers;
    ``new_connection``: the request opened a connection; ``served_on_connection``: requests
    served on that connection so far, this one included; ``closed_by_server``: the server
    closed it after this reply; ``remaining_on_connection``: requests it announced it
    still serves there (``Keep-Alive: max``; ``None``: not announced); ``elapsed``: seconds
    to the whole response (its body too; ``None``: ``latency``); ``processing``: crawler
    CPU seconds the response is expected to cost; ``forgiven_refusals``: the response is an
    error page whose URL's last refusals were its own (see
    :meth:`HostEstimate.forgive_refusals`); ``size``: the body's bytes (``None``: not
    known; then the whole ``elapsed`` is the host's time for the request); ``lag``: the
    seconds the crawler's event loop stalled between sending the request and reading its
    reply's headers, the most the crawler itself can have delayed the reply (see
    :mod:`~.lag`).
    """

    latency: float
    new_connection: bool
    served_on_connection: int
    closed_by_server: bool
    remaining_on_connection: int | None = None
    elapsed: float | None = None
    processing: float | None = None
    forgiven_refusals: int = 0
    size: int | None = None
    lag: float = 0.0


@dataclass(slots=True)
class HostEstimate:
    """What the crawl has learnt about one host.

    ``connection_time`` and ``response_time`` are in seconds; ``requests_per_connection``
    is how many requests the host serves on one connection before closing it. The
    defaults are a prior for a host not measured yet: a host's first measurement of a
    quantity replaces the default, later ones are averaged with :func:`ewma`. (Averaging
    the first sample with the default would keep a kept-alive host, which yields few
    connection samples, near the default for most of a crawl.)
    """

    connection_time: float
    response_time: float
    requests_per_connection: float
    keepalive: bool = True
    samples: int = 0
    connection_samples: int = 0
    response_samples: int = 0
    connection_count_samples: int = 0
    #: Share of requests that got a response (smoothed); scores are scaled by it.
    success_rate: float = 1.0
    outcome_samples: int = 0
    #: Seconds from sending a request to its reply's headers, for requests sent right after
    #: the host's previous response (the server's hold excluded): the host's time per
    #: request. (For a response of unknown size, to its whole response.) The host's time
    #: per page is this plus the body's transfer (:meth:`service`).
    service_time: float = 0.0
    service_samples: int = 0
    #: The same for requests sent after the host was idle (``IDLE_GAP``).
    idle_service_time: float = 0.0
    idle_samples: int = 0
    #: Seconds the server wants between the starts of two requests (its rate limit, learnt
    #: from the responses it held); 0: no limit seen.
    pace: float = 0.0
    pace_samples: int = 0
    #: Crawler CPU seconds a page of this host costs (parsing it, its callback, queueing
    #: its links): what it takes of the crawler, where the crawler is the bottleneck.
    processing_time: float = 0.0
    processing_samples: int = 0
    #: The host's typical page: the geometric mean of its bodies' bytes (``SIZE_MIN``).
    page_size: float = 0.0
    size_samples: int = 0
    #: Seconds and bytes of the bodies' transfers (after the headers), each decayed by
    #: ``alpha`` per response: their ratio is the host's seconds per byte. Big pages,
    #: which measure a bandwidth best, weigh most.
    transfer_seconds: float = 0.0
    transfer_bytes: float = 0.0
    #: Requests the host refused (429, 503) and the gap between request starts learnt from
    #: them (see :data:`REFUSAL_GROW`); 0: none refused.
    refusals: int = 0
    refusal_gap: float = 0.0
    #: How long the server held the last response (not saved).
    last_delay: float = 0.0
    #: The most the host's pace can be, from the spacings it let through
    #: (:data:`PACE_BOUND_GROWTH`; not saved).
    pace_bound: float = math.inf

    @classmethod
    def new(cls, params: CostParams) -> HostEstimate:
        return cls(
            connection_time=params.default_connection_time,
            response_time=params.default_response_time,
            requests_per_connection=params.default_requests_per_connection,
        )

    def observe(
        self,
        params: CostParams,
        measured: Measurement,
        *,
        gap: float | None = None,
        idle: bool = True,
        typical_page: float = 0.0,
    ) -> float:
        """Fold one response into the estimates; return how long the server held it.

        ``measured.latency`` is the time from sending the request to the reply's headers. On
        a reused connection it is the response time; on a new one it also holds the set-up,
        taken as ``latency - response_time`` (never below zero). If the host's response time
        was never measured, that first latency is split in the ratio of the two defaults.

        ``measured.elapsed`` is the time to the whole response (the body's transfer too;
        default: ``latency``), ``gap`` the time since the host's previous request was sent
        (``None``: none was), ``idle`` whether the host was idle before this request
        (``IDLE_GAP``). A response held by the server (see :data:`DELAY_MIN`) is a pace
        sample unless the crawler's own stall can explain it (``measured.lag``); the hold
        is left out of every time measured. Where ``measured.size`` is
        known, the body's transfer (``elapsed - latency``) is the host's bandwidth sample and
        the rest its time per request, and ``measured.processing`` is scaled to the host's
        typical page size (:attr:`page_size`). ``typical_page``: the crawl's typical page
        in bytes (0: none yet), which a host's first page is averaged with
        (:data:`PAGE_PRIOR_PAGES`).
        """
        new_connection = measured.new_connection
        served_on_connection = measured.served_on_connection
        closed_by_server = measured.closed_by_server
        remaining_on_connection = measured.remaining_on_connection
        elapsed, processing = measured.elapsed, measured.processing
        alpha = params.alpha
        latency = max(0.0, measured.latency)
        delay = self._held(latency, new_connection)
        # A hold no longer than the crawler's own loop stalled meanwhile may be a reply
        # read late, after long callbacks: left out of the host's times all the same, but
        # not taken for the server's pace.
        paced = delay if delay - measured.lag >= DELAY_MIN else 0.0
        self._pace(paced, gap, alpha, latency)
        latency -= delay
        served = max(0.0, (latency + delay if elapsed is None else elapsed) - delay)
        size = measured.size
        if size is not None and size >= 0:
            transfer = max(0.0, served - latency)
            served -= transfer
            self._transfer(transfer, size, alpha, typical_page)
            if processing is not None and size:
                # The response's CPU at the host's typical size: one huge page is not the
                # cost of the next.
                processing *= self.page_size / size
        if idle:
            self.idle_service_time = _update(
                self.idle_service_time, served, alpha, self.idle_samples
            )
            self.idle_samples += 1
        else:
            self.service_time = _update(self.service_time, served, alpha, self.service_samples)
            self.service_samples += 1
        if processing is not None:
            self.processing_time = _update(
                self.processing_time, processing, alpha, self.processing_samples
            )
            self.processing_samples += 1
        if new_connection:
            if self.response_samples == 0:
                share = params.default_connection_time / (
                    params.default_connection_time + params.default_response_time
                )
                connection = latency * share
                self._response(latency - connection, alpha)
            else:
                connection = max(0.0, latency - self.response_time)
            self.connection_time = _update(
                self.connection_time, connection, alpha, self.connection_samples
            )
            self.connection_samples += 1
        else:
            self._response(latency, alpha)
        total: float | None = None
        if remaining_on_connection is not None:
            total = served_on_connection + max(0, remaining_on_connection)
        elif closed_by_server:
            total = served_on_connection
        if total is not None:
            self.requests_per_connection = _update(
                self.requests_per_connection, total, alpha, self.connection_count_samples
            )
            self.connection_count_samples += 1
        elif served_on_connection > self.requests_per_connection:
            # The server has not closed yet: it serves at least this many.
            self.requests_per_connection = float(served_on_connection)
        if closed_by_server and served_on_connection <= 1:
            self.keepalive = False
        elif served_on_connection > 1:
            self.keepalive = True
        self.refusal_gap *= REFUSAL_SHRINK
        if measured.forgiven_refusals:
            self.forgive_refusals(measured.forgiven_refusals)
        self._outcome(1.0, alpha)
        self.samples += 1
        return delay

    def observe_refusal(self, gap: float | None, *, grow: bool = True) -> None:
        """The host refused a request (429, 503) sent ``gap`` seconds after the one before
        (``None``: none was): its requests must start further apart (unless ``grow`` is
        false: the refusal was one URL's, see ``TwoLevelFrontier.observe_refusal``)."""
        self.refusals += 1
        if grow:
            grown = max(self.refusal_gap * REFUSAL_GROW, gap or 0.0, REFUSAL_GAP_MIN)
            self.refusal_gap = min(grown, REFUSAL_GAP_MAX)

    def forgive_refusals(self, refusals: int) -> None:
        """Undo the growth of the gap by ``refusals`` refusals that were one URL's own (an
        error page, see :class:`~.failures.RefusedUrls`); a gap left below
        ``REFUSAL_GAP_MIN`` came from them alone and goes."""
        gap = self.refusal_gap / REFUSAL_GROW**refusals
        self.refusal_gap = gap if gap >= REFUSAL_GAP_MIN else 0.0

    def _held(self, latency: float, new_connection: bool) -> float:
        """Seconds the server held a response of ``latency`` (see :data:`DELAY_MIN`). On a
        new connection its usual set-up is part of the usual latency; until the set-up was
        measured once, the extra time is taken for it (a host that closes its connection
        after every request is paced from its second response on)."""
        if not self.response_samples:
            return 0.0
        usual = self.response_time
        if new_connection:
            if not self.connection_samples:
                return 0.0
            usual += self.connection_time
        if latency <= DELAY_FACTOR * usual or latency - usual < DELAY_MIN:
            return 0.0
        return latency - usual

    def _pace(self, delay: float, gap: float | None, alpha: float, latency: float) -> None:
        """A held response: the server's spacing between request starts (the gap between
        this request and the last, plus how much longer this one was held), if the hold is
        a real part of it (``PACE_HOLD_SHARE``); one not held: the pace shrinks
        (``PACE_DECAY``). Either way the pace stays within the spacings the host let
        through (``PACE_BOUND_GROWTH``)."""
        bound = self.pace_bound if gap is None else self.pace_bound * PACE_BOUND_GROWTH
        if gap is not None and delay > 0.0:
            sample = max(0.0, gap + delay - self.last_delay)
            if delay >= PACE_HOLD_SHARE * sample:
                sample = min(sample, bound)
                self.pace = _update(self.pace, sample, alpha, self.pace_samples)
                self.pace_samples += 1
        elif delay == 0.0:
            self.pace *= PACE_DECAY
        if gap is not None and gap + latency > 0.0:
            bound = min(bound, gap + latency)
        self.pace_bound = bound
        self.pace = min(self.pace, bound)
        self.last_delay = delay

    def _transfer(self, seconds: float, size: int, alpha: float, typical_page: float) -> None:
        if size >= SIZE_MIN:  # an empty body (a redirect, a HEAD) is no page
            logged = math.log(size)
            if self.size_samples:
                logged = ewma(math.log(max(SIZE_MIN, self.page_size)), logged, alpha)
            elif typical_page >= SIZE_MIN:
                prior = math.log(typical_page)
                logged = prior + (logged - prior) / (1.0 + PAGE_PRIOR_PAGES)
            self.page_size = math.exp(logged)
            self.size_samples += 1
        self.transfer_seconds = alpha * self.transfer_seconds + seconds
        self.transfer_bytes = alpha * self.transfer_bytes + size

    def transfer_time(self) -> float:
        """Seconds the host takes to send its typical page's body (0 until measured)."""
        if not self.transfer_bytes:
            return 0.0
        return self.page_size * self.transfer_seconds / self.transfer_bytes

    def service(self, params: CostParams) -> float:
        """Seconds of host time per page: per request (measured back to back, else after
        idle, else the prior ``default_connection_time + default_response_time``) plus
        the transfer of a typical page's body."""
        if self.service_samples:
            return self.service_time + self.transfer_time()
        if self.idle_samples:
            return self.idle_service_time + self.transfer_time()
        return params.default_connection_time + params.default_response_time

    def session_gain(self) -> float:
        """Seconds a request after idle costs more than one back to back: what a session
        of back-to-back requests saves per request (0 until both were measured)."""
        if not (self.service_samples and self.idle_samples):
            return 0.0
        return max(0.0, self.idle_service_time - self.service_time)

    def observe_failure(self, params: CostParams, *, elapsed: float, timeout: bool) -> None:
        """Fold a failed request into the estimates: a failure is evidence too.

        A timeout cost the host's whole wait, so ``elapsed`` becomes a response-time
        sample; a refused, reset or unresolvable connection cost a connection attempt, so
        it becomes a connection-time sample. Either way the success rate takes a 0
        (``S = alpha * S + (1 - alpha) * 0``), so a host that only fails sinks even when
        its failures are quick.
        """
        alpha = params.alpha
        elapsed = max(0.0, elapsed)
        if timeout:
            self._response(elapsed, alpha)
        else:
            self.connection_time = _update(
                self.connection_time, elapsed, alpha, self.connection_samples
            )
            self.connection_samples += 1
        self._outcome(0.0, alpha)
        self.samples += 1

    def _outcome(self, success: float, alpha: float) -> None:
        # Averaged from the prior of 1, not replaced by the first sample as the times are:
        # one early timeout must not sink a good host for the rest of the crawl.
        self.success_rate = ewma(self.success_rate, success, alpha)
        self.outcome_samples += 1

    def _response(self, measured: float, alpha: float) -> None:
        self.response_time = _update(self.response_time, measured, alpha, self.response_samples)
        self.response_samples += 1

    def batch_size(self, queued: int) -> int:
        """``P(s,i) = min(RequestsPerConnection(s,i), TaskURLs(s,i))``, at least 1 if queued."""
        if queued <= 0:
            return 0
        per_connection = max(1, math.floor(self.requests_per_connection + 0.5))
        return min(per_connection, queued)

    def session_time(self, batch: int, params: CostParams) -> float:
        """``T(s,i) = 2 * ConnectionTime + P * ResponseTime / p``.

        ``p`` is :attr:`CostParams.keepalive_speedup` for hosts that keep HTTP/1.1
        connections alive and 1 otherwise.
        """
        p = params.keepalive_speedup if self.keepalive else 1.0
        return 2.0 * self.connection_time + batch * self.response_time / p

    def to_dict(self) -> dict[str, float | int | bool]:
        """Plain JSON-able form, for JOBDIR and stats."""
        return {
            "connection_time": self.connection_time,
            "response_time": self.response_time,
            "requests_per_connection": self.requests_per_connection,
            "keepalive": self.keepalive,
            "samples": self.samples,
            "connection_samples": self.connection_samples,
            "response_samples": self.response_samples,
            "connection_count_samples": self.connection_count_samples,
            "success_rate": self.success_rate,
            "outcome_samples": self.outcome_samples,
            "service_time": self.service_time,
            "service_samples": self.service_samples,
            "idle_service_time": self.idle_service_time,
            "idle_samples": self.idle_samples,
            "pace": self.pace,
            "pace_samples": self.pace_samples,
            "processing_time": self.processing_time,
            "processing_samples": self.processing_samples,
            "page_size": self.page_size,
            "size_samples": self.size_samples,
            "transfer_seconds": self.transfer_seconds,
            "transfer_bytes": self.transfer_bytes,
            "refusals": self.refusals,
            "refusal_gap": self.refusal_gap,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HostEstimate:
        """Rebuild from :meth:`to_dict`; raises ``ValueError`` on anything else."""
        try:
            est = cls(
                connection_time=float(data["connection_time"]),
                response_time=float(data["response_time"]),
                requests_per_connection=float(data["requests_per_connection"]),
                keepalive=bool(data["keepalive"]),
                samples=int(data["samples"]),
                connection_samples=int(data["connection_samples"]),
                response_samples=int(data["response_samples"]),
                connection_count_samples=int(data["connection_count_samples"]),
                # Absent from files written before failures were measured.
                success_rate=float(data.get("success_rate", 1.0)),
                outcome_samples=int(data.get("outcome_samples", 0)),
                # Absent from files written before service times and pace were measured.
                **{name: kind(data.get(name, 0)) for name, kind in _MEASURED_FIELDS.items()},
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a host estimate: {data!r}") from exc
        values = (
            est.connection_time,
            est.response_time,
            est.requests_per_connection,
            est.service_time,
            est.idle_service_time,
            est.pace,
            est.processing_time,
            est.page_size,
            est.transfer_seconds,
            est.transfer_bytes,
            est.refusal_gap,
        )
        if not all(math.isfinite(v) and v >= 0 for v in values) or not (
            0.0 <= est.success_rate <= 1.0
        ):
            raise ValueError(f"host estimate out of range: {data!r}")
        return est


class TypicalPage:
    """The crawl's typical page: the geometric mean of every page's size so far, the
    prior a host's first page is weighed against (:data:`PAGE_PRIOR_PAGES`)."""

    def __init__(self) -> None:
        self._log_sum = 0.0
        self.pages = 0

    def add(self, size: int | None) -> None:
        if size is not None and size >= SIZE_MIN:
            self._log_sum += math.log(size)
            self.pages += 1

    @property
    def size(self) -> float:
        """Bytes (0 before the first page)."""
        return math.exp(self._log_sum / self.pages) if self.pages else 0.0


class ProcessingCost:
    """The crawler's own CPU seconds per response byte, measured over the whole crawl.

    Parsing a page, running its callback and queueing the links it yields cost the crawler
    roughly in proportion to the page's size. Every ``window`` responses, the CPU time the
    process used since the last window over the bytes it received in between is one sample
    (smoothed with ``alpha``); :meth:`response` turns a response's size into its expected
    cost. 0 until the first window is complete.
    """

    def __init__(
        self,
        cpu_clock: Callable[[], float],
        *,
        window: int = 16,
        alpha: float = 0.8,
    ) -> None:
        self._cpu = cpu_clock
        self._window = window
        self._alpha = alpha
        self._mark = cpu_clock()
        self._bytes = 0
        self._responses = 0
        self.per_byte = 0.0
        self.samples = 0

    def response(self, size: int) -> float:
        """Count a response of ``size`` bytes; its expected CPU cost in seconds."""
        self._bytes += size
        self._responses += 1
        if self._responses >= self._window and self._bytes:
            now = self._cpu()
            sample = max(0.0, now - self._mark) / self._bytes
            self.per_byte = _update(self.per_byte, sample, self._alpha, self.samples)
            self.samples += 1
            self._mark, self._bytes, self._responses = now, 0, 0
        return self.per_byte * size


_MEASURED_FIELDS: dict[str, type] = {
    "processing_time": float,
    "processing_samples": int,
    "page_size": float,
    "size_samples": int,
    "transfer_seconds": float,
    "transfer_bytes": float,
    "service_time": float,
    "service_samples": int,
    "idle_service_time": float,
    "idle_samples": int,
    "pace": float,
    "pace_samples": int,
    "refusals": int,
    "refusal_gap": float,
}


class SharedPrior(HostEstimate):
    """The estimate of every host not measured yet: one read-only object for all of them.

    A frontier of many small hosts would otherwise hold one default estimate per host
    (~100 bytes each). Writing to it raises, so that code which would change every
    unmeasured host at once fails loudly instead.
    """

    __slots__ = ()

    def __init__(self, params: CostParams) -> None:
        default = HostEstimate.new(params)
        for f in fields(HostEstimate):
            object.__setattr__(self, f.name, getattr(default, f.name))

    def __setattr__(self, name: str, value: object) -> None:
        # Also what observe() runs into: it only ever writes through attributes.
        raise AttributeError(
            "this estimate is shared by every host not measured yet; install a host's own "
            "with TwoLevelFrontier.set_estimate() or observe()"
        )
