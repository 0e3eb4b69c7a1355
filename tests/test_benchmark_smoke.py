"""The maintained benchmarks still run against the package (a smoke run each, in a
subprocess; no test imports a benchmark). Their figures are judged from committed runs,
not here: these only fail when a benchmark no longer runs (it reached into an internal
that moved, say)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.glue

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def run(script: str, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.parametrize("variant", ["twolevel-cc-mem", "twolevel-cc-disk", "stock-spq-mem"])
def test_scheduler_overhead_profiles_one_small_configuration(variant, tmp_path):
    """Enqueue and drain 2,000 requests over 20 hosts (the drain finishes each request as
    the benchmark documents)."""
    out = run(
        "scheduler_overhead.py",
        *("--profile", variant, "--n", "2000", "--hosts", "20", "--out-dir", str(tmp_path)),
    )
    assert "function calls" in out  # cProfile's report of the run
    assert (tmp_path / f"profile_{variant}_2000_20.txt").exists()


def test_the_efficiency_simulation_runs_its_quick_size():
    out = run("efficiency_sim.py", "--quick", "--extra-seeds", "1")  # prints, writes nothing
    assert "crawl-capability" in out


def test_the_broad_crawl_runs_a_small_size(tmp_path):
    """Ours crawls 100 hosts, is killed and resumed, and the check of its JOBDIR (which
    reads the package's frontier file) finds every pre-loaded URL."""
    run(
        "broad_crawl.py",
        "--sizes",
        "100x2000",
        "--window",
        "2",
        "--resume-window",
        "2",
        "--no-figure",
        "--variants",
        "ours",  # Scrapy's own scheduler is not the subject: its runs are in the results
        "--out-dir",
        str(tmp_path),
        "--name",
        "smoke",
    )
    runs = {r["variant"]: r for r in json.loads((tmp_path / "smoke.json").read_text())["runs"]}
    ours = runs["ours"]
    assert ours["failure"] is None and ours["steady_pages_per_s"] > 0
    assert ours["max_in_flight_per_host"] == 1
    assert ours["resume_check"]["preloaded_lost"] == 0
    assert ours["resume"]["startup_s"] is not None
    assert set(runs) == {"ours"}


def test_the_real_server_references_pass_their_checks():
    """The clairvoyant references and the CPU fit of the real-server benchmark, on
    synthetic webs with hand-known answers (no nginx needed)."""
    proc = subprocess.run(
        [sys.executable, "-m", "realweb.reference_checks"],
        cwd=BENCHMARKS,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "references: ok" in proc.stdout
