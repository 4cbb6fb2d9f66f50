"""A closed stdout pipe (``gpuscale ... | head -1``) ends every command quietly,
exit 0, in one place (:func:`gpuscale.cli.main`); no TensorFlow."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_runs"


@pytest.mark.parametrize(
    "argv",
    [
        ["recommend", "--from", str(SAMPLES / "seed000_v100.json")],
        ["recommend", "--from", str(SAMPLES / "seed000_v100.json"), "--json"],
        ["replay", str(SAMPLES / "mnist-cnn_2xcpu.ndjson")],
        ["runs", "--dir", str(SAMPLES)],
        ["--help"],
    ],
    ids=["recommend", "recommend-json", "replay", "runs", "help"],
)
def test_a_closed_pipe_ends_quietly_with_status_0(argv):
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line: every write fails
    try:
        result = subprocess.run(
            [sys.executable, "-m", "gpuscale", *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            cwd=ROOT,
        )
    finally:
        os.close(write_end)
    err = [line for line in result.stderr.splitlines() if "replay shows the dashboard" not in line]
    assert result.returncode == 0, result.stderr
    assert err == [], result.stderr
