"""Checks of the references on synthetic webs, with hand-known answers: ``python -m
realweb.reference_checks`` (the smoke tests run it; it needs no nginx).

- the CPU-aware clairvoyant with a free core makes the same schedule as the CPU-free one;
- with a core that costs, it ends no earlier than the CPU-free one and no earlier than the
  sum of every page's CPU cost (one core);
- the CPU fit recovers the per-page and per-byte costs a synthetic crawl was given.
"""

from __future__ import annotations

import random
import sys

from realweb import clairvoyant
from realweb.cpu_model import CpuModel, fit
from realweb.judge import Request
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
    print("references: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
