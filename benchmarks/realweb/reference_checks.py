"""Checks of the references on synthetic webs, with hand-known answers: ``python -m
realweb.reference_checks`` (the smoke tests run it; it needs no nginx).

- the CPU-aware clairvoyant with a free core makes the same schedule as the CPU-free one;
- with a core that costs, it ends no earlier than the CPU-free one and no earlier than the
  sum of every page's CPU cost (one core);
- the CPU fit recovers the per-page and per-byte costs a synthetic crawl was given;
- a host that holds every request ``latency`` seconds (the Apache web) is served one page
  per ``BASE + latency`` by the clairvoyant, rate limit or not;
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
    check_latency()
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
