"""Issue 17 case 8: `gpuscale watch`, `replay` and `run` in a terminal that goes away
(tmux kill-session, a closed ssh window: SIGHUP, then every write fails). The
process is gone within 5 s, its script with it, and the recording has its end."""

from __future__ import annotations

import os
import pty
import sys
import time
from pathlib import Path

import psutil
import pytest

from gpuscale.recording.reader import load_run

SAMPLE = Path(__file__).resolve().parent.parent / "sample_runs" / "mnist-cnn_2xcpu.ndjson"
LONG = "import time\nfor i in range(10000):\n    print('still training', i, flush=True)\n    time.sleep(0.1)\n"


def _in_a_terminal(argv: list[str], cwd: Path) -> tuple[int, int]:
    """Start ``argv`` as the session leader of a new pseudo-terminal: (pid, master fd)."""
    pid, master = pty.fork()
    if pid == 0:  # the child: the terminal is its controlling terminal
        try:
            os.chdir(cwd)
            os.environ.update({"TERM": "xterm-256color", "COLUMNS": "100", "LINES": "30"})
            os.execv(sys.executable, [sys.executable, *argv])
        finally:
            os._exit(127)
    return pid, master


def _read_until(master: int, ready, seconds: float = 60.0) -> bytes:
    """Read the terminal (so its writer never blocks) until ``ready(output so far)``:
    an event, not a time; ``seconds`` only keeps a hang from lasting for ever."""
    out = b""
    deadline = time.monotonic() + seconds
    os.set_blocking(master, False)
    while not ready(out):
        assert time.monotonic() < deadline, f"not ready after {seconds:g} s: {out[-500:]!r}"
        try:
            out += os.read(master, 65536)
        except BlockingIOError:
            time.sleep(0.05)
        except OSError:
            break
    return out


def _recorded(path: Path, message: str) -> bool:
    """The recording at ``path`` holds a log line ``message`` (flushed to disk)."""
    return path.exists() and f'"message":"{message}"' in path.read_text()


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, _status = os.waitpid(pid, os.WNOHANG)
        if done:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux pseudo-terminals")
@pytest.mark.parametrize("command", ["watch", "replay", "run"])
def test_issue17_case8_a_lost_terminal_ends_gpuscale_within_5_s(tmp_path, command):
    if command in ("watch", "run"):
        argv = ["-m", "gpuscale", command, "--record", "w.ndjson", "--", sys.executable, "-c", LONG]
    else:
        argv = ["-m", "gpuscale", "replay", str(SAMPLE)]
    pid, master = _in_a_terminal(argv, tmp_path)
    script = None
    try:
        # the terminal goes once gpuscale has it: the dashboard drawn (its footer),
        # the script's first line recorded
        recording = tmp_path / "w.ndjson"
        _read_until(
            master,
            lambda out: (
                (command == "run" or b"Quit" in out)
                and (command == "replay" or _recorded(recording, "still training 0"))
            ),
        )
        if command in ("watch", "run"):
            deadline = time.monotonic() + 30
            while script is None and time.monotonic() < deadline:
                children = psutil.Process(pid).children(recursive=True)
                script = next(
                    (c for c in children if "still training" in " ".join(c.cmdline())), None
                )
                time.sleep(0.1)
            assert script is not None, "the script did not start"
        os.close(master)  # the terminal goes away: SIGHUP, then writes fail
        master = -1
        assert _gone_within(pid, 5.0 + 1.0), "gpuscale outlived its terminal"
    finally:
        if master >= 0:
            os.close(master)
        try:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    if script is not None:
        try:
            script.wait(timeout=3)
        except psutil.TimeoutExpired:
            script.kill()
            raise AssertionError("the script outlived gpuscale") from None
        except psutil.NoSuchProcess:
            pass
        run = load_run(tmp_path / "w.ndjson")
        assert run.end is not None and run.end.status == "stopped"
