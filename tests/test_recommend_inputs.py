"""`recommend --from`: what the readers forgive is said on stderr, and one input
given twice is counted once."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gpuscale.analysis.sweep import load_inputs
from gpuscale.cli import main

SAMPLES = Path(__file__).resolve().parent.parent / "sample_runs"
ONE = SAMPLES / "mnist-cnn_1xcpu.ndjson"
TWO = SAMPLES / "mnist-cnn_2xcpu.ndjson"
KILLED = SAMPLES / "mnist-cnn_2xcpu_killed.ndjson"


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("gpuscale: warning: ")]


def test_a_killed_recording_is_read_with_its_warning_on_stderr(capsys):
    assert main(["recommend", "--no-chart", "--from", str(ONE), str(KILLED)]) == 0
    out, err = capsys.readouterr()
    (line,) = _warnings(err)
    assert str(KILLED) in line and "no end event" in line
    assert "no end event" not in out  # stdout stays the table
    assert load_inputs([ONE, KILLED]).warnings == [line.removeprefix("gpuscale: warning: ")]


def test_a_cut_last_line_is_warned_about_in_json_mode_too(capsys, tmp_path):
    cut = tmp_path / "cut.ndjson"
    data = TWO.read_bytes()
    cut.write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 20])  # the end event cut short
    assert main(["recommend", "--json", "--from", str(ONE), str(cut)]) == 0
    out, err = capsys.readouterr()
    json.loads(out)
    assert _warnings(err) and all(str(cut) in line for line in _warnings(err))


def test_warnings_are_escaped(capsys, tmp_path):
    hostile = tmp_path / "run\x1b]0;PWNED\x07.ndjson"
    shutil.copy(KILLED, hostile)
    assert main(["recommend", "--json", "--from", str(ONE), str(hostile)]) == 0
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err
    assert "\\x1b]0;PWNED\\x07" in err and len(_warnings(err)) == 1


@pytest.mark.parametrize("content", [b"", b"\n  \n", b"\xef\xbb\xbf"])
def test_an_empty_file_says_empty_file_as_replay_does(capsys, tmp_path, content):
    """What a failed ``recommend --json > sweep.json`` leaves: 'empty file', not a
    JSON parser's 'truncated'."""
    empty = tmp_path / "sweep.json"
    empty.write_bytes(content)
    assert main(["recommend", "--from", str(empty)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"gpuscale: error: {empty}: empty file: neither a sweep file nor a recording"
    if content == b"":  # replay's own reader says the same of a file with no byte
        assert main(["replay", str(empty)]) == 2
        assert "empty file" in capsys.readouterr().err


def _measured(capsys, *paths) -> tuple[list[int], list[str]]:
    assert main(["recommend", "--json", "--from", *map(str, paths)]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    return [p["devices"] for p in doc["points"] if not p.get("predicted")], _warnings(err)


def test_the_same_recording_twice_is_counted_once(capsys):
    counts, (line,) = _measured(capsys, ONE, TWO, TWO)
    assert counts == [1, 2]
    assert "given twice" in line and "counted once" in line


def test_another_path_to_the_same_file_or_a_copy_is_counted_once(capsys, tmp_path):
    copy = tmp_path / "copy.ndjson"
    shutil.copy(TWO, copy)
    (tmp_path / "link.ndjson").symlink_to(TWO)
    counts, lines = _measured(capsys, ONE, TWO, copy, tmp_path / "link.ndjson")
    assert counts == [1, 2]
    assert len(lines) == 2 and all("counted once" in line for line in lines)
    assert "the same run as" in lines[0] or "the same run as" in lines[1]


def _first_half(tmp_path: Path) -> Path:
    """TWO's first half, its last line cut mid-way: what a copy taken while the
    run was still writing holds (the same start event: the same run)."""
    half = tmp_path / "half.ndjson"
    lines = TWO.read_bytes().splitlines(keepends=True)
    half.write_bytes(b"".join(lines[: len(lines) // 2]) + lines[len(lines) // 2][:30])
    return half


@pytest.mark.parametrize("half_first", [True, False])
def test_of_two_copies_of_one_run_the_one_with_more_steps_is_kept(capsys, tmp_path, half_first):
    """The complete copy is kept whatever the order (the cut one, first, used to
    win), the warning names it and why, and --json carries what stderr said."""
    half = _first_half(tmp_path)
    full = load_inputs([TWO])
    paths = [half, TWO] if half_first else [TWO, half]
    sweep = load_inputs(paths)
    assert [p.steps for p in sweep.points] == [full.points[0].steps]
    assert sweep.sources == [str(TWO)]
    (warning,) = sweep.warnings  # the dropped copy's damage is not said: it was not used
    assert warning.startswith(f"{half}: the same run as {TWO}, which has more counted steps")
    assert warning.endswith(f"; kept {TWO}")
    assert main(["recommend", "--json", "--from", *map(str, paths)]) == 0
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert [p["steps"] for p in doc["points"] if not p.get("predicted")] == [full.points[0].steps]
    assert doc["recommendation"]["warnings"] == [
        w.removeprefix("gpuscale: warning: ") for w in _warnings(err)
    ]
    assert doc["recommendation"]["warnings"] == [warning]


def test_json_carries_the_readers_warnings_stderr_printed(capsys):
    assert main(["recommend", "--json", "--from", str(ONE), str(KILLED)]) == 0
    out, err = capsys.readouterr()
    said = [w.removeprefix("gpuscale: warning: ") for w in _warnings(err)]
    assert said and json.loads(out)["recommendation"]["warnings"] == said


def test_a_sweep_file_and_its_copy_count_once(tmp_path):
    copy = tmp_path / "copy.json"
    shutil.copy(SAMPLES / "seed000_v100.json", copy)
    once = load_inputs([SAMPLES / "seed000_v100.json"])
    twice = load_inputs([SAMPLES / "seed000_v100.json", copy])
    assert twice.points == once.points
    assert len(twice.warnings) == 1 and "the same points as" in twice.warnings[0]


def test_two_different_runs_at_one_count_are_both_kept():
    sweep = load_inputs([ONE, TWO, KILLED])
    assert sorted(p.devices for p in sweep.points) == [1, 2, 2]


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--sweep", "1,2"], "--sweep"),
        (["--strategy", "mirrored"], "--strategy"),  # the default value, given: refused too
        (["--model", "mlp", "--steps", "10"], "--model, --steps"),
        (["--devices", "2"], "--devices"),
        (["--no-record"], "--no-record"),
        (["--no-reuse"], "--no-reuse"),
        (["--mixed-precision"], "--mixed-precision"),
        (["--strategy", "multi-worker"], "--strategy"),
    ],
)
def test_live_sweep_flags_with_from_are_refused_in_one_line(capsys, flags, named):
    assert main(["recommend", "--from", str(ONE), *flags]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith(f"gpuscale: error: {named} appl") and "--from" in err


def test_watch_with_from_is_refused_and_points_to_replay(capsys):
    assert main(["recommend", "--from", str(ONE), "--watch"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "gpuscale replay" in err


def test_flags_of_the_offline_recommendation_are_accepted(capsys):
    args = ["--max-devices", "4", "--min-efficiency", "50%", "--no-chart"]
    assert main(["recommend", "--from", str(ONE), str(TWO), *args]) == 0
    assert "Recommendation:" in capsys.readouterr().out


def test_sweeps_read_together_are_capped_by_the_largest_machine_any_could_use(capsys, tmp_path):
    """A --devices 2 sweep (1, 2) and a --sweep 4,8 one of the same 8-GPU machine:
    read together, the limit is 8, not 2 (the measured 4 and 8 are not 'above the
    limit', and the answer can be one of them)."""
    paths = []
    for name, limit, rows in (("a", 2, {1: 1000.0, 2: 1950.0}), ("b", 8, {4: 3800.0, 8: 7400.0})):
        path = tmp_path / f"{name}.json"
        path.write_text(
            json.dumps(
                {
                    "available_devices": limit,
                    "defaults": {"model": "m", "scaling": "weak", "per_replica_batch": 64},
                    "points": [{"devices": n, "throughput": x} for n, x in rows.items()],
                }
            )
        )
        paths.append(str(path))
    assert load_inputs(paths).available_devices == 8
    assert main(["recommend", "--from", *paths]) == 0
    out = capsys.readouterr().out
    assert "above limit" not in out
    assert "MULTI: 8 devices" in out
