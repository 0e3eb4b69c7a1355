"""Apache httpd serving the second corpus: another server, another rate law, TLS.

The second real web (``--web apache`` in ``benchmarks/real_servers.py``) is served by
Debian's Apache httpd (event MPM), one ``VirtualHost`` per site on its own loopback
address, with real modules setting what each host allows, drawn per host from a seeded
distribution (:func:`draw_profiles`):

- a **latency per request** (mod_qos's ``QS_Delay``, set on every request with
  ``SetEnvIf``): the server holds each request that long before it answers, as an
  application server or a far-away origin does; log-uniform in ``LATENCY_RANGE``;
- for a third of the hosts, a **bandwidth cap** (mod_ratelimit's ``RATE_LIMIT`` filter),
  log-uniform in ``BANDWIDTH_RANGE``, so large pages take long;
- a **keep-alive limit** (``MaxKeepAliveRequests``: 1, 10 or 100) and, for half the
  hosts, a **short idle timeout** (``KeepAliveTimeout`` 1 to 5 s): a crawler that comes
  back to such a host after a pause pays a new connection;
- **HTTPS** on half the hosts (mod_ssl, a self-signed certificate made at start): a new
  connection costs a TLS handshake on both sides;
- for half the hosts, a **burst limit** that punishes a crawler for a minute (mod_qos's
  ``QS_EventLimitCount``, an event variable per host): at most ``burst`` requests in a
  window of ``BURST_WINDOW`` seconds that opens with the first request; once they are
  spent, every request is answered ``429`` with ``Retry-After: 60`` until the window
  ends (mod_qos counts in whole seconds, so it may end up to a second later). The burst
  is a share, uniform in ``BURST_SHARE_RANGE``, of what a serial client could send in a
  window at the host's latency, so a crawler that keeps such a host busy is refused for
  part of every minute. It is drawn from its own random stream: every other property of
  a seed's hosts is what it was before burst limits existed.

This web has no request-rate limit that slows requests down: mod_qos's per-second limits
(``QS_LocRequestPerSecLimit``, ``QS_EventPerSecLimit``) did not hold a serial client to
its rate when tried per virtual host (thousands of requests per second went through a
limit of 2), so the latency and the burst limit are the rate law here. Debian's mod_qos
11.63 is built against the old PCRE that Apache 2.4.71 no longer links, so the
configuration loads ``libpcre.so.3`` (``LoadFile``) before it.

The access log is written in Apache's own format and rewritten, when the server stops, in
the format :mod:`realweb.judge` reads (nginx's; :func:`normalise_log`): the request's end,
its duration (``%D``), the client's port as the connection (Apache logs no connection
number; a port is not reused while its connection is open), ``%k + 1`` as the request's
number on its connection, the host's address, status, body bytes and the raw URI.
"""

from __future__ import annotations

import itertools
import math
import random
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

from realweb.corpus import Site
from realweb.servers import KEEPALIVE_CHOICES, HostProfile, LoopbackServer, address

#: Seconds Apache holds each request (the politeness-bound regime; the CPU-bound one
#: divides them by its rate scale).
LATENCY_RANGE = (0.1, 1.5)
BANDWIDTH_SHARE = 1 / 3
BANDWIDTH_RANGE = (200_000.0, 2_000_000.0)
SHORT_KEEPALIVE_SHARE = 1 / 2
SHORT_KEEPALIVE_RANGE = (1, 5)  # whole seconds
LONG_KEEPALIVE = 65.0
TLS_SHARE = 1 / 2
BURST_HOSTS_SHARE = 1 / 2
BURST_SHARE_RANGE = (0.2, 0.8)
BURST_WINDOW = 60.0  # whole seconds (mod_qos)
RETRY_AFTER = 60  # what a refused request is told to wait
MODULES = "/usr/lib/apache2/modules"
#: mod_qos's PCRE (see the module docstring).
PCRE = "/usr/lib/x86_64-linux-gnu/libpcre.so.3"
LOG_FORMAT = r"%{end:sec}t.%{end:msec_frac}t %D %{remote}p %k %A %>s %B \"%r\""
_APACHE_LINE = re.compile(r'^(\d+\.\d+) (\d+) (\d+) (\d+) (\S+) (\d+) (\d+) "\S+ (\S*)[^"]*"$')


def draw_profiles(n_hosts: int, seed: int) -> list[HostProfile]:
    """Each host's latency, bandwidth, keep-alive, scheme and burst limit (the module
    docstring)."""
    rng = random.Random(seed)
    bursts = random.Random(f"burst-{seed}")  # its own stream: the rest is as before
    low, high = (math.log(x) for x in LATENCY_RANGE)
    blow, bhigh = (math.log(x) for x in BANDWIDTH_RANGE)
    profiles = []
    for i in range(n_hosts):
        latency = round(math.exp(rng.uniform(low, high)), 3)
        keepalive = rng.choice(KEEPALIVE_CHOICES)
        short = rng.random() < SHORT_KEEPALIVE_SHARE
        timeout = float(rng.randint(*SHORT_KEEPALIVE_RANGE)) if short else LONG_KEEPALIVE
        capped = rng.random() < BANDWIDTH_SHARE
        bandwidth = round(math.exp(rng.uniform(blow, bhigh)), -3) if capped else None
        tls = rng.random() < TLS_SHARE
        burst = 0
        if bursts.random() < BURST_HOSTS_SHARE:
            share = bursts.uniform(*BURST_SHARE_RANGE)
            burst = max(2, round(share * BURST_WINDOW / latency))
        profiles.append(
            HostProfile(
                address(i),
                0.0,  # no request-rate limit on this web
                keepalive,
                bandwidth,
                latency=latency,
                keepalive_timeout=timeout,
                tls=tls,
                burst=burst,
                burst_window=BURST_WINDOW if burst else 0.0,
            )
        )
    return profiles


def apache_config(
    workdir: Path, port: int, sites: list[Site], profiles: list[HostProfile], log: Path
) -> str:
    modules = [
        ("mpm_event", "mod_mpm_event"),
        ("authz_core", "mod_authz_core"),
        ("mime", "mod_mime"),
        ("dir", "mod_dir"),
        ("setenvif", "mod_setenvif"),
        ("env", "mod_env"),
        ("headers", "mod_headers"),
        ("ratelimit", "mod_ratelimit"),
        ("socache_shmcb", "mod_socache_shmcb"),
        ("ssl", "mod_ssl"),
    ]
    lines = [f"LoadModule {name}_module {MODULES}/{so}.so" for name, so in modules]
    lines += [f"LoadFile {PCRE}", f"LoadModule qos_module {MODULES}/mod_qos.so"]
    lines += [
        f"ServerRoot {workdir}",
        f"PidFile {workdir}/httpd.pid",
        f"DefaultRuntimeDir {workdir}",
        f"Mutex file:{workdir} default",
        f"ErrorLog {workdir}/error.log",
        "LogLevel warn",
        "User www-data",
        "Group www-data",
        "TypesConfig /etc/mime.types",
        "ServerName realweb",
        "ServerTokens Prod",
        "StartServers 1",
        "ServerLimit 2",
        "ThreadsPerChild 64",
        "MaxRequestWorkers 128",
        "MaxConnectionsPerChild 0",
        "EnableSendfile On",
        f'LogFormat "{LOG_FORMAT}" twolevel',
        f"SSLSessionCache shmcb:{workdir}/ssl_scache(512000)",
        # mod_qos refuses only for the burst limits (QS_Delay holds, it does not refuse).
        "QS_ErrorResponseCode 429",
        *(
            f"QS_EventLimitCount {burst_event(i)} {p.burst} {round(p.burst_window)}"
            for i, p in enumerate(profiles)
            if p.burst
        ),
        "<Directory />",
        "  Options FollowSymLinks",
        "  AllowOverride None",
        "  Require all granted",
        "</Directory>",
    ]
    for i, (site, p) in enumerate(zip(sites, profiles, strict=True)):
        lines.append(f"Listen {p.address}:{port}")
        lines.append(f"<VirtualHost {p.address}:{port}>  # {site.name}")
        lines += [
            f"  ServerName {p.address}",
            f"  DocumentRoot {site.root}",
            f"  CustomLog {log} twolevel",
            "  KeepAlive On",
            f"  MaxKeepAliveRequests {p.keepalive_requests}",
            f"  KeepAliveTimeout {round(1000 * (p.keepalive_timeout or LONG_KEEPALIVE))}ms",
        ]
        if p.latency:
            lines.append(f"  SetEnvIf Request_URI . QS_Delay={round(1000 * p.latency)}")
        if p.burst:
            lines += [
                f"  SetEnvIf Request_URI . {burst_event(i)}=1",
                f'  Header always set Retry-After {RETRY_AFTER} "expr=%{{REQUEST_STATUS}} == 429"',
            ]
        if p.bandwidth:
            # mod_ratelimit takes KiB/s.
            lines += [
                "  SetOutputFilter RATE_LIMIT",
                f"  SetEnv rate-limit {p.bandwidth / 1024:.0f}",
            ]
        if p.tls:
            lines += [
                "  SSLEngine on",
                f"  SSLCertificateFile {workdir}/cert.pem",
                f"  SSLCertificateKeyFile {workdir}/key.pem",
            ]
        lines.append("</VirtualHost>")
    return "\n".join(lines) + "\n"


def burst_event(i: int) -> str:
    """Host ``i``'s mod_qos event: each request to it counts one (``SetEnvIf``)."""
    return f"QS_Burst_h{i}"


def normalise_log(raw: Path, out: Path) -> int:
    """Rewrite Apache's access log ``raw`` in :mod:`realweb.judge`'s format; the lines
    written (a line that does not parse is left out, as the judge would).

    Apache logs a request when its response's last bucket is freed, which on a kept-alive
    connection can come after it has read the next request (write completion): the log
    then shows request ``k`` ending up to a millisecond after request ``k + 1`` on the same
    connection began. Without pipelining (Scrapy does not pipeline) the response was sent
    before the next request came, so such an end is moved back to that beginning: the
    overlap is the log's, not the crawler's. Requests on different connections keep their
    times.
    """
    rows: list[list[Any]] = []
    for line in raw.read_text().splitlines():
        m = _APACHE_LINE.match(line)
        if m is None:
            continue
        end_s, micros, port, before, host, status, size, uri = m.groups()
        end = float(end_s)
        rows.append([end - int(micros) / 1e6, end, port, int(before) + 1, host, status, size, uri])
    by_connection: dict[tuple[str, str], list[list[Any]]] = {}
    for row in rows:
        by_connection.setdefault((row[4], row[2]), []).append(row)
    for same in by_connection.values():
        same.sort(key=lambda row: row[3])
        for row, after in itertools.pairwise(same):
            if after[3] == row[3] + 1 and after[0] < row[1]:
                row[1] = after[0]
    written = [
        f'{end:.6f} {end - start:.6f} {port} {n} {host} {status} {size} "{uri}"'
        for start, end, port, n, host, status, size, uri in rows
    ]
    out.write_text("".join(w + "\n" for w in written))
    return len(written)


def self_signed(workdir: Path) -> None:
    """A certificate for every host (clients of this web do not verify it)."""
    if (workdir / "cert.pem").exists() and (workdir / "key.pem").exists():
        return
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "30",
            "-subj",
            "/CN=realweb",
            "-keyout",
            str(workdir / "key.pem"),
            "-out",
            str(workdir / "cert.pem"),
        ],
        check=True,
        capture_output=True,
    )


class Apache(LoopbackServer):
    """One Apache for one crawl: a fresh access log, fresh connections."""

    name = "apache"

    def __init__(self, workdir: Path, sites: list[Site], profiles: list[HostProfile]) -> None:
        super().__init__(workdir, sites, profiles)
        self.raw_log = workdir / "apache-access.log"  # Apache's format; self.log at stop

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        for stale in (self.raw_log, self.log):
            stale.unlink(missing_ok=True)
        self_signed(self.workdir)
        conf = self.workdir / "httpd.conf"
        conf.write_text(
            apache_config(self.workdir, self.port, self.sites, self.profiles, self.raw_log)
        )
        self.launch(["apache2", "-f", str(conf), "-DFOREGROUND"])

    def startup_errors(self) -> str:
        errors = self.workdir / "error.log"
        return errors.read_text()[-2000:] if errors.exists() else ""

    def stop(self) -> None:
        if self.proc is None:
            return
        # Apache writes each log line as its request ends (no BufferedLogs): a plain stop
        # loses none.
        self.terminate(signal.SIGTERM)
        if self.raw_log.exists():
            normalise_log(self.raw_log, self.log)
        else:
            self.log.write_text("")  # no request reached the server


def apache_version() -> str:
    out = subprocess.run(["apache2", "-v"], capture_output=True, text=True)
    first = out.stdout.splitlines()[0] if out.stdout else ""
    return first.partition("/")[2].split(" ")[0]


def available() -> bool:
    return Path(MODULES, "mod_qos.so").exists() and Path(PCRE).exists()
