"""Ctrl-C while a script is still starting (before gpuscale's callback could say
anything): the run is recorded as what was asked (``--devices 2``, the script's
name), lasts from the launch, and no "the script does not use the callback"
warning is given (nothing tells). A stand-in script, no TensorFlow."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from gpuscale.recording.reader import load_run

STARTING = "import time\nprint('loading', flush=True)\ntime.sleep(120)\n"


def test_ctrl_c_while_a_script_starts_is_recorded_as_asked(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(STARTING)
    data = tmp_path / "data"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuscale",
            "run",
            "--devices",
            "2",
            "--",
            sys.executable,
            str(script),
        ],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "COLUMNS": "100", "GPUSCALE_DATA_DIR": str(data)},
    )
    runs = data / "runs"
    try:
        deadline = time.monotonic() + 60  # a hang guard, not a timing promise
        while not (runs.is_dir() and any(runs.iterdir())):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.05)
        time.sleep(1.0)  # the run has lasted a while
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    text = out.decode()
    assert "does not use gpuscale's callback" not in text, text
    assert text.count("stopped before") == 1, text
    assert "train.py on 2 x CPU" in text and "(as asked)" in text, text
    assert "stopping the script" in text, text
    (path,) = runs.iterdir()
    assert path.name.endswith("_train.py_2xcpu.ndjson"), path
    run = load_run(path)
    assert run.start.num_replicas == 2 and run.start.model == "train.py"
    assert run.end.status == "stopped" and run.end.duration_s >= 1.0
