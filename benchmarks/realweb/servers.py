"""nginx serving the corpus: one loopback address per site, each with its own politeness.

Every site is a ``server`` of one nginx (Debian's package, started by the benchmark with
its own configuration under the work folder; no root needed, though nginx started as root
runs its worker as ``nobody``), listening on ``127.0.1.<i>:PORT``. What a host allows is
drawn per host from a seeded distribution (:func:`draw_profiles`):

- a request rate, log-uniform in ``RATE_RANGE`` requests per minute, enforced with
  ``limit_req`` in delay mode (``burst=100``, no ``nodelay``): requests that come faster
  than the rate are held by the server until their turn, as polite servers (and CDNs in
  front of them) do, not refused;
  (with ``refuse=True`` the same rate refuses instead: no burst, excess answered ``429``
  with ``Retry-After``, the whole seconds of the host's request interval, at least 1);
- a keep-alive limit (``keepalive_requests``): 1, 10 or 100 requests per connection;
- for a third of the hosts, a bandwidth cap (``limit_rate``), log-uniform in
  ``BANDWIDTH_RANGE`` bytes per second, so large pages take long.

The access log records, per request, when it ended (``$msec``), how long the server spent
on it (``$request_time``, its rate-limit delay included), the connection and the request's
number on it, the host's address, the status, the bytes and the URI: the ground truth the
crawl is judged on (:mod:`realweb.judge`).
"""

from __future__ import annotations

import math
import os
import random
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Self

from realweb.corpus import Site

#: Requests per minute a host accepts (the politeness-bound regime; ``rate_scale`` 20 makes
#: the CPU-bound one).
RATE_RANGE = (36.0, 600.0)
KEEPALIVE_CHOICES = (1, 10, 100)
BANDWIDTH_SHARE = 1 / 3
BANDWIDTH_RANGE = (200_000.0, 2_000_000.0)
BURST = 100
LOG_FORMAT = (
    "$msec $request_time $connection $connection_requests $server_addr $status "
    '$body_bytes_sent "$request_uri"'
)


@dataclass(frozen=True)
class HostProfile:
    """What one host allows: requests per minute, per connection, bytes per second."""

    address: str
    rate_per_minute: float  # 0: no request-rate limit (the Apache web's hosts)
    keepalive_requests: int
    bandwidth: float | None  # bytes per second; None: no cap
    # The Apache web's (realweb.apache); nginx's hosts keep the defaults.
    latency: float = 0.0  # seconds the server holds every request
    keepalive_timeout: float | None = None  # idle seconds before the server closes
    tls: bool = False
    #: A burst limit: at most ``burst`` requests in a window of ``burst_window`` seconds
    #: that opens with the first one; the rest of the window is refused (0: no limit).
    burst: int = 0
    burst_window: float = 0.0

    def scaled(self, rate_scale: float) -> HostProfile:
        """The same host ``rate_scale`` times faster: rate and burst x scale, latency /
        scale (the burst's window is kept)."""
        return replace(
            self,
            rate_per_minute=self.rate_per_minute * rate_scale,
            latency=self.latency / rate_scale,
            burst=round(self.burst * rate_scale),
        )


def address(i: int) -> str:
    return f"127.0.1.{i + 1}"


def draw_profiles(n_hosts: int, seed: int) -> list[HostProfile]:
    """Each host's politeness, from the seeded distribution in the module docstring."""
    rng = random.Random(seed)
    low, high = (math.log(x) for x in RATE_RANGE)
    blow, bhigh = (math.log(x) for x in BANDWIDTH_RANGE)
    profiles = []
    for i in range(n_hosts):
        rate = round(math.exp(rng.uniform(low, high)))
        keepalive = rng.choice(KEEPALIVE_CHOICES)
        capped = rng.random() < BANDWIDTH_SHARE
        bandwidth = round(math.exp(rng.uniform(blow, bhigh)), -3) if capped else None
        profiles.append(HostProfile(address(i), rate, keepalive, bandwidth))
    return profiles


def nginx_config(
    workdir: Path,
    port: int,
    sites: list[Site],
    profiles: list[HostProfile],
    log: Path,
    refuse: int = 0,
) -> str:
    zones, servers = [], []
    for i, (site, p) in enumerate(zip(sites, profiles, strict=True)):
        # nginx takes whole requests per minute; the rate is rounded when drawn.
        zones.append(
            f"    limit_req_zone $server_addr zone=h{i}:1m rate={round(p.rate_per_minute)}r/m;"
        )
        limit_rate = f"        limit_rate {int(p.bandwidth)};\n" if p.bandwidth else ""
        if refuse == 503:
            limit = f"        limit_req zone=h{i};\n"  # nginx's default: a bare 503
        elif refuse:
            retry_after = max(1, math.ceil(60 / p.rate_per_minute))
            limit = (
                f"        limit_req zone=h{i};\n"
                "        limit_req_status 429;\n"
                "        error_page 429 @refused;\n"
                "        location @refused {\n"
                f"            add_header Retry-After {retry_after} always;\n"
                "            return 429;\n"
                "        }\n"
            )
        else:
            limit = f"        limit_req zone=h{i} burst={BURST};\n"
        servers.append(
            f"    server {{  # {site.name}\n"
            f"        listen {p.address}:{port};\n"
            f"        root {site.root};\n"
            f"        access_log {log} twolevel;\n"
            f"        keepalive_requests {p.keepalive_requests};\n"
            f"{limit}"
            f"{limit_rate}"
            "    }"
        )
    return "\n".join(
        [
            "worker_processes 1;",
            f"pid {workdir}/nginx.pid;",
            f"error_log {workdir}/error.log warn;",
            "events { worker_connections 4096; }",
            "http {",
            f"    log_format twolevel '{LOG_FORMAT}';",
            "    access_log off;",
            "    include /etc/nginx/mime.types;",
            "    default_type application/octet-stream;",
            "    sendfile on;",
            "    keepalive_timeout 65s;",
            "    disable_symlinks off;",
            "    absolute_redirect off;",
            "    server_tokens off;",
            f"    client_body_temp_path {workdir}/tmp;",
            f"    proxy_temp_path {workdir}/tmp;",
            f"    fastcgi_temp_path {workdir}/tmp;",
            f"    uwsgi_temp_path {workdir}/tmp;",
            f"    scgi_temp_path {workdir}/tmp;",
            *zones,
            *servers,
            "}",
            "",
        ]
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LoopbackServer:
    """One server process for one crawl, its hosts on loopback addresses: a fresh access
    log and fresh limits. Subclasses write the configuration, start it with
    :meth:`launch` and stop it with :meth:`terminate`."""

    name = "server"

    def __init__(self, workdir: Path, sites: list[Site], profiles: list[HostProfile]) -> None:
        self.workdir = workdir
        self.sites = sites
        self.profiles = profiles
        self.port = free_port()
        self.log = workdir / "access.log"  # in realweb.judge's format once stopped
        self.proc: subprocess.Popen[bytes] | None = None

    def seeds(self, index_of: dict[str, str]) -> list[str]:
        return [self.url(i, index_of[s.name]) for i, s in enumerate(self.sites)]

    def url(self, i: int, path: str) -> str:
        p = self.profiles[i]
        return f"{'https' if p.tls else 'http'}://{p.address}:{self.port}/{path}"

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def launch(self, cmd: list[str]) -> None:
        """Start ``cmd`` and wait until every host accepts connections."""
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        for p in self.profiles:
            while True:
                try:
                    socket.create_connection((p.address, self.port), timeout=1).close()
                    break
                except OSError:
                    if self.proc.poll() is not None or time.monotonic() > deadline:
                        err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                        raise RuntimeError(
                            f"{self.name} did not start: {err}{self.startup_errors()}"
                        ) from None
                    time.sleep(0.05)  # startup poll: the server reports readiness no other way

    def startup_errors(self) -> str:
        """What the server logged of its failure to start, beyond its stderr."""
        return ""

    def terminate(self, sig: signal.Signals) -> None:
        """Send ``sig`` and wait for the process (killed after 20 s)."""
        if self.proc is None:
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def cpu_seconds(self) -> float:
        """CPU time of the server (parent and children) so far."""
        import psutil

        if self.proc is None:
            return 0.0
        proc = psutil.Process(self.proc.pid)
        total = 0.0
        for p in [proc, *proc.children(recursive=True)]:
            t = p.cpu_times()
            total += t.user + t.system
        return total

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class Nginx(LoopbackServer):
    """One nginx for one crawl: a fresh access log and fresh rate-limit state."""

    name = "nginx"

    def __init__(
        self, workdir: Path, sites: list[Site], profiles: list[HostProfile], refuse: int = 0
    ) -> None:
        super().__init__(workdir, sites, profiles)
        self.refuse = refuse

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "tmp").mkdir(exist_ok=True)
        self.log.unlink(missing_ok=True)
        conf = self.workdir / "nginx.conf"
        conf.write_text(
            nginx_config(self.workdir, self.port, self.sites, self.profiles, self.log, self.refuse)
        )
        self.launch(["nginx", "-p", str(self.workdir), "-c", str(conf), "-g", "daemon off;"])

    def stop(self) -> None:
        self.terminate(signal.SIGQUIT)  # graceful: the access log is complete


def profiles_table(sites: list[Site], profiles: list[HostProfile]) -> list[dict[str, Any]]:
    return [{"site": s.name, **asdict(p)} for s, p in zip(sites, profiles, strict=True)]


def nginx_version() -> str:
    out = subprocess.run(["nginx", "-v"], capture_output=True, text=True)
    return (out.stderr or out.stdout).strip().rpartition("/")[2]


def available() -> bool:
    return any(Path(d, "nginx").exists() for d in os.environ.get("PATH", "").split(os.pathsep))
