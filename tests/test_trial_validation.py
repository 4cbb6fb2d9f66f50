"""A new user's trial (findings 4 and 8): impossible sweep values refused with
one line naming the field, and damaged inputs said in the same user words by
``recommend --from``, ``replay`` and ``runs``. TF-free."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from recording_samples import write_run

from gpuscale import cli
from gpuscale.analysis.sweep import read_sweep_file
from gpuscale.errors import GpuscaleError
from gpuscale.recording.store import list_runs

BASE = {"model": "m", "scaling": "weak", "per_replica_batch": 64}


def _cli(argv, capsys) -> tuple[int, str]:
    code = cli.main(argv)
    out = capsys.readouterr()
    return code, out.out + out.err


def _sweep(tmp_path: Path, second: dict, defaults: dict | None = None) -> Path:
    path = tmp_path / "sweep.json"
    doc = {
        "defaults": {**BASE, **(defaults or {})},
        "points": [{"devices": 1, "step_time_s": 0.1}, {"devices": 2, **second}],
    }
    path.write_text(json.dumps(doc))
    return path


# -- (4) phases that cannot fit in their step -------------------------------------


@pytest.mark.parametrize(
    ("second", "expected"),
    [
        (
            {"step_time_s": 0.12, "compute_s": 0.5, "allreduce_s": 0.3, "apply_s": 0.01},
            "points[1].compute_s (0.5 s) is longer than its step_time_s (0.12 s)",
        ),
        (
            {"step_time_s": 0.1, "input_s": 0.5},
            "points[1].input_s (0.5 s) is longer than its step_time_s (0.1 s)",
        ),
        (
            {"step_time_s": 0.1, "allreduce_s": 0.2},
            "points[1].allreduce_s (0.2 s) is longer than its step_time_s (0.1 s)",
        ),
        (
            {"throughput": 1280, "apply_s": 0.3},  # the step from its timing: 0.1 s
            "points[1].apply_s (0.3 s) is longer than its step (0.1 s, from its timing)",
        ),
        (
            {"step_time_s": 0.1, "compute_s": 0.1, "allreduce_s": 0.06, "input_s": 0.05},
            "points[1]: its phases (compute_s + allreduce_s + input_s = 0.21 s) add up to "
            "more than 2 times its step_time_s (0.1 s)",
        ),
    ],
)
def test_phases_that_cannot_fit_in_the_step_are_one_line(tmp_path, capsys, second, expected):
    """Trial 4: compute 0.5 s in a 0.12 s step gave "exposed comm 250%"."""
    path = _sweep(tmp_path, second)
    for command in (["recommend", "--from"], ["replay"]):
        code, output = _cli([*command, str(path)], capsys)
        assert code == 2 and output == f"gpuscale: error: {path}: {expected}\n", output


def test_a_phase_from_the_defaults_names_the_defaults(tmp_path):
    path = _sweep(tmp_path, {"step_time_s": 0.1}, defaults={"compute_s": 0.3})
    with pytest.raises(GpuscaleError) as info:
        read_sweep_file(path)
    assert (
        str(info.value)
        == f"{path}: defaults.compute_s (0.3 s) is longer than points[0]'s step (0.1 s)"
    )


@pytest.mark.parametrize(
    "second",
    [
        {"step_time_s": 0.1, "compute_s": 0.08, "allreduce_s": 0.04, "apply_s": 0.01},  # 1.3x
        {"step_time_s": 0.1, "compute_s": 0.15},  # one phase at the limit
        {"step_time_s": 0.1, "compute_s": 0.12, "allreduce_s": 0.07},  # sum 1.9x
    ],
)
def test_phases_somewhat_over_the_step_are_noise_and_accepted(tmp_path, second):
    (point,) = [p for p in read_sweep_file(_sweep(tmp_path, second)).points if p.devices == 2]
    assert point.compute_s == second["compute_s"]


def test_the_rule_is_documented():
    text = (Path(__file__).resolve().parent.parent / "docs" / "sweep-format.md").read_text()
    text = " ".join(text.split())
    assert "more than 1.5 times the step" in text and "more than 2 times it" in text
    assert "points[1].compute_s (0.5 s) is longer than its step_time_s (0.12 s)" in text


# -- (8) a number beyond a float's range names its field --------------------------


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda d: d["points"][0].update(step_time_s="HUGE"), "points[0].step_time_s"),
        (lambda d: d["defaults"].update(per_replica_batch="HUGE"), "defaults.per_replica_batch"),
        (lambda d: d.update(available_devices="-HUGE"), "available_devices"),
    ],
)
def test_a_number_out_of_range_names_its_field(tmp_path, capsys, edit, expected):
    """Trial 8: `1e999` gave "Number out of range - at `$[...][0][...]`"."""
    doc = {"defaults": dict(BASE), "points": [{"devices": 1, "step_time_s": 0.1}]}
    edit(doc)
    path = tmp_path / "huge.json"
    text = json.dumps(doc).replace('"-HUGE"', "-1e999").replace('"HUGE"', "1e999")
    path.write_text(text)
    sign = "-" if "-1e999" in text else ""
    code, output = _cli(["recommend", "--from", str(path)], capsys)
    line = f"gpuscale: error: {path}: {expected} must be a finite number (got {sign}1e999)\n"
    assert code == 2 and output == line, output


# -- (8) the same damage, the same words in recommend --from and replay -----------


def _start_line(tmp_path: Path) -> bytes:
    return write_run(tmp_path / "good.ndjson").read_bytes().split(b"\n")[0]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        # a recording whose start line was cut off (trial 8: "not valid JSON" in one)
        (lambda tmp: _start_line(tmp)[:100], "line 1: the start event is cut off"),
        (lambda tmp: b'{"points":[', "not valid JSON (it ends early)"),
        (lambda tmp: b"hello world\n", "neither a recording nor a sweep file: not valid JSON"),
    ],
)
def test_recommend_from_and_replay_say_the_same_of_the_same_damage(
    tmp_path, capsys, content, expected
):
    path = tmp_path / "damaged.ndjson"
    path.write_bytes(content(tmp_path))
    said = []
    for command in (["recommend", "--from"], ["replay"]):
        code, output = _cli([*command, str(path)], capsys)
        assert code == 2 and output.count("\n") == 1, output
        said.append(output)
    assert said[0] == said[1] and f"{path}: {expected}" in said[0], said


def test_an_oversized_sweep_file_is_one_line_not_a_traceback(tmp_path, capsys):
    """A sweep file over the size limit starting like JSON: the reader refuses it
    before any data is read (there is none to look at), in one line, in both
    commands (it was an UnboundLocalError). Sparse: 70 MiB on disk in no time."""
    path = tmp_path / "big.json"
    with path.open("wb") as f:
        f.write(b'{"points": [')
        f.truncate(70 * 1024 * 1024)
    for command in (["recommend", "--from"], ["replay"]):
        code, output = _cli([*command, str(path)], capsys)
        assert code == 2 and output.count("\n") == 1, output
        assert output.startswith(f"gpuscale: error: {path}: 73.4 MB is more than"), output


# -- (8) a corrupt .gz in `runs` --------------------------------------------------


def test_runs_says_what_is_wrong_with_a_corrupt_gzip(tmp_path, capsys):
    """Trial 8: "bad.ndjson.gz: cannot be listed (TypeError)"."""
    data = write_run(tmp_path / "good.ndjson").read_bytes()
    (tmp_path / "bad.ndjson.gz").write_bytes(b"\x1f\x8bgarbage")
    (tmp_path / "cut.ndjson.gz").write_bytes(gzip.compress(data)[:6])
    packed = bytearray(gzip.compress(data))
    packed[len(packed) // 2 : len(packed) // 2 + 40] = bytes(40)
    (tmp_path / "damaged.ndjson.gz").write_bytes(bytes(packed))
    problems = {Path(r.path).name: r.problem for r in list_runs(tmp_path)}
    assert problems["bad.ndjson.gz"].startswith("not a gzip file"), problems
    assert problems["cut.ndjson.gz"].startswith("cut off"), problems
    assert problems["damaged.ndjson.gz"].startswith("its gzip data is damaged"), problems
    code, output = _cli(["runs", "--dir", str(tmp_path)], capsys)
    assert code == 0 and "Error" not in output and "TypeError" not in output, output
    assert "bad.ndjson.gz: not a gzip file" in output, output
