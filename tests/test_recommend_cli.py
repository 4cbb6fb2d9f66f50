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


@pytest.mark.parametrize("name", sorted(p.name for p in SAMPLES.glob("seed*.json")))
def test_the_from_line_says_the_origin_document_is_not_shipped(capsys, name):
    """The seeds/NNN_....txt a shipped table names is not in the repository: its
    `from` line says what it is (and where the README explains it)."""
    assert main(["recommend", "--no-chart", "--from", str(SAMPLES / name)]) == 0
    first = " ".join(capsys.readouterr().out.split("\n\n")[0].split())
    assert first.startswith("from origin document 0")
    assert "the project's source material seeds/" in first and "not shipped" in first
    assert "sample_runs/README.md" in first


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
        ('{"points": []}', "its 'points' list is empty"),
        (  # the published corpus: what it is and how to use a table of it, not a raw enum error
            '{"format": "published-scaling-tables", "version": 1, "tables": [{"id": "t"}]}',
            "the corpus of 1 published scaling tables (published-scaling-tables), not a sweep file",
        ),
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


SHAPE = (
    'a sweep file is one JSON object, {"points": [...]}, with one point per measured device '
    "count (docs/sweep-format.md)"
)


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("{}", f"no 'points' list: {SHAPE}"),
        ('{"title": "t"}', f"no 'points' list: {SHAPE}"),
        ("[]", f"a JSON list, not a sweep file: {SHAPE}"),
        ('[{"devices": 1}]', f"a JSON list, not a sweep file: {SHAPE}"),
        ('"points"', f"a JSON string, not a sweep file: {SHAPE}"),
        ('{"points": []}', f"its 'points' list is empty: {SHAPE}"),
        (
            '{"points": [{"devices": 2, "scaling": "weak", "global_batch": 8, '
            '"step_time_s": 1, "predicted": true}]}',
            'no measured points: its one point is predicted ("predicted": true), and a '
            "recommendation needs measured ones",
        ),
    ],
    ids=["object", "no-points", "list", "list-of-points", "string", "empty-points", "predicted"],
)
def test_a_sweep_file_of_the_wrong_shape_says_what_is_expected(tmp_path, capsys, content, said):
    """Trial: ``{}`` said "no measured points", ``[]`` "one JSON object with a
    'points' list": each now says what it is and what a sweep file is."""
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    assert main(["recommend", "--from", str(bad)]) == 2
    assert capsys.readouterr().err.splitlines() == [f"gpuscale: error: {bad}: {said}"]


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


@pytest.mark.parametrize(
    ("text", "value"), [("0.6", 0.6), ("1", 1.0), ("70%", 0.7), ("100%", 1.0), (" 55% ", 0.55)]
)
def test_min_efficiency_takes_a_fraction_or_a_percentage_with_a_percent_sign(text, value):
    from gpuscale.commands.recommend import _fraction

    assert _fraction(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["1.5", "70", "0", "-0.5", "150%", "0%", "nan", "six"])
def test_min_efficiency_out_of_range_is_one_error_line(capsys, text):
    with pytest.raises(SystemExit) as exit_info:
        main(["recommend", "--from", str(SAMPLES / "seed002_mnist.json"), "--min-efficiency", text])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--min-efficiency" in err[0] and "60%" in err[0], err


def test_max_devices_caps_measured_counts_too(capsys):
    # seed 002 measured up to 8 GPUs; a machine with 2 gets 2 (never "8 devices").
    doc = _json(capsys, "--from", str(SAMPLES / "seed002_mnist.json"), "--max-devices", "2")
    assert doc["recommendation"]["devices"] <= 2
    assert (
        main(["recommend", "--from", str(SAMPLES / "seed002_mnist.json"), "--max-devices", "2"])
        == 0
    )
    out = capsys.readouterr().out
    table, verdict = out.split("Recommendation:", 1)
    assert verdict.startswith(" MULTI: 2 devices") and "above" in table


def test_live_multi_worker_sweep_is_refused_with_one_line(capsys):
    assert main(["recommend", "--strategy", "multi-worker", "--sweep", "1,2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--from" in err[0] and "multi-worker" in err[0]


def test_off_a_terminal_the_table_keeps_every_column_unless_columns_is_set(capsys, monkeypatch):
    # piped (capsys is no terminal): the step time column and whole marks, as README says
    monkeypatch.delenv("COLUMNS", raising=False)
    args = ["recommend", "--no-chart", "--price-per-device-hour", "2.5"]
    assert main([*args, "--from", str(SAMPLES / "seed000_m60.json")]) == 0
    out = capsys.readouterr().out
    headers = [line for line in out.splitlines() if line.startswith("\u2503")]
    assert headers and all("step time" in line for line in headers)
    assert "measured  <- recommended" in out and "meas." not in out
    assert not any(line != line.rstrip() for line in out.splitlines())
    # COLUMNS set explicitly still wins: the 80-column layout
    monkeypatch.setenv("COLUMNS", "80")
    assert main([*args, "--from", str(SAMPLES / "seed000_m60.json")]) == 0
    out = capsys.readouterr().out
    headers = [line for line in out.splitlines() if line.startswith("\u2503")]
    assert headers and not any("step time" in line for line in headers) and "meas." in out
