"""`gpuscale run --json` says every field a number needs to be read: `"scaling": "weak"`
as well as `"strong"`, `"devices": 1`, `"workers": 1` (the recorded summary omits a
field equal to its default, and --json used to print it as recorded)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import msgspec

from gpuscale.analysis.summary import RunSummary, with_defaults


def test_with_defaults_says_the_fields_omit_defaults_drops():
    summary = RunSummary(model="mlp", devices=1, scaling="weak", strategy="mirrored")
    summary.per_replica_batch = summary.global_batch = 64
    recorded = msgspec.to_builtins(summary)
    assert "scaling" not in recorded and "devices" not in recorded  # as recorded
    said = with_defaults(recorded)
    assert said["scaling"] == "weak" and said["devices"] == 1 and said["workers"] == 1
    assert said["exchange"] == "ring"
    assert said["model"] == "mlp" and "step_time_s" not in said  # None: not measured


def test_with_defaults_keeps_what_the_summary_says():
    said = with_defaults({"scaling": "strong", "devices": 4, "gpu_util_mean_pct": 50.0})
    assert said["scaling"] == "strong" and said["devices"] == 4
    assert said["gpu_util_mean_pct"] == 50.0


def test_run_json_says_devices_and_workers_and_null_for_what_a_script_does_not_say(tmp_path):
    """A script without gpuscale's callback: its devices and workers as gpuscale
    sees them, its scaling (and exchange) null: not known (it said "weak" once)."""
    proc = subprocess.run(
        [sys.executable, "-m", "gpuscale", "run", "--json", "--no-record", "--"]
        + [sys.executable, "-c", "print('hello')"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, "GPUSCALE_DATA_DIR": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["scaling"] is None and doc["devices"] == 1 and doc["workers"] == 1, doc
    assert doc["exchange"] is None
