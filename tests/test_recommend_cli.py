"""`gpuscale recommend --from` on the shipped origin tables, --json round trip,
bad input, and no TensorFlow."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuscale.cli import main

SAMPLES = Path(__file__).resolve().parent.parent / "sample_runs"


def _json(capsys, *args: str) -> dict:
    assert main(["recommend", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def _configs(doc: dict) -> dict[str, int]:
    return {c["config"]: c["devices"] for c in doc["recommendation"]["configs"]}


def test_seed000_v100_stay_on_one_gpu_with_variables_on_the_gpu(capsys):
    rec = _json(capsys, "--from", str(SAMPLES / "seed000_v100.json"))["recommendation"]
    assert (rec["verdict"], rec["devices"], rec["config"]) == ("single", 1, "variables on GPU")
    assert any("Keep the variables on the GPUs" in a for a in rec["advice"])


def test_seed000_m60_more_gpus_pay(capsys):
    rec = _json(capsys, "--from", str(SAMPLES / "seed000_m60.json"))["recommendation"]
    assert rec["verdict"] == "multi" and rec["devices"] == 4
    assert not rec["predicted"]


def test_seed002_nccl_at_8_pays_and_gathering_stops_at_4(capsys):
    doc = _json(capsys, "--from", str(SAMPLES / "seed002_mnist.json"))
    rec = doc["recommendation"]
    assert (rec["verdict"], rec["devices"], rec["config"]) == ("multi", 8, "nccl")
    assert _configs(doc) == {"nccl": 8, "gather on gpu:0": 4}
    assert any("NCCL all-reduce rather than gathering" in a for a in rec["advice"])


def test_floor_of_70_percent_turns_the_m60_into_single(capsys):
    # Documented in gpuscale.analysis.recommend: why the default floor is 0.6.
    rec = _json(capsys, "--from", str(SAMPLES / "seed000_m60.json"), "--min-efficiency", "70%")
    assert rec["recommendation"]["verdict"] == "single"


def test_json_reads_back_to_the_same_recommendation(capsys, tmp_path):
    first = _json(capsys, "--from", str(SAMPLES / "seed002_mnist.json"), "--max-devices", "16")
    saved = tmp_path / "sweep.json"
    saved.write_text(json.dumps(first))
    second = _json(capsys, "--from", str(saved), "--max-devices", "16")
    assert second["recommendation"] == first["recommendation"]
    assert [p for p in second["points"]] == [p for p in first["points"]]
    assert any(p.get("predicted") for p in first["points"])  # 16 GPUs: predicted rows


def test_rich_table_marks_predicted_rows_and_the_recommendation(capsys):
    assert main(["recommend", "--from", str(SAMPLES / "seed000_v100.json")]) == 0
    out = capsys.readouterr().out
    assert "Recommendation: SINGLE" in out
    assert "recommended" in out and "measured" in out
    assert "weak scaling" in out
    # seed 000's machines have 4 GPUs (available_devices): nothing predicted past them.
    assert "predicted" not in out.split("Recommendation")[0]
    # Asked for explicitly, predictions go further, marked as such.
    assert (
        main(["recommend", "--from", str(SAMPLES / "seed000_v100.json"), "--max-devices", "8"]) == 0
    )
    assert "predicted" in capsys.readouterr().out.split("Recommendation")[0]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("not json", "not valid JSON"),
        ('{"points": [{"devices": 0, "scaling": "weak"}]}', "points[0]"),
        (
            '{"points": [{"devices": 2, "scaling": "weak", "per_replica_batch": 8}]}',
            "needs a timing",
        ),
        (
            '{"points": [{"devices": 2, "scaling": "weak", "global_batch": 8, "step_tme_s": 1}]}',
            "step_tme_s",
        ),
        ('{"points": []}', "no measured points"),
    ],
)
def test_bad_input_exits_2_with_one_line_naming_the_file(tmp_path, content, expected):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    result = subprocess.run(
        [sys.executable, "-m", "gpuscale", "recommend", "--from", str(bad)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"gpuscale: error: {bad}") and expected in lines[0]


def test_missing_file_exits_2(capsys, tmp_path):
    assert main(["recommend", "--from", str(tmp_path / "nope.json")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_recommend_from_imports_no_tensorflow():
    code = (
        "import sys\n"
        "from gpuscale.cli import main\n"
        f"rc = main(['recommend', '--json', '--from', {str(SAMPLES / 'seed002_mnist.json')!r}])\n"
        "bad = {'tensorflow', 'keras', 'textual'} & {m.split('.')[0] for m in sys.modules}\n"
        "print('FORBIDDEN', sorted(bad), file=sys.stderr)\n"
        "sys.exit(rc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0
    assert "FORBIDDEN []" in result.stderr
