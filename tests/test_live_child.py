"""Child processes die with gpuscale (gpuscale.live.child), even by ``kill -9``:
the script, and what the script started in its process group. No TensorFlow:
the "training script" is a ``python -c`` that starts a child and sleeps."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

psutil = pytest.importorskip("psutil")

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="process groups are POSIX")


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pids: list[int], within_s: float = 10.0) -> list[int]:
    """The pids still alive after waiting at most ``within_s`` for them to go."""
    deadline = time.monotonic() + within_s
    while not all(_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [p for p in pids if not _gone(p)]


def test_kill_9_of_gpuscale_watch_takes_the_script_and_its_children(tmp_path):
    pids_file = tmp_path / "pids"
    script = (
        "import os, pathlib, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        f"pathlib.Path({str(pids_file)!r}).write_text(f'{{os.getpid()}} {{child.pid}}')\n"
        "time.sleep(120)\n"
    )
    gpuscale = subprocess.Popen(
        [sys.executable, "-m", "gpuscale", "watch", "--no-record", "--"]
        + [sys.executable, "-c", script],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,  # off a terminal: watch runs as run does
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
    )
    try:
        deadline = time.monotonic() + 60
        while not (pids_file.exists() and pids_file.read_text()):
            assert time.monotonic() < deadline and gpuscale.poll() is None
            time.sleep(0.05)
        pids = [int(p) for p in pids_file.read_text().split()]
        assert all(not _gone(p) for p in pids)
        gpuscale.kill()  # SIGKILL: gpuscale runs no code of its own after this
        gpuscale.wait()
        leftover = _wait_gone(pids)
    finally:
        if gpuscale.poll() is None:
            gpuscale.kill()
    for pid in leftover:
        os.kill(pid, signal.SIGKILL)
    assert leftover == [], "the script or its child outlived gpuscale"
