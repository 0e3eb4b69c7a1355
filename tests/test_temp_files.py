"""The temporary seen-keys files of crawls without JOBDIR: named after their process, and
removed by the next crawl once that process is gone (storage/temp_files.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from scrapy_twolevel.storage import temp_files

pytestmark = pytest.mark.unit


def ended_process_id() -> int:
    """The id of a process that ran and was reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def store_of(directory, pid, body=b"x" * 100):
    """A store file (and its WAL) as process ``pid`` would have left it."""
    path = directory / f"{temp_files.PREFIX}{pid}-abc{temp_files.SUFFIX}"
    path.write_bytes(body)
    (directory / f"{path.name}-wal").write_bytes(body)
    return path


def test_a_new_file_is_named_after_this_process(tmp_path):
    path = temp_files.create(tmp_path)
    assert path.exists() and path.parent == tmp_path
    assert path.name.startswith(f"{temp_files.PREFIX}{os.getpid()}-")
    assert temp_files.remove(path) == 0 and not path.exists()


def test_only_files_of_ended_processes_are_removed_with_their_companions(tmp_path):
    dead = store_of(tmp_path, ended_process_id())
    mine = store_of(tmp_path, os.getpid())
    with subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    ) as running:
        alive = store_of(tmp_path, running.pid)
        other = tmp_path / "twolevel-seen-0hxwhgjq.sqlite3"  # no process id: not ours to judge
        other.write_bytes(b"x")
        assert temp_files.sweep(tmp_path) == (1, 200)  # the file and its WAL, 100 B each
        running.stdin.close()
    assert not dead.exists() and not (tmp_path / f"{dead.name}-wal").exists()
    assert mine.exists() and alive.exists() and other.exists()


def test_the_liveness_test_decides(tmp_path):
    store_of(tmp_path, 11)
    store_of(tmp_path, 12)
    assert temp_files.sweep(tmp_path, alive=lambda pid: pid == 12) == (1, 200)
    assert [p.name.split("-")[2] for p in tmp_path.glob("*.sqlite3")] == ["12"]


def test_a_missing_directory_sweeps_nothing(tmp_path):
    assert temp_files.sweep(tmp_path / "absent") == (0, 0)
