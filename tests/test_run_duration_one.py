"""One run duration: the dashboard's elapsed time never goes back (it went from
0:21 to 0:19 when a replay reached the end event, which a trainer composes before
its last samples are in), and where it stops is what `gpuscale runs` says, what the
log says, and what gpuscale writes into the end event."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpuscale.events.schema import EndEvent, HostSample, StartEvent, StepEvent, run_duration_s
from gpuscale.recording.reader import load_run
from gpuscale.recording.store import list_runs
from gpuscale.ui.model import RunModel

SAMPLES = Path(__file__).resolve().parent.parent / "sample_runs"
ENDED = ["mnist-cnn_2xcpu.ndjson", "mnist-cnn_1xcpu.ndjson", "mlp_2xcpu.ndjson"]


@pytest.mark.parametrize("name", ENDED)
def test_elapsed_never_goes_back_and_stops_where_runs_says(name, tmp_path):
    events = load_run(SAMPLES / name).events
    model = RunModel()
    shown = []
    for event in events:
        model.absorb([event])
        shown.append(model.snapshot().elapsed_s)
    assert shown == sorted(shown), "the elapsed time went back"
    shutil.copy(SAMPLES / name, tmp_path / name)
    (listed,) = list_runs(tmp_path)
    assert listed.duration_s == pytest.approx(shown[-1])
    # the log's line at the end says the same duration
    ended = [line.message for line in model.snapshot().logs if "run completed" in line.message]
    from gpuscale.formatting import format_duration_s

    assert ended and ended[-1].endswith(format_duration_s(shown[-1]))


def test_a_trainer_end_composed_before_its_last_samples_stops_at_the_latest():
    start = StartEvent(t=100.0, gpuscale_version="t", host="h", pid=1, model="mlp")
    steps = [StepEvent(t=101.0 + i, step=i, step_time_s=0.1, samples=64) for i in range(9)]
    late = HostSample(t=112.0, cpu_pct=5.0, mem_used_bytes=1, mem_total_bytes=2)
    end = EndEvent(t=110.0, status="completed", steps=9)  # composed before `late`
    after = HostSample(t=115.0, cpu_pct=5.0, mem_used_bytes=1, mem_total_bytes=2)
    model = RunModel()
    model.absorb([start, *steps, late])
    before_end = model.snapshot().elapsed_s
    model.absorb([end, after])  # a sample after the end event is not the run's
    assert before_end == model.snapshot().elapsed_s == run_duration_s(100.0, 112.0)
