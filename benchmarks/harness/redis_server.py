"""A ``redis-server`` of a benchmark's own: a free port, nothing on disk, stopped after.

Benchmarks of the distributed mode run their nodes on it, so a crawl's keys never meet
the tests' (which use ``TWOLEVEL_REDIS_URL`` or 127.0.0.1:6379) and nothing is left.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivateRedis:
    """A ``redis-server`` of the benchmark's own, keeping nothing on disk."""

    def __init__(self, workdir: Path) -> None:
        import redis

        self.port = free_port()
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(workdir),
            ],
            stdout=subprocess.DEVNULL,
        )
        self.client = redis.Redis(port=self.port)
        deadline = time.monotonic() + 30
        while True:
            try:
                self.client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def info(self) -> tuple[int, int]:
        info = self.client.info()
        return int(info["total_commands_processed"]), int(info["used_memory"])

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)

    def __enter__(self) -> PrivateRedis:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
