"""`gpuscale recommend` live: a real (tiny) sweep of the trainer on 1 and 2 CPU
logical devices, recorded; the recordings read back through --from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.tf


def _gpuscale(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpuscale", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_live_sweep_records_each_run_and_recommends(_isolated_data_dir: Path):
    env = {**os.environ, "GPUSCALE_DATA_DIR": str(_isolated_data_dir)}
    tiny = ["--width", "4", "--global-batch", "16", "--steps", "12", "--warmup-steps", "2"]
    result = _gpuscale(
        "recommend", "--sweep", "1,2", *tiny, "--phase-every", "4", "--json", env=env
    )
    assert result.returncode == 0, result.stderr[-2000:]
    doc = json.loads(result.stdout)
    measured = [p for p in doc["points"] if not p.get("predicted")]
    assert [p["devices"] for p in measured] == [1, 2]
    assert all(p["platform"] == "cpu-logical" and p["scaling"] == "strong" for p in measured)
    assert {p["global_batch"] for p in measured} == {16}
    assert doc["recommendation"]["verdict"] in ("single", "multi")
    recordings = [Path(p["source"]) for p in measured]
    assert all(r.exists() for r in recordings), recordings

    # The recordings alone give the same measured points (no TensorFlow needed).
    again = _gpuscale("recommend", "--json", "--from", *map(str, recordings), env=env)
    assert again.returncode == 0, again.stderr
    points = [p for p in json.loads(again.stdout)["points"] if not p.get("predicted")]
    assert [p["step_time_s"] for p in points] == [p["step_time_s"] for p in measured]
