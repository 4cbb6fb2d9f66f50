"""In a real terminal: SIGTERM or SIGINT quits `gpuscale replay` cleanly (no
traceback, exit 130), as `q` would; the Ctrl-C key stops `gpuscale watch` and exits
130 (Textual reads the key itself: no SIGINT is sent)."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

SAMPLE = Path(__file__).resolve().parent.parent / "sample_runs" / "mnist-cnn_2xcpu.ndjson"


@pytest.mark.skipif(shutil.which("script") is None, reason="needs util-linux 'script' for a pty")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_to_gpuscale_replay_quits_without_a_traceback(signum):
    command = shlex.join([sys.executable, "-m", "gpuscale", "replay", str(SAMPLE)])
    proc = subprocess.Popen(
        ["script", "-qec", command + "; echo EXIT=$?", "/dev/null"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "100", "LINES": "30"},
    )
    output = bytearray()

    def read_all() -> None:
        for chunk in iter(lambda: proc.stdout.read1(65536), b""):
            output.extend(chunk)

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 60
        replay = None
        while replay is None and time.monotonic() < deadline:
            for child in psutil.Process(proc.pid).children(recursive=True):
                try:
                    if "replay" in child.cmdline() and "gpuscale" in " ".join(child.cmdline()):
                        if child.name() != "script" and "-c" not in child.cmdline()[1:2]:
                            replay = child
                except psutil.NoSuchProcess:
                    pass
            time.sleep(0.1)
        assert replay is not None, "the replay process did not start"
        # The app has drawn its header: it has the terminal and its signal handlers
        # (waiting a fixed 3 s instead was too short on a busy machine).
        while b"mnist-cnn-w32" not in bytes(output):
            assert time.monotonic() < deadline, "the dashboard never drew"
            time.sleep(0.1)
        replay.send_signal(signum)
        proc.wait(timeout=60)
        reader.join(timeout=10)
    finally:
        proc.kill()
    text = bytes(output).decode("utf-8", "replace")
    assert "Traceback" not in text
    assert "EXIT=130" in text


@pytest.mark.skipif(shutil.which("script") is None, reason="needs util-linux 'script' for a pty")
def test_the_ctrl_c_key_stops_gpuscale_watch_with_exit_130(tmp_path):
    recording = tmp_path / "watched.ndjson"
    # the key reaches the script as Ctrl-C (its own handler runs, as run alone); one
    # without a handler prints Python's KeyboardInterrupt traceback, its own output
    script = (
        "import time\nprint('script running', flush=True)\n"
        "try:\n    time.sleep(120)\nexcept KeyboardInterrupt:\n"
        "    print('script saw Ctrl-C', flush=True)\n"
    )
    command = shlex.join(
        [sys.executable, "-m", "gpuscale", "watch", "--record", str(recording), "--"]
        + [sys.executable, "-c", script]
    )
    proc = subprocess.Popen(
        ["script", "-qec", command + "; echo EXIT=$?", "/dev/null"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "100", "LINES": "30"},
    )
    output = bytearray()

    def read_all() -> None:
        for chunk in iter(lambda: proc.stdout.read1(65536), b""):
            output.extend(chunk)

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 60
        while not recording.exists() or b"script running" not in recording.read_bytes():
            assert time.monotonic() < deadline, "the run never started"
            time.sleep(0.1)
        proc.stdin.write(b"\x03")  # the key, typed into the terminal
        proc.stdin.flush()
        proc.wait(timeout=60)
        reader.join(timeout=10)
    finally:
        proc.kill()
    text = bytes(output).decode("utf-8", "replace")
    assert "Traceback" not in text
    assert "stopped (Ctrl-C)" in text and "EXIT=130" in text
    # what ran, as `gpuscale run` prints it after Ctrl-C (it said only "recorded to")
    summary = text[text.rindex("\x1b[?1049l") :]  # after the screen closed
    # the script (no callback) had sent no start of its own before the key, within its
    # first 15 s: a stop before its start, said as such, recorded all the same
    flat = " ".join(summary.split())  # unwrapped
    assert "before any start from gpuscale's callback: no step times" in flat, flat
    assert f"recorded to {recording}" in flat
    from gpuscale.recording.reader import load_run

    loaded = load_run(recording)
    assert loaded.end is not None and loaded.end.status == "stopped"
    assert "script saw Ctrl-C" in [getattr(e, "message", None) for e in loaded.events]
