"""A soak: a distributed crawl of over an hour, with rebalancing and node restarts.

Issue 21's soak: a distributed crawl of at least an hour on the test web, with
rebalancing and periodic node restarts; Redis memory per URL at the end against at 10
minutes (flat: within 10 %), and ``INFO`` checked for evictions.

The run:

- **Redis**: a private ``redis-server`` on a free port, keeping nothing on disk, with
  ``latency-tracking`` off (Redis 7's per-command latency histograms take ~1 MB as the
  first commands of each name arrive: Redis's fixed cost, not the crawl's, and 30 B per
  URL at 30,000 URLs). Its ``maxmemory-policy``, ``maxmemory`` and ``evicted_keys`` are
  read from ``INFO`` at start-up, and the evictions again at the end (there must be none).
- **Web**: the test web in its own process (its counts are the ground truth), every host
  answering in ``RESPONSE_DELAY`` (1 s) over kept-alive connections; ``LINKS_PER_PAGE`` 2
  (the chain to the host's next page and one random link), so pages keep being discovered
  until the last minutes of the crawl, not all in its first ones. Its size comes from a
  formula: a node with ``CONCURRENT_REQUESTS`` *c* keeps *c* hosts busy, one request
  each, so 3 nodes fetch ``EFFICIENCY`` x 3 *c* / ``RESPONSE_DELAY`` pages a second
  (``EFFICIENCY`` 0.95, measured here by runs of 3 and 12 minutes on a 2-core machine:
  18 pages a second while crawling, less the start, the restarts and the tail); the web
  has that rate times ``--minutes`` pages (about 67,000 for 65 minutes), ``minutes x
  60 / 40`` pages per host (10 to 100: the last host's chain must be short beside the
  crawl; 98 for 65 minutes, so about 680 hosts), seeds on ``4 x 3 c`` hosts.
- **Nodes**: 3 real ``scrapy crawl testweb`` processes of ``example_project/`` (ids ``n0``,
  ``n1``, ``n2``, one crawl id, each with a JOBDIR of its own, plain ``start_urls``
  semantics through ``crawl_helpers.DontFilterStarts``), ``CONCURRENT_REQUESTS`` 6,
  ``TWOLEVEL_REBALANCE_INTERVAL`` 30 s. Every ``--restart-every`` seconds (300) one node
  in turn is stopped, alternately with SIGINT (Scrapy's graceful stop) and with SIGKILL,
  and started again under the same id ``--down-for`` seconds later (15: past the ttl, so
  a killed node is reaped first). The SIGKILL is the node's own, on the driver's SIGUSR2
  (:class:`KillOnSignal`): it first writes how many requests it had leased
  (``crawl_helpers.record_leases``), which bounds the pages fetched again. Once a node
  has ended by itself (the crawl is over) nobody is stopped any more.
- **Samples**, every 30 s: Redis ``used_memory`` (and more of ``INFO memory``), the
  crawl's seen keys (the sum over ``seen:*`` of their length / 16, as ``scrapy twolevel
  status`` counts them, read with the values; the unique keys too), pending requests,
  pages fetched (the server's count), and every key by kind (``q:*``, ``seen:*``,
  ``inbox:*``, the crawl's other keys, the recrawl history, any other) with their
  ``MEMORY USAGE``.

Judged, at 10 minutes and at the end (every node gone, before anything is cleaned):

- memory per URL, ``(used_memory - used_memory before the crawl) / seen keys`` (issue
  21's measure), flat if within 10 %. At this scale it is not expected to be: at 10
  minutes it holds the queued requests (``q:*``, ~340 B per pending request) and the
  crawl's registry (bucket table and holders, ~0.9 MB for ``TWOLEVEL_BUCKETS`` 16384, a
  fixed size), both gone at the end; so the same is reported per kind of key, for
  Redis's own memory (client buffers, script cache, the rest), and for the keys the
  crawl keeps (``seen:*``, the recrawl history, keys of no crawl): what a leak in its
  data would grow: flat if within 10 % too, and not growing if at most 10 % above (a
  fixed cost per key, ~60 B, shared by more URLs as the crawl goes, makes it fall);
- the seen log's bytes against 16 x its unique keys (duplicate appends), and the keys
  left at the end besides ``seen:*``;
- from the server: pages lost (reachable, never fetched), fetches beyond the first
  (bounded by the leases of the killed nodes and the leases dropped by reaped ones),
  requests overlapping at a host and the most ever in flight at one (1);
- every node's last run ends by itself, exit 0, finish reason ``finished``; every
  stop ends as sent (exit 0 after SIGINT, -9 after the kill); no node log holds a
  traceback nor an ERROR line (every run's log is kept in the work directory); the
  leader rebalanced the crawl at least once; no live node was reaped (none rejoined).

A hard deadline (``--deadline``, by default ``--minutes`` x 1.5 + 10 min) kills
everything and reports a failure; every process started here is stopped on the way out,
the private Redis too.

Usage::

    python benchmarks/soak.py              # about 65 minutes
    python benchmarks/soak.py --quick      # about 3.5 minutes, same code path; writes nothing

``--quick`` crawls a 3-minute web, stops a node every 45 s (down 12 s), samples every
10 s and takes its early point at 1 minute; ``--minutes``, ``--restart-every``,
``--down-for`` and ``--early`` override either set. Node logs, stats and lease counts go
to ``--workdir`` (``/tmp/twolevel-soak/<time>/``; a quick run leaves its JSON and plot
there). A full run writes ``benchmarks/results/soak.json`` (parameters, every sample,
restart and node run), ``benchmarks/results/soak.md``, ``docs/results/soak.inc`` and
``docs/results/soak.png`` (memory per URL and seen URLs over time, restarts marked).
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import BENCH, RESULTS, ROOT, report

PROJECT = ROOT / "example_project"
TESTS = ROOT / "tests"
NODES = ("n0", "n1", "n2")
RESPONSE_DELAY = 1.0
CONNECT_DELAY = 0.002
LINKS_PER_PAGE = 2
#: Share of 3 c / RESPONSE_DELAY pages per second the crawl achieves overall (--quick runs).
EFFICIENCY = 0.95
REBALANCE_INTERVAL = 30.0
FLAT = 0.10
KEY_SIZE = 16
SCAN = 1000


# -- in the nodes -----------------------------------------------------------------------------


class KillOnSignal:
    """Extension (in a node): on SIGUSR2, write the node's outstanding leases to
    LEASES_FILE (:func:`crawl_helpers.record_leases`), then SIGKILL itself, from the
    reactor, so nothing runs between the count and the kill."""

    def __init__(self, crawler: Any) -> None:
        self.crawler = crawler
        signal.signal(signal.SIGUSR2, self._signalled)

    @classmethod
    def from_crawler(cls, crawler: Any) -> KillOnSignal:
        return cls(crawler)

    def _signalled(self, signum: int, frame: Any) -> None:
        from twisted.internet import reactor

        reactor.callFromThread(self._kill)

    def _kill(self) -> None:
        from crawl_helpers import record_leases

        try:
            record_leases(self.crawler)
        finally:
            os.kill(os.getpid(), signal.SIGKILL)


# -- the web ----------------------------------------------------------------------------------


@dataclass
class WebPlan:
    hosts: int
    pages_per_host: int
    seeds: int
    rate: float  # pages per second the formula expects

    @classmethod
    def for_minutes(cls, minutes: float, concurrency: int) -> WebPlan:
        rate = EFFICIENCY * len(NODES) * concurrency / RESPONSE_DELAY
        per_host = min(100, max(10, round(minutes * 60 / 40 / RESPONSE_DELAY)))
        hosts = max(math.ceil(rate * minutes * 60 / per_host), 2)
        return cls(hosts, per_host, min(hosts, 4 * len(NODES) * concurrency), rate)

    def web(self) -> Any:
        from scrapy_twolevel.testweb.web import HostProfile, generate_web

        profile = HostProfile(connect_delay=CONNECT_DELAY, response_delay=RESPONSE_DELAY)
        return generate_web(
            self.hosts,
            self.pages_per_host,
            seed=21,
            n_seeds=self.seeds,
            links_per_page=LINKS_PER_PAGE,
            host_profiles=[profile] * self.hosts,
        )


# -- the nodes --------------------------------------------------------------------------------


@dataclass
class Run:
    """One process of a node: started, then ended by itself, by SIGINT or by a kill."""

    node: str
    number: int
    started_s: float
    proc: subprocess.Popen[bytes]
    log: Path
    stats_file: Path
    leases_file: Path
    ended_s: float | None = None
    ended_by: str | None = None  # "itself", "sigint", "kill", "abort"
    exit_code: int | None = None
    leases: int | None = None

    def record(self) -> dict[str, Any]:
        stats = json.loads(self.stats_file.read_text()) if self.stats_file.exists() else {}
        log = self.log.read_text(errors="replace") if self.log.exists() else ""
        keep = (
            "downloader/response_count",
            "twolevel/redis/reaped",
            "twolevel/redis/rejoined",
            "twolevel/redis/leases_dropped",
            "twolevel/redis/rebalanced",
            "twolevel/redis/buckets_taken",
            "twolevel/redis/buckets_given",
            "twolevel/redis/sync_errors",
            "twolevel/redis/apply_errors",
        )
        return {
            "node": self.node,
            "run": self.number,
            "started_s": round(self.started_s, 1),
            "ended_s": None if self.ended_s is None else round(self.ended_s, 1),
            "ended_by": self.ended_by,
            "exit_code": self.exit_code,
            "finish_reason": stats.get("finish_reason"),
            "leases_at_kill": self.leases,
            "stats": {k: stats[k] for k in keep if k in stats},
            "tracebacks": log.count("Traceback"),
            # From the log: a killed run's stats die with it.
            "rebalances": log.count("Rebalanced the crawl by pending requests"),
            "buckets_rebalanced": sum(
                int(line.split("pending requests: ", 1)[1].split(" ", 1)[0])
                for line in log.splitlines()
                if "Rebalanced the crawl by pending requests: " in line
            ),
            "reaps": log.count("Reaped node(s) "),
            "errors": sum(" ERROR: " in line for line in log.splitlines()),
            "log": str(self.log),
        }


def _die_with_parent() -> None:
    """In a node, before exec: SIGKILL it if the driver dies (Linux), so none outlives it."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class Nodes:
    """The three nodes' processes, started, stopped and started again under one id each."""

    def __init__(
        self, workdir: Path, redis_url: str, crawl_id: str, seeds: list[str], concurrency: int
    ) -> None:
        self.workdir = workdir
        self.redis_url = redis_url
        self.crawl_id = crawl_id
        self.seeds = seeds
        self.concurrency = concurrency
        self.runs: list[Run] = []
        self.current: dict[str, Run] = {}
        self.started = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self.started

    def start(self, name: str) -> Run:
        number = sum(r.node == name for r in self.runs) + 1
        files = {
            what: self.workdir / f"{name}.{number}.{what}"
            for what in ("log", "stats.json", "leases.json")
        }
        settings: dict[str, Any] = {
            "EXTENSIONS": {"crawl_helpers.StatsFile": 0, "soak.KillOnSignal": 1},
            "SPIDER_MIDDLEWARES": {"crawl_helpers.DontFilterStarts": 0},
            "STATS_FILE": str(files["stats.json"]),
            "LEASES_FILE": str(files["leases.json"]),
            "TWOLEVEL_TESTWEB_SEEDS": ",".join(self.seeds),
            "TWOLEVEL_REDIS_URL": self.redis_url,
            "TWOLEVEL_CRAWL_ID": self.crawl_id,
            "TWOLEVEL_NODE_ID": name,
            "TWOLEVEL_REBALANCE_INTERVAL": REBALANCE_INTERVAL,
            "CONCURRENT_REQUESTS": self.concurrency,
            "JOBDIR": str(self.workdir / "jobs" / name),
            "LOG_LEVEL": "INFO",
        }
        cmd = [sys.executable, "-m", "scrapy.cmdline", "crawl", "testweb"]
        for key, value in settings.items():
            cmd += ["-s", f"{key}={value if isinstance(value, str) else json.dumps(value)}"]
        path = os.pathsep.join([str(TESTS), str(BENCH), str(PROJECT)])
        env = {**os.environ, "PYTHONPATH": path}
        with open(files["log"], "wb") as out:
            proc = subprocess.Popen(
                cmd,
                cwd=PROJECT,
                stdout=subprocess.DEVNULL,
                stderr=out,
                env=env,
                start_new_session=True,  # a Ctrl-C of the driver is not a node's SIGINT
                preexec_fn=_die_with_parent,
            )
        run = Run(
            name,
            number,
            self.now(),
            proc,
            files["log"],
            files["stats.json"],
            files["leases.json"],
        )
        self.runs.append(run)
        self.current[name] = run
        return run

    def poll(self) -> list[Run]:
        """The current runs that ended by themselves since the last call."""
        ended = []
        for run in self.current.values():
            if run.ended_s is None and run.proc.poll() is not None:
                run.ended_s, run.ended_by, run.exit_code = self.now(), "itself", run.proc.returncode
                ended.append(run)
        return ended

    def stop(self, name: str, how: str, timeout: float = 120.0) -> Run:
        """Stop ``name``'s current run by SIGINT (graceful) or its own SIGKILL."""
        run = self.current[name]
        if how == "sigint":
            run.proc.send_signal(signal.SIGINT)
        else:
            run.proc.send_signal(signal.SIGUSR2)  # KillOnSignal: leases, then SIGKILL
            timeout = 15.0
        try:
            run.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            run.proc.kill()  # counted below: an exit code that is not the expected one
            run.proc.wait()
        run.ended_s, run.ended_by, run.exit_code = self.now(), how, run.proc.returncode
        if run.leases_file.exists():
            run.leases = int(json.loads(run.leases_file.read_text())["leases"])
        return run

    def alive(self) -> list[Run]:
        """The current runs not seen to end yet (by :meth:`poll`, :meth:`stop`...)."""
        return [r for r in self.current.values() if r.ended_s is None]

    def abort(self) -> None:
        """SIGKILL every run still going (the deadline, an error, Ctrl-C)."""
        for run in self.current.values():
            if run.proc.poll() is None:
                run.proc.kill()
                run.proc.wait()
                run.ended_s, run.ended_by, run.exit_code = self.now(), "abort", run.proc.returncode


# -- Redis samples ----------------------------------------------------------------------------

KINDS = ("q", "seen", "inbox", "crawl (other)", "history", "other")
#: ``INFO memory`` fields kept with each sample (clients and scripts are in used_memory).
MEMORY_FIELDS = (
    "used_memory_overhead",
    "used_memory_dataset",
    "used_memory_startup",
    "used_memory_scripts",
    "number_of_cached_scripts",
    "mem_clients_normal",
    "used_memory_peak",
    "used_memory_vm_total",
    "mem_fragmentation_ratio",
)


def kind_of(key: bytes, crawl_id: str) -> str:
    prefix = f"twolevel:{crawl_id}:".encode()
    if key.startswith(prefix):
        rest = key[len(prefix) :]
        for kind in ("q", "seen", "inbox"):
            if rest.startswith(kind.encode() + b":"):
                return kind
        return "crawl (other)"
    if key.startswith(f"twolevel-history:{crawl_id}:".encode()):
        return "history"
    return "other"


def sample(
    client: Any, crawl_id: str, t: float, fetched: int | None, *, names: bool = False
) -> dict[str, Any]:
    """Redis's memory, the crawl's seen keys and every key's kind, count and size now
    (``names``: with the names of the keys other than ``seen:*``)."""
    from scrapy_twolevel.distributed.node import status

    info = client.info()
    state = status(client, crawl_id)
    memory = {k: info[k] for k in MEMORY_FIELDS if k in info}
    keys = list(client.scan_iter("*", count=SCAN))
    count = dict.fromkeys(KINDS, 0)
    size = dict.fromkeys(KINDS, 0)
    seen_keys = [k for k in keys if kind_of(k, crawl_id) == "seen"]
    for start in range(0, len(keys), SCAN):
        chunk = keys[start : start + SCAN]
        pipe = client.pipeline(transaction=False)
        for key in chunk:
            pipe.memory_usage(key, samples=0)
        for key, used in zip(chunk, pipe.execute(), strict=True):
            kind = kind_of(key, crawl_id)
            count[kind] += 1
            size[kind] += int(used or 0)  # None: deleted since the scan
    unique: set[bytes] = set()
    seen_bytes = 0
    for start in range(0, len(seen_keys), SCAN):
        for value in client.mget(seen_keys[start : start + SCAN]):
            value = value or b""
            seen_bytes += len(value)
            unique.update(value[i : i + KEY_SIZE] for i in range(0, len(value), KEY_SIZE))
    out = {
        "t_s": round(t, 1),
        "used_memory": int(info["used_memory"]),
        "evicted_keys": int(info["evicted_keys"]),
        "memory": memory,
        "seen_keys": seen_bytes // KEY_SIZE,
        "status_seen_keys": state["seen_keys"],
        "unique_seen_keys": len(unique),
        "seen_value_bytes": seen_bytes,
        "pending": state["pending"],
        "members": len(state["nodes"]),
        "fetched": fetched,
        "keys": count,
        "bytes": size,
    }
    if names:
        out["keys_left"] = sorted(k.decode() for k in keys if kind_of(k, crawl_id) != "seen")
    return out


#: The kinds of keys that stay when the crawl is over: what a leak in its data would grow.
KEPT = ("seen", "history", "other")


def per_url(s: dict[str, Any], base: dict[str, Any]) -> dict[str, float]:
    """Bytes per seen key grown since ``base`` (the sample before the crawl): in all
    (issue 21's measure), per kind of key, in the kinds the crawl keeps (:data:`KEPT`),
    and Redis's own: client buffers, script cache and the rest (its keyspace tables)."""
    urls = s["seen_keys"]
    if not urls:
        return {}
    grown = s["used_memory"] - base["used_memory"]
    out = {"total": grown / urls, "kept": 0.0}
    rest = grown
    for kind in KINDS:
        delta = s["bytes"][kind] - base["bytes"][kind]
        out[kind] = delta / urls
        rest -= delta
        if kind in KEPT:
            out["kept"] += delta / urls
    for name, key in (("clients", "mem_clients_normal"), ("scripts", "used_memory_scripts")):
        delta = s["memory"].get(key, 0) - base["memory"].get(key, 0)
        out[name] = delta / urls
        rest -= delta
    out["unattributed"] = rest / urls
    return out


# -- the run ----------------------------------------------------------------------------------


@dataclass
class Options:
    minutes: float
    restart_every: float
    down_for: float
    sample_every: float
    early_s: float
    deadline_min: float
    concurrency: int
    quick: bool
    workdir: Path


@dataclass
class Outcome:
    plan: WebPlan
    reachable: int
    before: dict[str, Any] = field(default_factory=dict)
    baseline: dict[str, Any] = field(default_factory=dict)  # the sample before the crawl
    samples: list[dict[str, Any]] = field(default_factory=list)
    restarts: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    server: dict[str, Any] = field(default_factory=dict)
    crawl_s: float | None = None
    crawl_id: str = ""
    failure: str | None = None


def soak(opts: Options, clock: report.Clock) -> Outcome:
    from distributed import PrivateRedis
    from scrapy_twolevel.testweb.process import ServerProcess

    plan = WebPlan.for_minutes(opts.minutes, opts.concurrency)
    web = plan.web()
    reachable = web.reachable()
    out = Outcome(plan, len(reachable))
    clock.log(
        f"web: {plan.hosts} hosts x {plan.pages_per_host} pages ({len(reachable)} reachable), "
        f"{plan.seeds} seeds, {RESPONSE_DELAY:g} s per response; expected "
        f"{len(reachable) / plan.rate / 60:.0f} min at {plan.rate:.1f} pages/s"
    )
    deadline = time.monotonic() + opts.deadline_min * 60
    opts.workdir.mkdir(parents=True)
    (opts.workdir / "jobs").mkdir()
    redis = PrivateRedis(opts.workdir)
    nodes: Nodes | None = None
    try:
        client = redis.client
        try:  # Redis 7's per-command latency histograms: ~1 MB, fixed, not the crawl's
            client.config_set("latency-tracking", "no")
        except Exception:  # an older Redis has none
            pass
        info = client.info()
        out.before = {
            "used_memory": int(info["used_memory"]),
            "maxmemory": int(info["maxmemory"]),
            "maxmemory_policy": info["maxmemory_policy"],
            "evicted_keys": int(info["evicted_keys"]),
            "redis_version": info["redis_version"],
        }
        clock.log(
            f"redis {info['redis_version']} on port {redis.port}: maxmemory "
            f"{info['maxmemory']}, policy {info['maxmemory_policy']}, "
            f"evicted_keys {info['evicted_keys']}"
        )
        crawl_id = out.crawl_id = f"soak-{uuid.uuid4().hex[:8]}"
        out.baseline = sample(client, crawl_id, 0.0, 0)
        with ServerProcess(web, opts.workdir) as server:
            nodes = Nodes(opts.workdir, redis.url, crawl_id, server.seeds, opts.concurrency)
            for name in NODES:
                nodes.start(name)
            out.failure = drive(opts, nodes, server, client, crawl_id, out, clock, deadline)
            if out.failure is None:
                fetched = len(server.stats().fetch_counts())
                out.samples.append(sample(client, crawl_id, nodes.now(), fetched, names=True))
            stats = server.stats()
            counts = stats.fetch_counts()
            out.server = {
                "fetched_pages": len(counts),
                "fetches": sum(counts.values()),
                "lost": len(reachable - set(counts)),
                "lost_examples": sorted(reachable - set(counts))[:20],
                "fetched_twice": sum(1 for c in counts.values() if c > 1),
                "fetched_twice_examples": {
                    str(page): web.url(page, server.port)
                    for page in sorted(p for p, c in counts.items() if c > 1)[:20]
                },
                "refetches": sum(counts.values()) - len(counts),
                "overlapping_requests": stats.overlapping_requests(),
                "max_in_flight_per_host": max(
                    stats.max_concurrent_requests_per_host().values(), default=0
                ),
                "unknown_pages": len(set(counts) - reachable),
            }
    except BaseException as exc:
        out.failure = out.failure or f"{type(exc).__name__}: {exc}"
        raise
    finally:
        if nodes is not None:
            nodes.abort()
            out.runs = [r.record() for r in nodes.runs]
        redis.stop()
    return out


def drive(
    opts: Options,
    nodes: Nodes,
    server: Any,
    client: Any,
    crawl_id: str,
    out: Outcome,
    clock: report.Clock,
    deadline: float,
) -> str | None:
    """Sample, stop and restart nodes until every node's last run has ended by itself;
    the failure, if any (the deadline, a node that does not stop)."""
    next_sample = 0.0
    next_restart = opts.restart_every
    restarting: tuple[str, float] | None = None  # (node, when to start it again)
    number = 0
    ending = False  # a node ended by itself: the crawl is over, no more restarts
    while True:
        now = nodes.now()
        if time.monotonic() > deadline:
            nodes.abort()
            return f"deadline: still running after {opts.deadline_min:g} min"
        for run in nodes.poll():
            clock.log(f"{run.node} (run {run.number}) ended by itself, exit {run.exit_code}")
            ending = True
        if restarting is not None and now >= restarting[1]:
            name = restarting[0]
            run = nodes.start(name)
            out.restarts[-1]["started_again_s"] = round(nodes.now(), 1)
            clock.log(f"{name} started again (run {run.number})")
            restarting = None
        if restarting is None and not nodes.alive():
            out.crawl_s = now
            return None
        if now >= next_sample:
            fetched = len(server.stats().fetch_counts())
            s = sample(client, crawl_id, now, fetched)
            out.samples.append(s)
            clock.log(
                f"t={now:6.0f}s used_memory {s['used_memory'] / 1e6:7.2f} MB, seen "
                f"{s['seen_keys']} (unique {s['unique_seen_keys']}), fetched {fetched}, "
                f"pending {s['pending']}, members {s['members']}"
            )
            next_sample += opts.sample_every
        if not ending and restarting is None and now >= next_restart:
            name = NODES[number % len(NODES)]
            how = "sigint" if number % 2 == 0 else "kill"
            number += 1
            next_restart += opts.restart_every
            if nodes.current[name].ended_s is None:
                stopped = nodes.stop(name, how)
                expected = 0 if how == "sigint" else -signal.SIGKILL
                out.restarts.append(
                    {
                        "node": name,
                        "how": how,
                        "at_s": round(now, 1),
                        "stopped_in_s": round(stopped.ended_s - now, 1),
                        "exit_code": stopped.exit_code,
                        "as_expected": stopped.exit_code == expected,
                        "leases_at_kill": stopped.leases,
                    }
                )
                clock.log(
                    f"{name} stopped by {how} in {stopped.ended_s - now:.1f} s, exit "
                    f"{stopped.exit_code}"
                    + (f", {stopped.leases} leases" if stopped.leases is not None else "")
                )
                restarting = (name, nodes.now() + opts.down_for)
        time.sleep(0.2)


# -- the report -------------------------------------------------------------------------------


def early_and_end(out: Outcome, early_s: float) -> tuple[dict[str, Any] | None, ...]:
    early = next((s for s in out.samples if s["t_s"] >= early_s), None)
    crawling = [s for s in out.samples if s["members"]]
    return early, crawling[-1] if crawling else None, out.samples[-1] if out.samples else None


def _b(x: float | None, digits: int = 1) -> str:
    return "-" if x is None else f"{x:,.{digits}f}"


def _change(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or a == 0 else b / a - 1


def memory_table(out: Outcome, early_s: float) -> tuple[report.Table, dict[str, Any]]:
    early, _, end = early_and_end(out, early_s)
    before = out.baseline["used_memory"]
    head = report.columns(f"measure | at {early_s / 60:g} min | at the end | change | verdict")
    rows: list[list[str]] = []
    verdicts: dict[str, Any] = {}
    if early is None or end is None or early is end:
        return (head, [["not enough samples", "-", "-", "-", "**no**"]]), {"flat": False}
    a, b = per_url(early, out.baseline), per_url(end, out.baseline)

    def plain(what: str, x: Any, y: Any, digits: int = 0) -> None:
        rows.append([what, _b(x, digits), _b(y, digits), "", ""])

    plain("elapsed s", early["t_s"], end["t_s"])
    plain("seen keys (sum of seen:N lengths / 16)", early["seen_keys"], end["seen_keys"])
    plain("unique seen keys", early["unique_seen_keys"], end["unique_seen_keys"])
    plain("pages fetched (server)", early["fetched"], end["fetched"])
    plain("pending requests", early["pending"], end["pending"])
    plain("used_memory - before, bytes", early["used_memory"] - before, end["used_memory"] - before)
    for what, key in (
        ("memory per URL, B (issue 21's measure)", "total"),
        ("bytes per URL in the keys the crawl keeps (seen:N, history, other)", "kept"),
    ):
        change = _change(a[key], b[key])
        flat = change is not None and abs(change) <= FLAT
        grows = change is None or change > FLAT
        verdicts[key] = {
            "early": a[key],
            "end": b[key],
            "change": change,
            "flat": flat,
            "not_growing": not grows,
        }
        verdict = f"flat (within {100 * FLAT:.0f}%): {report.yes_no(flat)}"
        if key == "kept":  # a leak grows it; a fixed cost per key, shared by more URLs, not
            verdict += f"; not growing (at most +{100 * FLAT:.0f}%): {report.yes_no(not grows)}"
        elif not flat and change is not None:
            verdict += ", falls" if change < 0 else ", grows"
        rows.append(
            [
                what,
                _b(a[key]),
                _b(b[key]),
                "-" if change is None else f"{100 * change:+.1f}%",
                verdict,
            ]
        )
    own = {
        "clients": "client buffers",
        "scripts": "script cache",
        "unattributed": "the rest (keyspace tables, MEMORY USAGE estimate error)",
    }
    for kind in (*KINDS, *own):
        keys = (early["keys"].get(kind), end["keys"].get(kind)) if kind in KINDS else ("", "")
        count = f"{keys[0]} / {keys[1]} keys" if kind in KINDS else f"Redis: {own[kind]}"
        change = _change(a[kind], b[kind])
        rows.append(
            [
                f"  {kind}: B per URL",
                _b(a[kind], 2),
                _b(b[kind], 2),
                "-" if change is None else f"{100 * change:+.1f}%",
                count,
            ]
        )
    dup = [
        s["seen_value_bytes"] / (KEY_SIZE * s["unique_seen_keys"])
        if s["unique_seen_keys"]
        else None
        for s in (early, end)
    ]
    verdicts["seen_duplicate_ratio"] = dup
    rows.append(
        [
            "seen:N bytes / (16 x unique keys)",
            _b(dup[0], 3),
            _b(dup[1], 3),
            "",
            "1.000: no duplicate appends",
        ]
    )
    own_bytes = [s["seen_keys"] * sum(p[k] for k in own) for s, p in ((early, a), (end, b))]
    plain("Redis's own memory grown (clients, scripts, the rest), bytes", *own_bytes)
    prefix = f"twolevel:{out.crawl_id}:"
    left = [k.removeprefix(prefix) for k in end.get("keys_left") or []]
    rows.append(["keys left at the end besides seen:N", "", ", ".join(left) or "none", "", ""])
    verdicts["flat"] = verdicts["total"]["flat"]
    verdicts["keys_left"] = end.get("keys_left")
    return (head, rows), verdicts


def crawl_table(out: Outcome, minutes: float) -> tuple[report.Table, dict[str, bool]]:
    head = report.columns("check | value | met")
    srv = out.server
    last = {}
    for run in out.runs:
        last[run["node"]] = run
    kills = [r for r in out.restarts if r["how"] == "kill"]
    leases = sum(r["leases_at_kill"] or 0 for r in kills)
    unknown_leases = sum(r["leases_at_kill"] is None for r in kills)
    dropped = sum(r["stats"].get("twolevel/redis/leases_dropped", 0) for r in out.runs)
    evicted = out.samples[-1]["evicted_keys"] if out.samples else None
    tracebacks = sum(r["tracebacks"] for r in out.runs)
    errors = sum(r["errors"] for r in out.runs)
    rejoined = sum(r["stats"].get("twolevel/redis/rejoined", 0) for r in out.runs)
    finished = [
        f"{n}: {r['finish_reason']} ({r['ended_by']}, exit {r['exit_code']})"
        for n, r in sorted(last.items())
    ]
    checks: list[tuple[str, str, bool]] = [
        ("run ended before the deadline", out.failure or "yes", out.failure is None),
        (
            "crawl time, first start to last exit (at least an hour, or 80% of --minutes)",
            "-" if out.crawl_s is None else f"{out.crawl_s / 60:.1f} min",
            out.crawl_s is not None and out.crawl_s >= min(3600, 0.8 * minutes * 60),
        ),
        (
            "pages fetched / reachable",
            f"{srv.get('fetched_pages', '-')} / {out.reachable}",
            srv.get("fetched_pages") == out.reachable,
        ),
        ("pages lost (reachable, never fetched)", str(srv.get("lost", "-")), srv.get("lost") == 0),
        (
            "fetches beyond the first (pages fetched twice)",
            f"{srv.get('refetches', '-')} ({srv.get('fetched_twice', '-')})",
            srv.get("refetches", 1) <= leases + dropped and not unknown_leases,
        ),
        (
            "  bound: leases at the kills + leases dropped by reaped nodes",
            f"{leases} + {dropped}"
            + (f" ({unknown_leases} kills uncounted)" * (unknown_leases > 0)),
            True,
        ),
        (
            "requests overlapping at a host / most in flight at one host",
            f"{srv.get('overlapping_requests', '-')} / {srv.get('max_in_flight_per_host', '-')}",
            srv.get("max_in_flight_per_host") == 1,
        ),
        (
            "restarts (SIGINT / SIGKILL), each stopped as expected",
            f"{sum(r['how'] == 'sigint' for r in out.restarts)} / {len(kills)}",
            all(r["as_expected"] for r in out.restarts) and len(out.restarts) >= 2,
        ),
        (
            "every node's last run ended by itself, finished",
            "; ".join(finished),
            len(last) == len(NODES)
            and all(
                r["ended_by"] == "itself"
                and r["exit_code"] == 0
                and r["finish_reason"] == "finished"
                for r in last.values()
            ),
        ),
        (
            "Redis maxmemory-policy; evicted keys at start / end",
            f"{out.before.get('maxmemory_policy')} (maxmemory {out.before.get('maxmemory')}); "
            f"{out.before.get('evicted_keys')} / {evicted}",
            out.before.get("evicted_keys") == 0 and evicted == 0,
        ),
        (
            "tracebacks / ERROR lines in node logs",
            f"{tracebacks} / {errors}",
            tracebacks == 0 and errors == 0,
        ),
        (
            "no live node reaped (nodes that learnt they were reaped and rejoined)",
            str(rejoined),
            rejoined == 0,
        ),
        (
            "rebalancings (buckets moved) / reapings, from the node logs",
            f"{sum(r['rebalances'] for r in out.runs)} "
            f"({sum(r['buckets_rebalanced'] for r in out.runs)}) / "
            f"{sum(r['reaps'] for r in out.runs)}",
            sum(r["rebalances"] for r in out.runs) > 0,
        ),
    ]
    rows = [[what, value, report.yes_no(ok)] for what, value, ok in checks]
    return (head, rows), {what.strip(): ok for what, _, ok in checks}


def plot(out: Outcome, early_s: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [(s["t_s"] / 60, s, per_url(s, out.baseline)) for s in out.samples if s["seen_keys"]]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True)
    t = [p[0] for p in points]
    top.plot(t, [p[2]["total"] for p in points], "o-", ms=3, color="#d62728", label="in all")
    top.plot(
        t,
        [p[2]["kept"] for p in points],
        "o-",
        ms=3,
        color="#1f77b4",
        label="in the keys the crawl keeps (seen:N, history, other)",
    )
    top.plot(t, [p[2]["seen"] for p in points], ":", color="#2ca02c", label="seen:N keys")
    top.set(ylabel="Redis bytes per seen URL", title="Redis memory per URL")
    top.set_yscale("log")
    bottom.plot(t, [p[1]["seen_keys"] for p in points], "-", color="#2ca02c", label="seen URLs")
    bottom.plot(
        t, [p[1]["fetched"] or 0 for p in points], "-", color="#7f7f7f", label="pages fetched"
    )
    bottom.plot(t, [p[1]["pending"] for p in points], "-", color="#ff7f0e", label="pending")
    bottom.set(xlabel="minutes since the nodes started", ylabel="URLs", title="The crawl")
    for ax in (top, bottom):
        for i, r in enumerate(out.restarts):
            ax.axvline(
                r["at_s"] / 60,
                color="#9467bd" if r["how"] == "sigint" else "#000000",
                ls="--" if r["how"] == "sigint" else "-",
                lw=0.8,
                alpha=0.6,
                label=("restart after SIGINT" if r["how"] == "sigint" else "restart after SIGKILL")
                if i < 2
                else None,
            )
        ax.axvline(early_s / 60, color="#bcbd22", lw=1.5, alpha=0.7, label=f"{early_s / 60:g} min")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    report.save_figure(fig, path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = report.arg_parser(
        __doc__, quick="a ~3-minute smoke run (restarts every 45 s); writes nothing"
    )
    parser.add_argument("--minutes", type=float, help="target length (65; --quick: 3)")
    parser.add_argument("--restart-every", type=float, help="seconds (300; --quick: 45)")
    parser.add_argument("--down-for", type=float, help="seconds a node stays down (15; 12)")
    parser.add_argument("--early", type=float, help="the early sample, s (600; --quick: 60)")
    parser.add_argument("--deadline", type=float, help="minutes (--minutes x 1.5 + 10)")
    parser.add_argument("--concurrency", type=int, default=6, help="per node (%(default)s)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/twolevel-soak"))
    args = parser.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    quick = args.quick

    def pick(value: float | None, full: float, small: float) -> float:
        return value if value is not None else small if quick else full

    minutes = pick(args.minutes, 65.0, 3.0)
    opts = Options(
        minutes=minutes,
        restart_every=pick(args.restart_every, 300.0, 45.0),
        down_for=pick(args.down_for, 15.0, 12.0),
        sample_every=10.0 if quick else 30.0,
        early_s=pick(args.early, 600.0, 60.0),
        deadline_min=args.deadline or minutes * 1.5 + 10,
        concurrency=args.concurrency,
        quick=quick,
        workdir=args.workdir,
    )
    opts.workdir = opts.workdir / time.strftime("%Y%m%d-%H%M%S")
    clock = report.Clock()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # cleans up on the way out
    clock.log(f"workdir {opts.workdir}")
    out = soak(opts, clock)
    elapsed = clock.elapsed()
    mem, verdicts = memory_table(out, opts.early_s)
    crawl, checks = crawl_table(out, opts.minutes)
    ok = out.failure is None and all(checks.values())
    summary = (
        f"crawl checks met: {report.yes_no(ok)}; memory per URL flat (issue 21's measure): "
        f"{report.yes_no(verdicts.get('flat', False))}; bytes per URL in the kept keys not "
        f"growing: {report.yes_no(verdicts.get('kept', {}).get('not_growing', False))}"
    )
    runs = {
        "parameters": {
            "minutes": opts.minutes,
            "restart_every_s": opts.restart_every,
            "down_for_s": opts.down_for,
            "sample_every_s": opts.sample_every,
            "early_s": opts.early_s,
            "concurrency_per_node": opts.concurrency,
            "nodes": list(NODES),
            "rebalance_interval_s": REBALANCE_INTERVAL,
            "web": {
                "hosts": out.plan.hosts,
                "pages_per_host": out.plan.pages_per_host,
                "seeds": out.plan.seeds,
                "reachable": out.reachable,
                "response_delay_s": RESPONSE_DELAY,
                "links_per_page": LINKS_PER_PAGE,
                "expected_pages_per_s": out.plan.rate,
            },
        },
        "redis_before": out.before,
        "baseline": out.baseline,
        "verdicts": verdicts,
        "checks": checks,
        "all_met": ok,
        "server": out.server,
        "restarts": out.restarts,
        "node_runs": out.runs,
        "samples": out.samples,
        "crawl_s": out.crawl_s,
        "failure": out.failure,
    }
    if opts.quick:
        print()
        print(report.markdown(mem))
        print(report.markdown(crawl))
        plot(out, opts.early_s, opts.workdir / "soak.png")
        (opts.workdir / "soak.json").write_text(report.compact_json(runs) + "\n")
        print(f"quick run: nothing written to results (JSON and plot in {opts.workdir})")
        print(f"{summary}; {elapsed / 60:.1f} min")
        return 0 if ok else 1
    command = report.command_line(__file__, argv)
    data = {"command": command, "run_time_s": round(elapsed, 1), **runs}
    (RESULTS / "soak.json").write_text(report.compact_json(data) + "\n")
    web = out.plan
    intro = [
        f"Command: ``{command}``; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; the "
        f"whole run took {elapsed / 60:.0f} minutes.",
        f"3 nodes (CONCURRENT_REQUESTS {opts.concurrency}) on a private Redis "
        f"{out.before.get('redis_version')}; a test web of {web.hosts} hosts x "
        f"{web.pages_per_host} pages ({out.reachable} reachable, {web.seeds} seeds, "
        f"{LINKS_PER_PAGE} links a page), {RESPONSE_DELAY:g} s per response; "
        f"TWOLEVEL_REBALANCE_INTERVAL {REBALANCE_INTERVAL:g} s; one node stopped every "
        f"{opts.restart_every:g} s, SIGINT and SIGKILL in turn, started again "
        f"{opts.down_for:g} s later. Plot: ``docs/results/soak.png``.",
    ]
    sections: list[report.Section] = [
        ("Redis memory per URL", "", [("", mem)]),
        ("The crawl", "", [("", crawl)]),
    ]
    definitions = {
        "seen:N, q:N, inbox:NODE": "the crawl's keys twolevel:CRAWL:seen:N (bucket N's "
        "seen log: 16 bytes per URL), twolevel:CRAWL:q:N (its requests queued or leased) "
        "and twolevel:CRAWL:inbox:NODE (URLs routed to a node); crawl (other): the crawl's "
        "other keys",
        "memory per URL": "(used_memory - used_memory before the crawl) / seen keys, "
        "the seen keys being the sum over seen:N of their length / 16",
        "at the end": "the last sample, once every node had exited",
        "bytes per URL in the keys the crawl keeps": "the MEMORY USAGE of seen:N, of the "
        "recrawl history and of keys of no crawl, per seen key: what stays when the crawl "
        "is over, and what a leak in its data would grow. Not in it: the queued requests "
        "(q:N, inbox:NODE: work in progress, drained at the end), the crawl's registry "
        "(crawl (other): bucket table, holders, members, a size set by TWOLEVEL_BUCKETS, "
        "not by the URLs) and Redis's own memory (clients, scripts, the rest)",
        "the rest": "used_memory growth in no key's MEMORY USAGE, nor in client buffers or "
        "the script cache (keyspace tables; negative when MEMORY USAGE overestimates)",
        "fetches beyond the first": "server responses for a page after its first one",
    }
    report.publish(
        "soak",
        "A one-hour soak with restarts",
        intro,
        sections,
        definitions,
        lambda: plot(out, opts.early_s, ROOT / "docs" / "results" / "soak.png"),
    )
    report.finish(summary, elapsed, f"{RESULTS}/soak.*")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
