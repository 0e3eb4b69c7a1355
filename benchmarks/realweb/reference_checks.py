"""Checks of the references on synthetic webs, with hand-known answers: ``python -m
realweb.reference_checks`` (the smoke tests run it; it needs no nginx).

- the CPU-aware clairvoyant with a free core makes the same schedule as the CPU-free one;
- with a core that costs, it ends no earlier than the CPU-free one and no earlier than the
  sum of every page's CPU cost (one core);
- the CPU fit recovers the per-page and per-byte costs a synthetic crawl was given;
- a host that holds every request ``latency`` seconds (the Apache web) is served one page
  per ``BASE + latency`` by the clairvoyant, rate limit or not;
- a host with a burst limit is sent its burst, then nothing until the window ends, by
  both clairvoyants;
- given the CPU of a TLS handshake, the CPU fit recovers the per-page and per-byte costs
  of a synthetic crawl that also paid handshakes, and the CPU-aware clairvoyant pays a
  handshake when a connection is new, spent or has been idle past the host's keep-alive
  timeout;
- the CPU-aware clairvoyant on one loop with Scrapy's backlog (:func:`clairvoyant.schedule_loop`)
  handles every page the unbounded one does, never sooner than the CPU of the pages before
  it, and, with a backlog of nothing, sends no request while a received response waits
  (worked by hand on two hosts), and a replayed crawl's order is sent as it was;
- Apache's access log lines are rewritten in the judge's format, field by field.
"""

from __future__ import annotations

import random
import sys
import tempfile
from pathlib import Path

from realweb import clairvoyant
from realweb.apache import normalise_log
from realweb.cpu_model import CpuModel, fit
from realweb.judge import Request, read_log
from realweb.servers import HostProfile


def synthetic_web(seed: int) -> tuple[dict, list[str], list[HostProfile]]:
    rng = random.Random(seed)
    sites = {}
    for s in range(6):
        n = rng.randint(5, 60)
        pages = {
            f"p{i}": [
                rng.random(),
                rng.randint(3_000, 300_000),
                [f"p{rng.randrange(n)}" for _ in range(5)],
            ]
            for i in range(n)
        }
        sites[f"s{s}"] = {"pages": pages, "index": "p0"}
    profiles = [
        HostProfile(f"127.0.1.{i}", rng.uniform(720, 12_000), 10, rng.choice([None, 5e5]))
        for i in range(6)
    ]
    return {"sites": sites}, list(sites), profiles


def main() -> int:
    for seed in range(5):
        corpus, names, profiles = synthetic_web(seed)
        free = clairvoyant.schedule(corpus, names, profiles, 8, 1e9)
        same = clairvoyant.schedule_cpu(corpus, names, profiles, 8, 1e9, CpuModel(0.0, 0.0, 0))
        assert same == free, f"seed {seed}: a free core changed the schedule"
        model = CpuModel(0.02, 1e-7, 0)
        paid = clairvoyant.schedule_cpu(corpus, names, profiles, 8, 1e9, model)
        total = sum(model.cost(p[1]) for s in corpus["sites"].values() for p in s["pages"].values())
        assert len(paid) == len(free), f"seed {seed}: pages differ"
        assert paid[-1][0] >= max(free[-1][0], total), f"seed {seed}: ended too early"
        loop = clairvoyant.schedule_loop(corpus, names, profiles, 8, 1e9, model)
        assert len(loop) == len(paid), f"seed {seed}: the one-loop schedule lost pages"
        assert loop[-1][0] >= total, f"seed {seed}: the loop handled pages faster than its core"
    rng = random.Random(0)
    requests, t = [], 0.0
    for _ in range(300):
        t += 0.05
        requests.append(Request(t - 0.005, t, 1, 1, "h", 200, rng.randint(1_000, 200_000), "/"))
    samples = [
        [100 + k / 10, sum(0.004 + 2e-8 * r.bytes for r in requests if r.end <= k / 10)]
        for k in range(170)
    ]
    fitted = fit(samples, requests, 100.0)
    assert fitted is not None
    assert abs(fitted.per_page_s - 0.004) < 1e-6 and abs(fitted.per_byte_s - 2e-8) < 1e-11, fitted
    check_handshake_fit()
    check_latency()
    check_burst()
    check_handshakes()
    check_loop()
    check_apache_log()
    print("references: ok")
    return 0


def check_latency() -> None:
    """One host, a chain of 4 pages, 0.25 s of latency each, no rate limit: the pages end
    at k * (BASE + 0.25), k = 1..4."""
    pages = {f"p{i}": [0.25, 1000, [f"p{i + 1}"] if i < 3 else []] for i in range(4)}
    corpus = {"sites": {"s": {"pages": pages, "index": "p0"}}}
    profile = HostProfile("127.0.1.1", 0.0, 10, None, latency=0.25)
    curve = clairvoyant.schedule(corpus, ["s"], [profile], 8, 1e9)
    step = clairvoyant.BASE + 0.25
    expected = [(k * step, 0.25 * k) for k in range(1, 5)]
    assert all(
        abs(t - te) < 1e-9 and abs(q - qe) < 1e-9
        for (t, q), (te, qe) in zip(curve, expected, strict=True)
    ), curve
    # Scaled 20x faster (the CPU-bound regime), the latency is 20x shorter.
    assert abs(profile.scaled(20).latency - 0.0125) < 1e-12


def check_handshake_fit() -> None:
    """A synthetic crawl that pays 4 ms a page, 20 ns a byte and 3 ms a new connection to
    the HTTPS host ``t`` (its connections serve 1 to 4 requests): given the handshake's
    cost, the fit recovers the other two exactly, and keeps the handshake's."""
    rng = random.Random(1)
    requests, t, left = [], 0.0, 0
    for _ in range(400):
        t += 0.05
        host = rng.choice(["t", "h"])
        if host == "t":
            left = left - 1 if left > 0 else rng.randint(0, 3)
            n = 4 - left  # the request's number on its connection
        else:
            n = 2
        requests.append(Request(t - 0.005, t, 1, n, host, 200, rng.randint(1_000, 200_000), "/"))

    def cost(r: Request) -> float:
        return 0.004 + 2e-8 * r.bytes + (0.003 if r.host == "t" and r.on_connection == 1 else 0)

    samples = [
        [100 + k / 10, sum(cost(r) for r in requests if r.end <= k / 10)] for k in range(210)
    ]
    fitted = fit(samples, requests, 100.0, tls_hosts={"t"}, per_handshake_s=0.003)
    assert fitted is not None
    assert abs(fitted.per_page_s - 0.004) < 1e-6, fitted
    assert abs(fitted.per_byte_s - 2e-8) < 1e-11, fitted
    assert fitted.per_handshake_s == 0.003, fitted
    assert abs(fitted.cost(1000, handshake=True) - fitted.cost(1000) - 0.003) < 1e-12
    # Not told of them, the fit puts the handshakes' CPU in the other two.
    plain = fit(samples, requests, 100.0)
    assert plain is not None and plain.per_handshake_s == 0.0, plain
    assert plain.per_page_s > fitted.per_page_s, plain


def check_handshakes() -> None:
    """One HTTPS host, a chain of 4 pages with no latency, on a core that pays 10 ms a page
    and 100 ms a handshake. Keep-alive 2: requests 1 and 3 open connections, so the pages
    are handled at 0.112, 0.124, 0.236, 0.248 (each fetch takes BASE). Keep-alive 100 but
    an idle timeout of 50 ms: the connection idles 110 ms while the core handles each
    page, so every request opens one: 0.112, 0.224, 0.336, 0.448. Over HTTP, none."""
    pages = {f"p{i}": [0.25, 1000, [f"p{i + 1}"] if i < 3 else []] for i in range(4)}
    corpus = {"sites": {"s": {"pages": pages, "index": "p0"}}}
    model = CpuModel(0.01, 0.0, 0, per_handshake_s=0.1)
    cases = [
        (HostProfile("127.0.1.1", 0.0, 2, None, tls=True), [0.112, 0.124, 0.236, 0.248]),
        (
            HostProfile("127.0.1.1", 0.0, 100, None, keepalive_timeout=0.05, tls=True),
            [0.112, 0.224, 0.336, 0.448],
        ),
        (HostProfile("127.0.1.1", 0.0, 2, None), [0.012, 0.024, 0.036, 0.048]),
    ]
    for profile, ends in cases:
        curve = clairvoyant.schedule_cpu(corpus, ["s"], [profile], 8, 1e9, model)
        assert [round(t, 9) for t, _ in curve] == ends, (profile, curve)


def check_loop() -> None:
    """Hosts a (pages of quality 0.5) and b (0.25), each a chain of 2 pages of 1,000 bytes,
    no rate limit; 0.1 s of CPU a page; a fetch takes BASE (0.002). Both indexes go at 0
    and end at 0.002; a's is handled first (more quality per CPU second): 0.102.
    - Backlog 0: b's index, received, is still held, so a1 waits; b's is handled at 0.202,
      then a1 and b1 go together (end 0.204) and are handled at 0.304 and 0.404.
    - Unbounded: a1 goes at 0.102 (ends 0.104) while b's index waits; b's is handled at
      0.202 and b1 goes (ends 0.204); a1 is handled at 0.302, b1 at 0.402."""
    sites = {
        name: {
            "pages": {"p0": [q, 1000, ["p1"]], "p1": [q, 1000, []]},
            "index": "p0",
        }
        for name, q in (("a", 0.5), ("b", 0.25))
    }
    profiles = [HostProfile(f"127.0.1.{i}", 0.0, 10, None) for i in (1, 2)]
    model = CpuModel(0.1, 0.0, 0)
    for backlog, ends in ((0, [0.102, 0.202, 0.304, 0.404]), (1e18, [0.102, 0.202, 0.302, 0.402])):
        curve = clairvoyant.schedule_loop(
            {"sites": sites}, ["a", "b"], profiles, 8, 1e9, model, backlog
        )
        assert [round(t, 9) for t, _ in curve] == ends, (backlog, curve)
        assert [round(q, 9) for _, q in curve] == [0.5, 0.75, 1.25, 1.5], curve
    # A replayed order: one host, p0 linking to p1 (0.5) and p2 (0.1), sent p0, p2, p1.
    # The clairvoyant would send p1 before p2; the replay sends p2 at 0.102 (handled at
    # 0.204), then p1 (handled at 0.306). A page the crawl never sent (p3) is never sent.
    pages = {"p0": [0.2, 1000, ["p1", "p2", "p3"]], "p1": [0.5, 1000, []]}
    pages |= {"p2": [0.1, 1000, []], "p3": [0.9, 1000, []]}
    corpus = {"sites": {"a": {"pages": pages, "index": "p0"}}}
    order = [("a", "p0"), ("a", "p2"), ("a", "p1")]
    curve = clairvoyant.schedule_loop(corpus, ["a"], profiles[:1], 8, 1e9, model, order=order)
    assert [round(t, 9) for t, _ in curve] == [0.102, 0.204, 0.306], curve
    assert [round(q, 9) for _, q in curve] == [0.2, 0.3, 0.8], curve


def check_burst() -> None:
    """One host, a chain of 4 pages, 0.25 s of latency, at most 2 requests in a 10-s
    window: sent at 0 (the window opens) and BASE + 0.25, then at 10 (the next window) and
    10 + BASE + 0.25; so they end at 0.252, 0.504, 10.252, 10.504. Scaled 20x, the burst
    is 40 in the same window."""
    pages = {f"p{i}": [0.25, 1000, [f"p{i + 1}"] if i < 3 else []] for i in range(4)}
    corpus = {"sites": {"s": {"pages": pages, "index": "p0"}}}
    profile = HostProfile("127.0.1.1", 0.0, 10, None, latency=0.25, burst=2, burst_window=10.0)
    step = clairvoyant.BASE + 0.25
    ends = [step, 2 * step, 10 + step, 10 + 2 * step]
    free = clairvoyant.schedule(corpus, ["s"], [profile], 8, 1e9)
    paid = clairvoyant.schedule_cpu(corpus, ["s"], [profile], 8, 1e9, CpuModel(0.0, 0.0, 0))
    for curve in (free, paid):
        assert [round(t, 9) for t, _ in curve] == [round(t, 9) for t in ends], curve
    # Not within the horizon: the wait past it ends the schedule.
    assert len(clairvoyant.schedule(corpus, ["s"], [profile], 8, 5.0)) == 2
    scaled = profile.scaled(20)
    assert scaled.burst == 40 and scaled.burst_window == 10.0, scaled


def check_apache_log() -> None:
    """``%{end:sec}t.%{end:msec_frac}t %D %{remote}p %k %A %>s %B "%r"`` to the judge's
    fields: end 100.250, 0.125 s, connection = port 40000, 3rd request on it (%k = 2)."""
    with tempfile.TemporaryDirectory() as tmp:
        raw, out = Path(tmp, "raw.log"), Path(tmp, "access.log")
        raw.write_text(
            '100.250 125000 40000 2 127.0.1.3 200 5120 "GET /a/b%20c.html HTTP/1.1"\n'
            "a line Apache would not write\n"
            '101.000 1000 40002 0 127.0.1.4 404 0 "GET /gone.html HTTP/1.1"\n'
            # logged 0.4 ms after the next request on its connection began (at 101.9996)
            '102.000 500000 40004 0 127.0.1.5 200 10 "GET /x.html HTTP/1.1"\n'
            '102.200 200400 40004 1 127.0.1.5 200 10 "GET /y.html HTTP/1.1"\n'
        )
        assert normalise_log(raw, out) == 4
        first, second, third, fourth = read_log(out)
    # Moved back to the next one's beginning: they touch, they do not overlap.
    assert abs(third.end - fourth.start) < 1e-6 and third.uri == "/x.html", (third, fourth)
    assert abs((third.end - third.start) - 0.4996) < 1e-6, third
    assert first == Request(0.0, 0.125, 40000, 3, "127.0.1.3", 200, 5120, "/a/b%20c.html"), first
    assert second.connection == 40002 and second.on_connection == 1 and second.status == 404
    assert abs(second.start - (101.0 - 0.001 - 100.125)) < 1e-9, second


if __name__ == "__main__":
    sys.exit(main())
