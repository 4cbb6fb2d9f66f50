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


def _trainer_recording(path: Path) -> list:
    """As gpuscale records a built-in run: its provisional start at the launch, the
    start-up's samples, then the trainer's own start 2.5 s later, steps, the end."""
    import msgspec

    common = {"gpuscale_version": "t", "host": "h", "pid": 1, "model": "mlp"}
    events = [
        StartEvent(t=100.0, provisional=True, **common),
        *(
            HostSample(t=100.0 + 0.5 * i, cpu_pct=5.0, mem_used_bytes=1, mem_total_bytes=2)
            for i in range(1, 5)
        ),
        StartEvent(t=102.5, **common),
        *(StepEvent(t=103.0 + i, step=i, step_time_s=0.1, samples=64) for i in range(5)),
        EndEvent(t=107.5, status="completed", steps=5),
    ]
    path.write_bytes(b"\n".join(msgspec.json.encode(e) for e in events) + b"\n")
    return events


def test_the_elapsed_time_counts_from_the_launch_not_back_from_the_trainers_start(tmp_path):
    """The header's clock counted from the provisional start, then jumped back by
    TensorFlow's start-up (2.5 s to 0.0 s) when the trainer's own start replaced it.
    It counts from the launch the user saw and never goes back. The log's (and the
    toast's) duration at the end is the run's recorded one, from its own start."""
    from gpuscale.formatting import format_duration_s
    from gpuscale.ui.sources import ReplaySource

    events = _trainer_recording(tmp_path / "run.ndjson")
    source = ReplaySource(tmp_path / "run.ndjson", end=True)
    played = source.events
    assert played[0].provisional  # the replay's clock starts at the launch too
    assert source.duration_s == pytest.approx(7.5)
    model = RunModel()
    shown = []
    for event in played:
        model.absorb([event])
        shown.append(model.snapshot().elapsed_s)
    assert shown == sorted(shown), f"the elapsed time went back: {shown}"
    at_own_start = shown[[e.t for e in played].index(102.5)]
    assert at_own_start == pytest.approx(2.5)  # not 0.0
    assert model.start is not None and not model.start.provisional  # it describes the run
    assert shown[-1] == pytest.approx(run_duration_s(events[0].t, 107.5))
    ended = [line.message for line in model.snapshot().logs if "run completed" in line.message]
    assert ended == [f"run completed after 5 steps, {format_duration_s(5.0)}"]
    assert model.snapshot().duration_s == pytest.approx(5.0)  # the toast's


def test_the_logs_end_line_says_the_duration_runs_lists_for_the_recording(tmp_path):
    """A run whose own start came 2.5 s after the launch: the log's end line said
    "run completed after 5 steps, 7.5 s" (from the launch) while `gpuscale runs` and
    the end's duration_s said 5.0 s. One recording, one duration."""
    from gpuscale.formatting import format_duration_s

    events = _trainer_recording(tmp_path / "run.ndjson")
    (listed,) = list_runs(tmp_path)
    model = RunModel()
    model.absorb(events)
    snap = model.snapshot()
    (ended,) = [line.message for line in snap.logs if "run completed" in line.message]
    assert ended == f"run completed after 5 steps, {format_duration_s(listed.duration_s)}"
    assert snap.duration_s == pytest.approx(listed.duration_s)  # the toast says it too
    assert snap.elapsed_s == pytest.approx(7.5)  # the header's clock: from the launch
