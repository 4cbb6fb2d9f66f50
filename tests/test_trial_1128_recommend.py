"""What the new-user trial of 2026-11-28 found in ``recommend``, from its own
recordings (``tests/fixtures/trial/20261128-*``)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from gpuscale.analysis.recommend import recommend
from gpuscale.analysis.sweep import load_inputs
from gpuscale.commands.recommend_render import render
from gpuscale.plots.scaling import build_scaling_chart, probes_per_count
from gpuscale.recording.reader import load_run

TRIAL = Path(__file__).parent / "fixtures" / "trial"
SWEEP_STEPS_20 = [
    str(TRIAL / "20261128-013323_mnist-cnn-w32_1xcpu.ndjson.gz"),
    str(TRIAL / "20261128-013329_mnist-cnn-w32_2xcpu.ndjson.gz"),
]
"""``recommend --steps 20`` on 2 CPU logical devices: 1 device 93.7 ms, 2 devices
54.2 ms (1.73x); one probe at each count, neither splitting its step."""


def _text(paths: list[str]) -> str:
    sweep = load_inputs(paths)
    rec = recommend(sweep.points, available_devices=sweep.available_devices)
    out = io.StringIO()
    render(rec, sweep, console=Console(file=out, width=200, color_system=None), chart=True)
    return " ".join(out.getvalue().split())


def test_probes_are_counted_per_device_count_everywhere():
    # the table said "not resolved (1 probe)" for 2 devices, the line under the chart
    # (and the scaling view, the same note) "not resolved (2 probes)": summed over counts
    sweep = load_inputs(SWEEP_STEPS_20)
    chart = build_scaling_chart(recommend(sweep.points))
    assert not chart.has_split
    assert "(1 probe at each of 1 and 2 devices)" in chart.split_note
    text = _text(SWEEP_STEPS_20)
    assert "not resolved (1 probe)" in text
    assert "(1 probe at each of 1 and 2 devices)" in text and "2 probes" not in text


def test_probes_per_count_words():
    assert probes_per_count([(2, 1)]) == "1 probe at 2 devices"
    assert probes_per_count([(1, 1)]) == "1 probe at 1 device"
    assert probes_per_count([(2, 3), (1, 3), (4, 3)]) == "3 probes at each of 1, 2 and 4 devices"
    assert probes_per_count([(1, 9), (2, 12)]) == "9 probes at 1 device, 12 at 2 devices"


MY_TRAIN = [
    TRIAL / "20261128-013721_my-train.py_1xcpu.ndjson.gz",
    TRIAL / "20261128-013739_my-train.py_2xcpu.ndjson.gz",
]
"""A script with ScalingMonitor run alone at 1 and 2 CPU logical devices on a 2-core
machine (no sweep): ``recommend --from`` predicted up to 8 devices ("the input does not
say how many devices its machine has") where the sweeps of the same machine stop at 2."""


def _with_start(path: Path, dest: Path, **changes) -> str:
    """``path``'s recording with its own (not provisional) start event changed."""
    import msgspec
    from recording_samples import write_run

    from gpuscale.events.schema import StartEvent
    from gpuscale.recording.reader import iter_events

    events = [
        msgspec.structs.replace(e, **changes)
        if isinstance(e, StartEvent) and not e.provisional
        else e
        for e in iter_events(path)
    ]
    return str(write_run(dest, events))


def test_a_script_runs_cores_stop_the_predictions_there(tmp_path):
    old = load_inputs([str(p) for p in MY_TRAIN])
    assert old.available_devices is None  # recorded before the start said its cores
    rec = recommend(old.points)
    assert max(r.devices for r in rec.table) == 8
    said = [_with_start(p, tmp_path / p.name.removesuffix(".gz"), cpu_cores=2) for p in MY_TRAIN]
    sweep = load_inputs(said)
    assert sweep.available_devices == 2  # gpuscale run makes at most max(2, cores)
    rec = recommend(sweep.points, available_devices=sweep.available_devices)
    assert max(r.devices for r in rec.table) == 2 and not any(r.predicted for r in rec.table)
    assert "No predictions past the 2 devices available" in _text(said)
    four = [_with_start(p, tmp_path / f"4-{p.name}", cpu_cores=4) for p in MY_TRAIN]
    assert load_inputs(four).available_devices == 4
    one = [_with_start(p, tmp_path / f"1-{p.name}", cpu_cores=1) for p in MY_TRAIN]
    assert load_inputs(one).available_devices == 2  # 2 logical devices even on 1 core
    # a GPU recording beside them: the CPU machine's cores say nothing of its GPUs
    gpu = _with_start(MY_TRAIN[0], tmp_path / "gpu.ndjson", platform="gpu", cpu_cores=None)
    assert load_inputs([gpu, said[1]]).available_devices is None


@pytest.mark.tf
def test_the_callbacks_start_says_the_machines_cores(tmp_path):
    # what a sweep's start has (its machine's devices) a script run alone lacked:
    # its start now says the cores its CPU logical devices share
    script = Path(__file__).parent / "scripts_keras" / "train_one_replica.py"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUSCALE_", "TF_CONFIG"))}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="", GPUSCALE_DATA_DIR=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, str(script), "4"], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (path,) = (tmp_path / "runs").glob("*.ndjson")
    start = load_run(path).start
    assert start.platform != "gpu" and start.cpu_cores == os.cpu_count()
    assert load_inputs([str(path)]).available_devices == max(2, os.cpu_count() or 1)


SWEEP_WATCH = [
    str(TRIAL / "20261128-013923_mnist-cnn-w32_1xcpu.ndjson.gz"),
    str(TRIAL / "20261128-013935_mnist-cnn-w32_2xcpu.ndjson.gz"),
]
"""``recommend --watch`` on 2 CPU logical devices: 2.30x from 1 to 2 devices
("superlinear (115%)"), the 1-device run's process keeping about one core busy."""


def test_the_cpu_caveat_says_what_a_measured_speedup_is():
    # "CPU logical devices share this machine's cores, so more of them add no
    # compute" beside a measured 1.73x (and 2.30x): they add no cores, and one
    # device had kept about one of the two busy
    for paths in (SWEEP_STEPS_20, SWEEP_WATCH):
        text = _text(paths)
        assert "MULTI: 2 devices" in text
        assert "add no compute" not in text
        assert "a speedup from more of them comes from putting more of those cores to work" in text
        assert "not for GPUs" in text
    watch = _text(SWEEP_WATCH)
    assert "(1 device kept about 0.8 cores busy, 2 devices about 1.8)" in watch, watch
    # 20 steps: a sample or two of the run's CPU within its steps, too few to say it
    assert "kept about" not in _text(SWEEP_STEPS_20)


def test_cores_used_come_from_the_samples_within_the_counted_steps():
    from gpuscale.analysis import metrics
    from gpuscale.analysis.summary import summarize
    from gpuscale.events.schema import HostSample
    from gpuscale.recording.reader import iter_events

    one, two = (summarize(iter_events(p)) for p in SWEEP_WATCH)
    assert round(one.proc_cpu_pct) == 82 and round(two.proc_cpu_pct) == 184
    short = summarize(iter_events(SWEEP_STEPS_20[0]))
    assert short.proc_cpu_pct is None  # 2 samples within its 15 counted steps
    # start-up (importing, building, compiling) is not the steps' use: over every
    # sample the 2-device run kept about half a core busy
    every = [e.proc_cpu_pct for e in iter_events(SWEEP_WATCH[1]) if isinstance(e, HostSample)]
    assert metrics.median([p for p in every if p is not None]) < 100 < two.proc_cpu_pct


def test_the_cores_used_travel_in_the_sweep_file(tmp_path, capsys):
    import json

    from gpuscale.cli import main

    assert main(["recommend", "--from", *SWEEP_WATCH, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {
        p["devices"]: round(p["proc_cpu_pct"]) for p in doc["points"] if "proc_cpu_pct" in p
    } == {
        1: 82,
        2: 184,
    }
    saved = tmp_path / "sweep.json"
    saved.write_text(json.dumps(doc))
    assert main(["recommend", "--from", str(saved), "--no-chart"]) == 0
    assert "(1 device kept about 0.8 cores busy, 2 devices about 1.8)" in " ".join(
        capsys.readouterr().out.split()
    )


def test_the_cores_each_count_kept_busy_stay_where_the_why_says_the_cores_are_shared():
    # a docs trial's live sweep on 2 cores: 2 devices slower than 1, so the Why said
    # "The devices are CPU logical devices sharing the same cores" and the Confidence
    # kept only "what is measured here is for these CPU logical devices, not for
    # GPUs", dropping how many cores each count kept busy, which the recordings said
    # (and the README promises: "it says how many each count kept busy")
    from gpuscale.analysis.sweep import SweepPoint, normalize

    common = dict(scaling="strong", global_batch=128, platform="cpu-logical", config="c")
    points = [
        normalize(SweepPoint(devices=1, step_time_s=0.0582, proc_cpu_pct=128.0, **common)),
        normalize(SweepPoint(devices=2, step_time_s=0.1003, proc_cpu_pct=103.0, **common)),
    ]
    rec = recommend(points, available_devices=2)
    assert any("sharing the same cores" in r for r in rec.reasons)
    assert (
        "What is measured here is for these CPU logical devices, not for GPUs "
        "(1 device kept about 1.3 cores busy, 2 devices about 1.0)." in rec.confidence
    ), rec.confidence
    assert sum("kept about" in line for line in [*rec.reasons, *rec.confidence]) == 1
