"""A new user's trial (findings 4 and 8): sweep phases that cannot fit their step
left out with one warning naming the field (the step time kept), impossible
values refused with one line naming the field, and damaged inputs said in the
same user words by ``recommend --from``, ``replay`` and ``runs``. TF-free."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import pytest
from recording_samples import write_run

from gpuscale import cli
from gpuscale.analysis.sweep import PHASE_FIELDS, read_sweep_file
from gpuscale.events.schema import EndEvent, PhaseEvent, StartEvent, StepEvent
from gpuscale.recording.reader import load_run
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
            "points[1].compute_s (0.5 s) is more than 1.5 times its step_time_s (0.12 s)",
        ),
        (
            {"step_time_s": 0.1, "input_s": 0.5},
            "points[1].input_s (0.5 s) is more than 1.5 times its step_time_s (0.1 s)",
        ),
        (
            {"step_time_s": 0.1, "allreduce_s": 0.2},
            "points[1].allreduce_s (0.2 s) is more than 1.5 times its step_time_s (0.1 s)",
        ),
        (
            {"throughput": 1280, "apply_s": 0.3},  # the step from its timing: 0.1 s
            "points[1].apply_s (0.3 s) is more than 1.5 times its step (0.1 s, from its timing)",
        ),
        (
            {"step_time_s": 0.1, "compute_s": 0.1, "allreduce_s": 0.06, "input_s": 0.05},
            "points[1]: its phases (compute_s + allreduce_s + input_s = 0.21 s) add up to "
            "more than 2 times its step_time_s (0.1 s)",
        ),
    ],
)
def test_phases_that_cannot_fit_in_the_step_are_left_out_with_one_warning(
    tmp_path, capsys, second, expected
):
    """Trial 4: compute 0.5 s in a 0.12 s step gave "exposed comm 250%". The point's
    step time is a measurement still: it is kept, its phases left out, with one
    warning naming the point, field and values (once refused: the file was lost)."""
    path = _sweep(tmp_path, second)
    line = f"gpuscale: warning: {path}: {expected}: its phases are left out"
    for command in (["recommend", "--from"], ["replay"]):
        code = cli.main([*command, str(path)])
        out, err = capsys.readouterr()
        assert code == 0 and line in err.splitlines(), err
        assert err.count("gpuscale: warning:") == 1, err
    sweep = read_sweep_file(path)
    (point,) = [p for p in sweep.points if p.devices == 2]
    assert point.step_time_s == pytest.approx(0.12 if "0.12" in expected else 0.1)
    assert point.throughput == pytest.approx(128 / point.step_time_s)
    assert all(getattr(point, name) is None for name in PHASE_FIELDS), point
    assert sweep.warnings == [line.removeprefix("gpuscale: warning: ")]
    assert cli.main(["recommend", "--from", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert line.removeprefix("gpuscale: warning: ") in doc["recommendation"]["warnings"]
    (written,) = [p for p in doc["points"] if p["devices"] == 2 and not p.get("predicted")]
    assert written["step_time_s"] == point.step_time_s
    assert not any(written.get(name) for name in PHASE_FIELDS), written


def test_a_phase_from_the_defaults_names_the_defaults(tmp_path):
    path = _sweep(tmp_path, {"step_time_s": 0.1}, defaults={"compute_s": 0.3})
    sweep = read_sweep_file(path)
    said = "is more than 1.5 times"
    assert sweep.warnings == [
        f"{path}: defaults.compute_s (0.3 s) {said} points[{i}]'s step (0.1 s): "
        f"points[{i}]'s phases are left out"
        for i in (0, 1)
    ]
    assert [p.step_time_s for p in sweep.points] == [0.1, 0.1]
    assert all(p.compute_s is None for p in sweep.points)


@pytest.mark.parametrize(
    "second",
    [
        {"step_time_s": 0.1, "compute_s": 0.08, "allreduce_s": 0.04, "apply_s": 0.01},  # 1.3x
        {"step_time_s": 0.1, "compute_s": 0.15},  # one phase at the limit
        {"step_time_s": 0.1, "compute_s": 0.12, "allreduce_s": 0.07},  # sum 1.9x
    ],
)
def test_phases_somewhat_over_the_step_are_kept_apart_as_not_resolved(tmp_path, second):
    """Within the limits they are not refused as impossible, but judged as a recording's
    probes are (:func:`gpuscale.analysis.summary.judge_phases`): beyond their noise
    (10% of the step without half-widths) they do not split the step: not resolved."""
    sweep = read_sweep_file(_sweep(tmp_path, second))
    (point,) = [p for p in sweep.points if p.devices == 2]
    assert point.compute_s is None and point.step_time_s == 0.1
    (warning,) = sweep.warnings
    assert "its phases are not resolved; left out, its step time kept" in warning
    assert "more than" not in warning


def test_phases_a_little_over_the_step_are_noise_and_accepted(tmp_path):
    second = {"step_time_s": 0.1, "compute_s": 0.08, "allreduce_s": 0.025, "apply_s": 0.004}
    sweep = read_sweep_file(_sweep(tmp_path, second))  # 1.09x: within 10% of the step
    (point,) = [p for p in sweep.points if p.devices == 2]
    assert point.compute_s == 0.08 and not sweep.warnings


def test_the_rule_is_documented():
    text = (Path(__file__).resolve().parent.parent / "docs" / "sweep-format.md").read_text()
    text = " ".join(text.split())
    assert "more than 1.5 times the step" in text and "more than 2 times it" in text
    assert (
        "points[1].compute_s (0.5 s) is more than 1.5 times its step_time_s (0.12 s): "
        "its phases are left out" in text
    )


def _noisy_recording(path: Path) -> Path:
    """One device, 10 ms steps, probes of a busy machine (compute 6-30 ms): the
    summary forgives them (one device is exempt from "compute fills the step"), its
    median compute 16 ms is more than 1.5 times the step."""
    start = StartEvent(
        t=0.0,
        gpuscale_version="x",
        host="h",
        pid=1,
        num_replicas=1,
        global_batch=32,
        per_replica_batch=32,
        model="m",
        strategy="default",
    )
    events: list = [start]
    probes = dict(zip((5, 10, 15, 20, 25), (0.006, 0.008, 0.016, 0.024, 0.030), strict=True))
    for i in range(1, 41):
        events.append(StepEvent(t=0.01 * i, step=i, step_time_s=0.01, samples=32, warmup=i <= 2))
        if i in probes:
            c = probes[i]
            events.append(
                PhaseEvent(
                    t=0.01 * i,
                    step=i,
                    step_time_s=c,
                    compute_s=c,
                    allreduce_s=0.0,
                    apply_s=0.0,
                    method="split-step",
                )
            )
    events.append(EndEvent(t=0.5, status="completed", steps=40))
    return write_run(path, events)


def test_a_recording_exported_by_json_reads_back(tmp_path, capsys):
    """recording -> ``recommend --json`` -> ``--from``/``replay``: gpuscale never
    writes phases its reader would leave out (the exported file was refused:
    "points[0].compute_s (0.016 s) is longer than its step_time_s (0.01 s)")."""
    from gpuscale.analysis.summary import summarize

    rec = _noisy_recording(tmp_path / "rec.ndjson")
    summary = summarize(list(load_run(rec).events))
    assert summary.phases_split_step and summary.compute_s > 1.5 * summary.step_time_s
    assert cli.main(["recommend", "--from", str(rec), "--json"]) == 0
    out, err = capsys.readouterr()
    exported = tmp_path / "exp.json"
    exported.write_text(out)
    (point,) = [p for p in json.loads(out)["points"] if not p.get("predicted")]
    assert point["step_time_s"] == 0.01 and point["probes"] == 5
    assert not any(point.get(name) for name in PHASE_FIELDS), point
    for command in (["recommend", "--from"], ["replay"]):
        code = cli.main([*command, str(exported)])
        out, err = capsys.readouterr()
        assert code == 0 and "warning" not in err, err
    (back,) = read_sweep_file(exported).points
    assert back.step_time_s == 0.01 and back.throughput == 3200 and back.probes == 5


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


def test_replay_reads_a_sweep_file_once(tmp_path, capsys, monkeypatch):
    """``replay SWEEP.json`` read the file to check it, again for its view, and off
    a terminal a third time for recommend's text: once is enough, its warning said once."""
    import gpuscale.analysis.sweep as sweep_module

    path = _sweep(tmp_path, {"step_time_s": 0.1, "compute_s": 0.5})
    reads = []
    real = sweep_module.read_sweep_file
    monkeypatch.setattr(sweep_module, "read_sweep_file", lambda p: reads.append(p) or real(p))
    code = cli.main(["replay", str(path)])
    err = capsys.readouterr().err
    assert code == 0 and len(reads) == 1, reads
    assert err.count("its phases are left out") == 1, err


# -- (8) a corrupt .gz in `runs` --------------------------------------------------


def test_runs_says_what_is_wrong_with_a_corrupt_gzip(tmp_path, capsys):
    """Trial 8: "bad.ndjson.gz: cannot be listed (TypeError)"."""
    data = write_run(tmp_path / "good.ndjson").read_bytes()
    (tmp_path / "bad.ndjson.gz").write_bytes(b"\x1f\x8bgarbage")
    (tmp_path / "cut.ndjson.gz").write_bytes(gzip.compress(data)[:6])
    packed = bytearray(gzip.compress(data))
    packed[len(packed) // 2 : len(packed) // 2 + 40] = bytes(40)
    (tmp_path / "damaged.ndjson.gz").write_bytes(bytes(packed))
    listed = {Path(r.path).name: r for r in list_runs(tmp_path)}
    problems = {name: r.problem for name, r in listed.items()}
    assert problems["bad.ndjson.gz"].startswith("not a gzip file"), problems
    assert problems["cut.ndjson.gz"].startswith("cut off"), problems
    # damaged after some lines: listed as far as it is whole, saying so (trial 2)
    damaged = listed["damaged.ndjson.gz"]
    assert damaged.problem is None and damaged.status == "interrupted", damaged
    assert damaged.damage.startswith("its gzip data is damaged after line "), damaged
    code, output = _cli(["runs", "--dir", str(tmp_path)], capsys)
    assert code == 0 and "Error" not in output and "TypeError" not in output, output
    assert "bad.ndjson.gz: not a gzip file" in output, output
    assert f"damaged: damaged.ndjson.gz: {damaged.damage}" in output, output


def test_gzip_damaged_mid_way_is_said_alike_by_replay_recommend_and_runs(tmp_path, capsys):
    """Trial 2: a .gz corrupted mid-stream was refused whole by replay (rc 2) and
    listed unreadable by runs though its first lines were whole. Each reads those
    lines, exits 0, and says the same warning."""
    from recording_samples import sample_events

    events = sample_events(steps=60)
    data = write_run(tmp_path / "whole.ndjson", events).read_bytes()
    lines = data.split(b"\n")
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    packed = packer.compress(b"\n".join(lines[:100]) + b"\n") + packer.flush(zlib.Z_SYNC_FLUSH)
    (tmp_path / "runs").mkdir()
    path = tmp_path / "runs" / "damaged.ndjson.gz"
    path.write_bytes(packed + b"\xff" * 32)  # a deflate block of the reserved type
    said = "its gzip data is damaged after line 100: the 100 lines before it are read"
    (run,) = list_runs(tmp_path / "runs")
    assert run.damage.startswith(f"{said}; the run after 6.75 s is lost (damage noticed at byte ")
    said = run.damage  # the same words everywhere, what is lost included
    assert run.status == "interrupted" and run.problem is None
    code, output = _cli(["runs", "--dir", str(tmp_path / "runs")], capsys)
    assert code == 0 and f"damaged: damaged.ndjson.gz: {said}" in output, output
    for command in (["replay"], ["recommend", "--from"]):
        code = cli.main([*command, str(path)])
        out, err = capsys.readouterr()
        assert code == 0 and f"gpuscale: warning: {path}: {said}" in err.splitlines(), err
        assert "no end event" not in err and "Traceback" not in err, err
    assert len(load_run(path).events) == 100


def test_the_json_writer_never_writes_phases_that_cannot_fit():
    """However a point got them (runs combined at one count, say), ``--json``
    writes no phases its reader would leave out."""
    from gpuscale.analysis.sweep import SweepPoint, normalize, sweep_document

    point = normalize(
        SweepPoint(devices=2, scaling="weak", per_replica_batch=64, step_time_s=0.1, compute_s=0.5)
    )
    (doc,) = sweep_document([point])["points"]
    assert doc["step_time_s"] == 0.1 and "compute_s" not in doc, doc


# -- trial 2 (3): an exchange on 1 device ------------------------------------------


def _one_device_exchange(tmp_path: Path, first: dict, defaults: dict | None = None) -> Path:
    path = tmp_path / "imp5.json"
    doc = {
        "defaults": {**BASE, **(defaults or {})},
        "points": [
            {"devices": 1, "step_time_s": 0.1, **first},
            {"devices": 2, "step_time_s": 0.12, "compute_s": 0.1, "allreduce_s": 0.01},
        ],
    }
    path.write_text(json.dumps(doc))
    return path


def test_an_exposed_all_reduce_on_one_device_is_left_out_with_a_warning(tmp_path, capsys):
    """Trial 2 (3): "allreduce_s": 0.05 on the 1-device point (one device exchanges
    nothing) was taken as the exchange and 4 devices went from 143.6 ms to 242.7 ms,
    silently. It is left out, with one warning in the phases' words, and the
    predictions are those of the file without it."""
    (tmp_path / "plain").mkdir()
    plain = _one_device_exchange(tmp_path / "plain", {})
    bad = _one_device_exchange(tmp_path, {"allreduce_s": 0.05})
    sweep = read_sweep_file(bad)
    line = (
        f"{bad}: points[0].allreduce_s (0.05 s) on 1 device, which exchanges nothing: "
        "its exposed all-reduce is left out"
    )
    assert sweep.warnings == [line]
    (one,) = [p for p in sweep.points if p.devices == 1]
    assert one.allreduce_s is None and one.step_time_s == 0.1
    docs = []
    for path in (plain, bad):
        code = cli.main(["recommend", "--from", str(path), "--json"])
        out, err = capsys.readouterr()
        assert code == 0
        docs.append(json.loads(out))
        assert err.count("gpuscale: warning:") == (path == bad), err
    assert line in docs[1]["recommendation"]["warnings"]
    predicted = [
        [(p["devices"], p["step_time_s"]) for p in d["points"] if p.get("predicted")] for d in docs
    ]
    assert predicted[0] and predicted[1] == predicted[0]


def test_an_exchange_of_zero_on_one_device_is_no_mistake(tmp_path):
    assert read_sweep_file(_one_device_exchange(tmp_path, {"allreduce_s": 0.0})).warnings == []


def test_an_exposed_all_reduce_from_the_defaults_names_the_defaults(tmp_path):
    path = _one_device_exchange(tmp_path, {}, defaults={"allreduce_s": 0.02})
    assert read_sweep_file(path).warnings == [
        f"{path}: defaults.allreduce_s (0.02 s) on points[0]'s 1 device, which exchanges "
        "nothing: points[0]'s exposed all-reduce is left out"
    ]
