"""`recommend --json` read back with `recommend --from` says the same: the same
rows, measured and predicted, the same numbers and ranges. Repeated runs at one
count are one row in the file (their median, range and pooled probes), so the
model is fitted to that row in the first run too, not to the raw runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuscale.cli import main

FIXTURES = Path(__file__).parent / "fixtures"
SAMPLES = Path(__file__).resolve().parent.parent / "sample_runs"
REP = FIXTURES / "rep_two_runs.json"


def _json(capsys, *args: str) -> dict:
    assert main(["recommend", "--json", "--no-chart", *args]) == 0
    return json.loads(capsys.readouterr().out)


def _round_trip(capsys, tmp_path, *inputs: str) -> tuple[dict, dict]:
    first = _json(capsys, "--from", *inputs)
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps(first))
    return first, _json(capsys, "--from", str(saved))


def _repeats(tmp_path) -> Path:
    """Two configurations, the second's 2-device count run three times, 40% apart:
    runs that disagree (a busy machine) with some of them probed."""
    doc = json.loads(REP.read_text())
    doc["points"] += [
        {"devices": 1, "step_time_s": 0.11, "config": "ring2", "steps": 90, "spread": 0.04},
        {"devices": 2, "step_time_s": 0.07, "config": "ring2", "steps": 80, "spread": 0.1},
        {"devices": 2, "step_time_s": 0.05, "config": "ring2", "steps": 100, "spread": 0.02},
        {"devices": 4, "step_time_s": 0.04, "config": "ring2", "steps": 95, "spread": 0.05},
        {"devices": 4, "step_time_s": 0.042, "config": "ring2", "steps": 60, "spread": 0.05},
    ]
    path = tmp_path / "repeats.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    "inputs",
    [
        [str(REP)],
        ["REPEATS"],
        [str(SAMPLES / "mnist-cnn_1xcpu.ndjson"), str(SAMPLES / "mnist-cnn_2xcpu.ndjson")],
    ],
    ids=["repeated-runs", "two-configs-repeated", "recordings"],
)
def test_json_read_back_predicts_the_same_rows(capsys, tmp_path, inputs):
    inputs = [str(_repeats(tmp_path)) if name == "REPEATS" else name for name in inputs]
    first, again = _round_trip(capsys, tmp_path, *inputs)
    predicted = [p for p in first["points"] if p.get("predicted")]
    assert predicted, "the input predicts no count: nothing to compare"
    assert [p for p in again["points"] if p.get("predicted")] == predicted
    assert again["points"] == first["points"]  # the measured rows too
    assert again["models"] == first["models"]
    for key in ("verdict", "devices", "config", "throughput", "speedup", "reasons", "advice"):
        assert again["recommendation"][key] == first["recommendation"][key], key


def test_repeated_runs_are_fitted_as_the_row_the_table_shows(capsys, tmp_path):
    """The Confidence lines speak of the row (its steps, the spread its runs' range
    was folded into), as read back, and the disagreement is still warned of."""
    first, again = _round_trip(capsys, tmp_path, str(REP))
    rec = first["recommendation"]
    assert rec["confidence"][0] == again["recommendation"]["confidence"][0]
    assert "spread (p10-p90) up to 33%" in rec["confidence"][0]
    assert any("disagree" in w for w in rec["warnings"])
