"""Child processes die with gpuscale (gpuscale.live.child), even by ``kill -9``:
the script, and what the script started in its process group. No TensorFlow:
the "training script" is a ``python -c`` that starts a child and sleeps."""

from __future__ import annotations

import os
import signal
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


def _script(pids_file) -> str:
    """A training script stand-in: starts a child, writes both pids, sleeps."""
    return (
        "import os, pathlib, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
        f"pathlib.Path({str(pids_file)!r}).write_text(f'{{os.getpid()}} {{child.pid}}')\n"
        "time.sleep(120)\n"
    )


def _start_watch(argv: list[str], cwd, terminal: bool) -> int:
    """``python -m gpuscale ARGV`` off a terminal (stdout to a file: watch runs as
    run does) or in a pseudo-terminal of its own (the dashboard); its pid, for
    ``os.waitpid``."""
    if not terminal:
        with open(os.path.join(cwd, "out.txt"), "wb") as out:
            pid = os.posix_spawn(
                sys.executable,
                [sys.executable, "-m", "gpuscale", *argv],
                os.environ,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, out.fileno(), 1),
                    (os.POSIX_SPAWN_DUP2, out.fileno(), 2),
                ],
            )
        return pid
    import pty

    pid, master = pty.fork()
    if pid == 0:  # the child: gpuscale with the dashboard in this terminal
        try:
            os.chdir(cwd)
            os.environ.update({"TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"})
            os.execv(sys.executable, [sys.executable, "-m", "gpuscale", *argv])
        finally:
            os._exit(127)
    os.set_blocking(master, False)  # left open: the dashboard never blocks writing
    return pid


@pytest.mark.parametrize("terminal", [False, True], ids=["piped", "terminal"])
def test_kill_9_of_gpuscale_watch_takes_the_script_and_its_children(tmp_path, terminal):
    pids_file = tmp_path / "pids"
    argv = ["watch", "--no-record", "--", sys.executable, "-c", _script(pids_file)]
    pid = _start_watch(argv, tmp_path, terminal)
    reaped = False
    try:
        deadline = time.monotonic() + 60
        while not (pids_file.exists() and pids_file.read_text()):
            assert time.monotonic() < deadline, "the script did not start"
            time.sleep(0.05)
        pids = [int(p) for p in pids_file.read_text().split()]
        assert all(not _gone(p) for p in pids)
        os.kill(pid, signal.SIGKILL)  # gpuscale runs no code of its own after this
        os.waitpid(pid, 0)
        reaped = True
        leftover = _wait_gone(pids)
    finally:
        if not reaped:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    for leftover_pid in leftover:
        os.kill(leftover_pid, signal.SIGKILL)
    assert leftover == [], "the script or its child outlived gpuscale"


def test_a_reaper_that_died_is_replaced_and_told_every_group():
    """Someone killed the reaper: the next child still starts (a write to the dead
    reaper's pipe must not kill it), and a new reaper knows every group."""
    from gpuscale.live import child

    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    first = child.spawn(sleeper, start_new_session=True)
    second = None
    try:
        old = child._reaper._proc
        assert old is not None and first.pid in child._reaper.groups
        old.kill()
        old.wait()
        second = child.spawn(sleeper, start_new_session=True)
        time.sleep(0.2)
        assert second.poll() is None and first.poll() is None
        new = child._reaper._proc
        assert new is not None and new is not old and new.poll() is None
        assert {first.pid, second.pid} <= child._reaper.groups
    finally:
        for proc in (first, second):
            if proc is not None:
                proc.kill()
                proc.wait()
                child.release(proc)
    assert not {first.pid, second.pid} & child._reaper.groups
