"""The test web server in a child process, for tests and benchmarks in another process.

``python -m scrapy_twolevel.testweb serve`` announces itself on stdout once it listens
(after writing the same JSON to its ``--ready-file``); :class:`ServerProcess` waits for
that line with a selector, never by sleeping, and stops the child with SIGTERM. Running
the server apart keeps the caller free of any reactor and gives the crawler its own CPU.
:func:`write_atomically` is how every file another process may be polling for (the ready
file, a crawl's JSON output, the demo's JOBDIR state and summary) gets written.

No Scrapy or Twisted import here.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from .web import WebSpec

if TYPE_CHECKING:
    from typing import Self

    from .server import ServerStats

__all__ = ["ServerProcess", "write_atomically"]


def write_atomically(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` so that a reader never sees a half-written file.

    A temporary file beside the target is renamed over it; a crash leaves either the old
    file or the new one, which is what a resumed JOBDIR crawl needs from its state.
    """
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


class ServerProcess:
    """Serve ``web`` from a child process; use as a context manager or call :meth:`stop`.

    ``workdir`` receives the web's JSON and the ready file. ``timeout`` bounds every wait
    (start, control requests, stop).
    """

    def __init__(
        self,
        web: WebSpec,
        workdir: Path,
        *,
        delay_scale: float = 1.0,
        port: int = 0,
        timeout: float = 60.0,
        env: dict[str, str] | None = None,
    ) -> None:
        self.web = web
        self.timeout = timeout
        web_file = workdir / "web.json"
        web_file.write_text(web.to_json())
        self.ready_file = workdir / "ready.json"
        self.ready_file.unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "scrapy_twolevel.testweb",
                "serve",
                "--web",
                str(web_file),
                "--delay-scale",
                str(delay_scale),
                "--port",
                str(port),
                "--ready-file",
                str(self.ready_file),
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=env if env is not None else dict(os.environ),
        )
        try:
            self.ready = json.loads(self._read_line())
        except BaseException:
            self.stop()
            raise
        self.port: int = self.ready["port"]
        self.seeds: list[str] = self.ready["seeds"]
        self.control: str = self.ready["control"]

    def _read_line(self) -> str:
        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self.proc.stdout, selectors.EVENT_READ)
            if not selector.select(self.timeout):
                raise TimeoutError(f"the test web server did not start in {self.timeout} s")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the test web server exited with {self.proc.wait()}")
        return line

    def stats(self) -> ServerStats:
        """What the server saw since it started or was last reset."""
        from .server import fetch_remote_stats

        return fetch_remote_stats(self.control, timeout=self.timeout)

    def reset(self) -> None:
        """Forget the stats, e.g. between two crawls of one served web."""
        self._control("/_reset")

    def hold(self) -> None:
        """Answer no host request until :meth:`release`: a crawl paused from outside."""
        self._control("/_hold")

    def release(self) -> None:
        self._control("/_release")

    def _control(self, path: str) -> None:
        with urllib.request.urlopen(f"{self.control}{path}", timeout=self.timeout) as reply:
            reply.read()

    def stop(self) -> int:
        """SIGTERM, then SIGKILL if it does not exit in time; return the exit status."""
        proc = self.proc
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=self.timeout)
        if proc.stdout is not None:
            proc.stdout.close()
        return proc.returncode

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
