"""recommend --from runs of one user script at several device counts: one workload
(a single global batch at every count is strong scaling), not a refused mix."""

from __future__ import annotations

from gpuscale.analysis.recommend import recommend
from gpuscale.analysis.sweep import load_inputs
from gpuscale.events.schema import EndEvent, StartEvent, StepEvent
from gpuscale.recording.writer import Recorder


def _script_run(path, replicas: int, step_s: float, *, model: str = "train.py"):
    start = StartEvent(
        t=1000.0,
        gpuscale_version="t",
        host="h",
        pid=1,
        source="script",
        config={"script": "train.py", "every": 10, "keras_model": "sequential"},
        model=model,
        strategy="mirrored",
        num_replicas=replicas,
        platform="cpu-logical" if replicas > 1 else "cpu",
        global_batch=64,
        per_replica_batch=64 // replicas,
    )
    steps = [
        StepEvent(t=1000.0 + i, step=i, step_time_s=step_s, samples=64, warmup=i < 2)
        for i in range(30)
    ]
    end = EndEvent(t=1031.0, status="completed", steps=30)
    recorder = Recorder(path)
    for event in [start, *steps, end]:
        recorder.write(event)
    recorder.close()
    return path


def test_one_scripts_runs_at_two_counts_are_one_strong_scaling_workload(tmp_path):
    one = _script_run(tmp_path / "one.ndjson", 1, 0.010)
    two = _script_run(tmp_path / "two.ndjson", 2, 0.007)
    sweep = load_inputs([one, two])
    assert {p.scaling for p in sweep.points} == {"strong"}
    assert {p.platform for p in sweep.points} == {"cpu-logical"}
    assert len({p.config for p in sweep.points}) == 1
    rec = recommend(sweep.points)  # no "the inputs mix workloads"
    assert rec.devices in (1, 2)


def test_other_scripts_are_left_alone(tmp_path):
    one = _script_run(tmp_path / "one.ndjson", 1, 0.010, model="a.py")
    two = _script_run(tmp_path / "two.ndjson", 2, 0.007, model="b.py")
    sweep = load_inputs([one, two])
    assert {p.scaling for p in sweep.points} == {"weak"}
