"""Recordings as recommend input: each becomes one sweep point with a label
that is the same at every device count; a damaged one is one clear error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuscale.analysis.sweep import load_inputs, points_from_recordings
from gpuscale.cli import main
from gpuscale.events.schema import StartEvent, encode
from tests.recording_samples import steady_steps


def _record(path: Path, devices: int, step_s: float, allreduce_s: float) -> Path:
    t = 1_800_000_000.0
    cfg = {"strategy": "mirrored", "all_reduce": "auto", "model": "mnist-cnn"}
    events = [
        StartEvent(
            t=t,
            gpuscale_version="0",
            host="h",
            pid=1,
            config=cfg,
            model="mnist-cnn-w32",
            strategy="mirrored",
            cross_device_ops="collective" if devices > 1 else None,
            num_replicas=devices,
            scaling="weak",
            per_replica_batch=32,
            global_batch=32 * devices,
            payload_bytes=265_384,
            platform="cpu-logical",
        )
    ]
    events += steady_steps(events[0], 12, step_s, allreduce_s, probe_every=4)
    path.write_bytes(b"".join(encode(e) + b"\n" for e in events))
    return path


def test_recordings_become_points_with_one_label(tmp_path):
    paths = [
        _record(tmp_path / "r1.ndjson", 1, 0.100, 0.0),
        _record(tmp_path / "r2.ndjson", 2, 0.110, 0.010),
        _record(tmp_path / "r4.ndjson", 4, 0.115, 0.015),
    ]
    points = points_from_recordings(paths)
    assert [p.devices for p in points] == [1, 2, 4]
    assert len({p.config for p in points}) == 1
    assert points[0].config == "mnist-cnn-w32, mirrored, batch 32/replica, CPU devices"
    assert points[1].allreduce_s == pytest.approx(0.010)
    assert points[2].throughput == pytest.approx(128 / 0.115)
    assert all(p.steps == 10 for p in points)


def test_recommend_from_recordings_and_a_sweep_file_together(tmp_path, capsys):
    r1 = _record(tmp_path / "r1.ndjson", 1, 0.100, 0.0)
    r2 = _record(tmp_path / "r2.ndjson", 2, 0.110, 0.010)
    assert main(["recommend", "--json", "--max-devices", "2", "--from", str(r1), str(r2)]) == 0
    doc = json.loads(capsys.readouterr().out)
    rec = doc["recommendation"]
    assert (rec["verdict"], rec["devices"], rec["predicted"]) == ("multi", 2, False)  # 91%
    model = doc["models"][0]
    # CPU logical devices: a 2-device ring moves 2 payloads on the shared cores
    assert model["basis"] == "phases" and model["beta_s"] == pytest.approx(0.010 / 2)
    saved = tmp_path / "sweep.json"
    saved.write_text(json.dumps(doc))
    r4 = _record(tmp_path / "r4.ndjson", 4, 0.115, 0.015)
    sweep = load_inputs([saved, r4])
    assert sorted(p.devices for p in sweep.points) == [1, 2, 4]


def test_a_damaged_recording_says_its_damage_then_one_error_line(tmp_path, capsys):
    bad = tmp_path / "bad.ndjson"
    good = _record(tmp_path / "r1.ndjson", 1, 0.1, 0.0).read_text().splitlines()
    bad.write_text(good[0] + "\n" + '{"kind":"step","t":"soon"}\n')
    assert main(["recommend", "--from", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"gpuscale: error: {bad}: no usable steps")
    assert all(line.startswith("gpuscale: warning: ") for line in err[:-1])
    assert any("line 2: not a valid 'step' event" in line for line in err[:-1])


def test_every_step_line_damaged_warns_as_replay_does(tmp_path, capsys):
    """``--from`` says the per-line warnings and the count of damaged lines, as
    ``replay`` does, before its error: the damage is why nothing could be timed."""
    lines = _record(tmp_path / "r1.ndjson", 1, 0.1, 0.0).read_text().splitlines()
    damaged = [
        line.replace('"step_time_s":0.1', '"step_time_s":-1') if '"kind":"step"' in line else line
        for line in lines
    ]
    assert damaged != lines
    bad = tmp_path / "bad.ndjson"
    bad.write_text("\n".join(damaged) + "\n")
    assert main(["recommend", "--from", str(bad)]) == 2
    recommend_err = capsys.readouterr().err.splitlines()
    assert main(["replay", str(bad)]) == 0  # stdout is not a terminal: its summary
    replay_warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert any("damaged lines skipped" in line for line in replay_warnings)
    assert recommend_err[:-1] == replay_warnings
    assert "error" in recommend_err[-1] and "warm-up" not in recommend_err[-1]


def test_a_script_without_the_callback_says_to_add_it(capsys):
    """A real H100 recording of a script without gpuscale's callback: no step
    times, and the fix, rather than a guess about the warm-up."""
    recording = Path(__file__).resolve().parent / "fixtures" / "h100_load.ndjson"
    assert main(["recommend", "--from", str(recording)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "does not use gpuscale's callback" in err[0]
    assert "callbacks=[gpuscale.keras.ScalingMonitor()]" in err[0]
    assert "warm-up" not in err[0]


def _failed_before_its_first_step(path: Path) -> Path:
    """What `gpuscale run --model mymod:build` left (build() returned an int): the
    provisional start, TensorFlow's log, the trainer's error, a failed end."""
    from gpuscale.events.schema import EndEvent, ErrorEvent, LogEvent

    t = 1_800_000_100.0
    events = [
        StartEvent(
            t=t,
            gpuscale_version="0",
            host="h",
            pid=2,
            provisional=True,
            config={"strategy": "mirrored", "model": "mymod:build"},
            model="mymod:build",
            strategy="mirrored",
            num_replicas=2,
            platform="cpu-logical",
        ),
        LogEvent(t=t + 1, message="oneDNN custom operations are on", level="debug"),
        ErrorEvent(
            t=t + 2,
            message="--model mymod:build: build() returned 'int', not a Keras model",
        ),
        EndEvent(t=t + 2, status="failed", duration_s=2.0),
    ]
    path.write_bytes(b"".join(encode(e) + b"\n" for e in events))
    return path


def test_a_recording_without_steps_among_others_is_left_out_with_one_warning(tmp_path, capsys):
    """Trial: a failed run's leftover in the runs folder made `recommend --from
    runs/*.ndjson` stop with "no usable steps". Each such recording is now left
    out, one warning naming it and why, and the rest recommended from."""
    r1 = _record(tmp_path / "r1.ndjson", 1, 0.100, 0.0)
    failed = _failed_before_its_first_step(tmp_path / "failed.ndjson")
    r2 = _record(tmp_path / "r2.ndjson", 2, 0.110, 0.010)
    lines = r1.read_text().splitlines()  # every step line damaged: no step either
    damaged = tmp_path / "damaged.ndjson"
    damaged.write_text(
        "\n".join(x.replace('"kind":"step"', '"kind":"step","t":"x"') for x in lines) + "\n"
    )
    args = ["recommend", "--json", "--max-devices", "2", "--from", str(r1), str(failed)]
    assert main([*args, str(r2), str(damaged)]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert sorted(p["devices"] for p in doc["points"]) == [1, 2]
    left_out = [x for x in captured.err.splitlines() if x.endswith("; left out")]
    assert left_out == [
        f"gpuscale: warning: {failed}: no steps: the run failed before its first step; left out",
        f"gpuscale: warning: {damaged}: no usable steps (the run ended before its first step, "
        "or its step lines are damaged); left out",
    ]
    assert any(f"{damaged}: line 2:" in x for x in captured.err.splitlines())  # its damage too
    assert doc["recommendation"]["warnings"][-1] == left_out[-1].removeprefix("gpuscale: warning: ")


def test_recordings_none_of_which_has_steps_are_one_error(tmp_path, capsys):
    failed = _failed_before_its_first_step(tmp_path / "failed.ndjson")
    other = _failed_before_its_first_step(tmp_path / "other.ndjson")
    assert main(["recommend", "--from", str(failed)]) == 2  # alone: its reason, as before
    assert capsys.readouterr().err.splitlines() == [
        f"gpuscale: error: {failed}: no steps: the run failed before its first step"
    ]
    assert main(["recommend", "--from", str(failed), str(other)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"gpuscale: warning: {failed}: no steps: the run failed before its first step; left out",
        f"gpuscale: warning: {other}: no steps: the run failed before its first step; left out",
        "gpuscale: error: none of the 2 recordings given has a step time to recommend from "
        "(each is said above)",
    ]
