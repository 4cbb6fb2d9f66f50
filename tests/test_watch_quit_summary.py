"""`q` in `gpuscale watch` takes the dashboard off the screen: what ran stays, as
`gpuscale run` prints it (it used to leave only "recorded to ...")."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import sys
import termios
import time

SCRIPT = "import time; print('hello', flush=True); time.sleep(60)"


def _watch_in_a_pty(args: list[str], quit_after_s: float, env: dict[str, str]) -> tuple[int, str]:
    """Run ``gpuscale watch ARGS`` in an 100x30 pty, press q after ``quit_after_s``;
    its exit status and everything it wrote (escape codes removed)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: gpuscale in the pty
        os.environ.update(env)
        os.execv(sys.executable, [sys.executable, "-m", "gpuscale", "watch", *args])
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    started = time.monotonic()
    quit_sent = False
    out = bytearray()
    while time.monotonic() - started < 120:
        if not quit_sent and time.monotonic() - started >= quit_after_s:
            os.write(fd, b"q")
            quit_sent = True
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # the child closed the pty: it exited
                break
            if not data:
                break
            out += data
    else:
        os.kill(pid, 9)
    _, status = os.waitpid(pid, 0)
    text = re.sub(
        r"\x1b\[[0-9;?<>=]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]", "", out.decode("utf-8", "replace")
    )
    return os.waitstatus_to_exitcode(status), text


def test_q_leaves_the_runs_summary_on_the_terminal(tmp_path):
    env = {"GPUSCALE_DATA_DIR": str(tmp_path), "TERM": "xterm-256color"}
    code, text = _watch_in_a_pty(
        ["--record", str(tmp_path / "r.ndjson"), "--", sys.executable, "-c", SCRIPT],
        quit_after_s=4.0,
        env=env,
    )
    assert code == 0, text[-2000:]
    # the summary's first line, `run`'s words (no --devices given: the default count)
    summary_at = text.rfind("(the default)")
    assert summary_at > 0, text[-2000:]
    after = " ".join(text[summary_at:].split())  # unwrapped
    assert "stopped after" in after and "no step times (telemetry only)" in after, after
    assert f"recorded to {tmp_path / 'r.ndjson'}" in after
    assert (tmp_path / "r.ndjson").exists()


def test_q_after_a_failed_run_leaves_runs_error_line(tmp_path):
    """A failed run: after the screen closes, `run`'s `gpuscale: error:` line stays too
    (q used to leave only the summary and exit status 1)."""
    env = {"GPUSCALE_DATA_DIR": str(tmp_path), "TERM": "xterm-256color"}
    failing = "raise ValueError('boom in my code')"
    code, text = _watch_in_a_pty(
        ["--no-record", "--", sys.executable, "-c", failing], quit_after_s=4.0, env=env
    )
    assert code == 1, text[-2000:]
    after = " ".join(text[text.rfind("status: failed") :].split())  # the summary on, unwrapped
    assert "gpuscale: error: the script" in after and "exited with status 1" in after, after
