"""recommend --from runs of one user script at several device counts: one workload
(a single global batch at every count is strong scaling), not a refused mix."""

from __future__ import annotations

import msgspec

from gpuscale.analysis.recommend import recommend
from gpuscale.analysis.sweep import load_inputs
from gpuscale.events.schema import EndEvent, StartEvent, StepEvent
from gpuscale.recording.writer import Recorder


def _script_run(
    path,
    replicas: int,
    step_s: float,
    *,
    model: str = "train.py",
    global_batch: int = 64,
    told: str | None = None,
):
    said = {"batch_scaling": told, "batch_scaling_told": True} if told else {}
    start = StartEvent(
        t=1000.0,
        gpuscale_version="t",
        host="h",
        pid=1,
        source="script",
        config={"script": "train.py", "every": 10, "keras_model": "sequential", **said},
        model=model,
        scaling=told or "strong",
        strategy="mirrored",
        num_replicas=replicas,
        platform="cpu-logical" if replicas > 1 else "cpu",
        global_batch=global_batch,
        per_replica_batch=global_batch // replicas,
    )
    steps = [
        StepEvent(t=1000.0 + i, step=i, step_time_s=step_s, samples=global_batch, warmup=i < 2)
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
    # each its own workload; a fit() batch is split across the replicas: strong
    assert {p.scaling for p in sweep.points} == {"strong"}
    assert {p.model for p in sweep.points} == {"a.py", "b.py"}


def test_a_loop_that_said_weak_scaling_stays_weak_at_one_count(tmp_path):
    # ScalingMonitor.start(scaling="weak"): one run is enough, no guess overrides it
    two = _script_run(tmp_path / "two.ndjson", 2, 0.007, global_batch=128, told="weak")
    (point,) = load_inputs([two]).points
    assert point.scaling == "weak" and point.per_replica_batch == 64


def test_a_script_whose_batch_grows_with_the_replicas_is_weak_scaling(tmp_path):
    one = _script_run(tmp_path / "one.ndjson", 1, 0.010, global_batch=64)
    two = _script_run(tmp_path / "two.ndjson", 2, 0.011, global_batch=128)
    sweep = load_inputs([one, two])
    assert {p.scaling for p in sweep.points} == {"weak"}
    assert {p.per_replica_batch for p in sweep.points} == {64}


def test_a_script_sweep_on_gpus_gives_each_count_the_best_connected_gpus(monkeypatch, capsys):
    """Like the trainer's sweep, a script's runs take the best-connected GPUs of
    the pool by topology (one PCIe switch rather than two sockets), not the first N."""
    import argparse

    from fake_nvml import FakeNvml

    from gpuscale.commands import recommend_live, recommend_script

    fake = FakeNvml.scenario("pcie-two-sockets")
    fake.ancestors = {  # GPUs 4-7 share a PCIe switch; 0-3 meet only at their socket
        (a, b): (40 if a < 4 and b < 4 else 10 if a >= 4 and b >= 4 else 50)
        for a in range(8)
        for b in range(a + 1, 8)
    }
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    topology = recommend_live.sweep_topology(list(range(8)), nvml=fake)
    monkeypatch.setattr(recommend_live, "plan", lambda args: ([1, 2, 4], "GPUs", list(range(8)), 8))
    monkeypatch.setattr(recommend_live, "sweep_topology", lambda pool: topology)
    seen: list[str] = []
    refs: list = []

    class FakeScriptRun:
        """Trains on the GPUs its environment gives it, one step a second."""

        def __init__(self, command, *, record, env):
            self.gpus = env["CUDA_VISIBLE_DEVICES"]
            seen.append(self.gpus)
            self.done, self.error, self.recording_path, self.sweep_ref = False, None, None, None

        def start(self):
            refs.append(self.sweep_ref)  # set before the run starts

        def stop(self):
            self.done = True

        def events(self, timeout=None):
            n = len(self.gpus.split(","))
            yield StartEvent(
                t=0.0,
                gpuscale_version="t",
                host="h",
                pid=1,
                source="script",
                config={},
                model="train.py",
                strategy="mirrored",
                num_replicas=n,
                platform="gpu",
                global_batch=64 * n,
                per_replica_batch=64,
            )
            for i in range(20):
                yield StepEvent(t=1.0 + i, step=i, step_time_s=0.1, samples=64 * n, warmup=i < 2)
            yield EndEvent(t=30.0, status="completed", steps=20)
            self.done = True

    monkeypatch.setattr("gpuscale.live.script_run.ScriptRun", FakeScriptRun)
    sweep, _ = recommend_script.run_script_sweep(
        argparse.Namespace(no_record=True), ["python", "train.py"]
    )
    assert seen == ["0", "4,5", "4,5,6,7"]
    assert [p.devices for p in sweep.points] == [1, 2, 4]
    # each run's recording says the sweep's counts and the 8 GPUs the machine has
    assert [(r.index, r.planned, r.available_devices) for r in refs] == [
        (i, [1, 2, 4], 8) for i in range(3)
    ]
    err = " ".join(capsys.readouterr().err.split())
    assert "GPUs per count, the best-connected by topology: 1: 0; 2: 4,5; 4: 4,5,6,7" in err


def test_a_custom_loops_batch_is_split_by_tf_distribute_not_keras():
    """The note on a script's batch says who splits it: Keras in fit, tf.distribute
    in a custom loop (the ScalingMonitor's start/step helper, config custom_loop)."""
    from gpuscale.analysis.script_runs import (
        CUSTOM_LOOP_BATCH_NOTE,
        SCRIPT_BATCH_NOTE,
        note_of,
        script_batch_note,
    )

    assert "Keras splits it" in script_batch_note({"every": None})  # fit
    loop = script_batch_note({"every": None, "custom_loop": True})
    assert loop == CUSTOM_LOOP_BATCH_NOTE
    assert "tf.distribute splits it" in loop and "Keras" not in loop
    told = script_batch_note(
        {"custom_loop": True, "batch_scaling": "weak", "batch_scaling_told": True}
    )
    assert told.startswith("the script said weak scaling")
    # an older callback's start (it could not tell) is said in its own run's words
    old = StartEvent(
        t=0.0,
        gpuscale_version="t",
        host="h",
        pid=1,
        source="script",
        config={"every": None, "custom_loop": True},
        note="cannot tell strong from weak",
    )
    assert note_of(old) == CUSTOM_LOOP_BATCH_NOTE
    fit = msgspec.structs.replace(old, config={"every": None})
    assert note_of(fit) == SCRIPT_BATCH_NOTE


def test_before_its_own_start_a_run_says_telemetry_and_no_step_times_yet():
    """Under gpuscale's provisional start (a script's first sample, a trainer's launch)
    telemetry flows but no step time comes before the run's own start: said as such,
    never as "waiting for the first steps" beside busy GPU cards."""
    from gpuscale.analysis.script_runs import before_own_start

    common = {"t": 1.0, "gpuscale_version": "t", "host": "h", "pid": 1}
    script = StartEvent(source="script", provisional=True, config={"callback": False}, **common)
    assert before_own_start(script, 1) == (
        "telemetry from 1 GPU, no step times yet: waiting for the script's start "
        "from gpuscale's callback"
    )
    trainer = StartEvent(source="trainer", provisional=True, model="mlp", **common)
    assert before_own_start(trainer, 0) == (
        "telemetry only, no step times yet: waiting for the trainer's start "
        "(TensorFlow is starting)"
    )
    assert before_own_start(StartEvent(source="trainer", model="mlp", **common), 2) is None
    settled = StartEvent(source="script", config={"callback": False}, **common)
    assert before_own_start(settled, 1) is None  # no step times, and none will come
    assert before_own_start(None, 1) is None


def test_the_batch_note_is_a_sentence_that_parses():
    """Trial: "…is weak scaling, which runs at several device counts show" did not
    parse; the note (and the README) now say it plainly."""
    from pathlib import Path

    from gpuscale.analysis.script_runs import SCRIPT_BATCH_NOTE

    assert SCRIPT_BATCH_NOTE == (
        "the batch is the script's own: Keras splits it across the replicas (strong scaling); "
        "if the script multiplies it by the replicas instead (weak scaling), only runs at two "
        "or more device counts can show it, and recommend then reads them as weak"
    )
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    assert "which runs at several" not in " ".join(readme.split())


def test_a_scripts_multi_worker_cpu_runs_stay_cpu_beside_its_logical_devices():
    """A script's runs of one model: 1 CPU (relabelled a logical device, as a lone CPU
    of the machine the 2-device run carved), 2 CPU logical devices under
    MirroredStrategy, and 2 workers of MultiWorkerMirroredStrategy, one CPU each: those
    were relabelled "cpu-logical" too, and recommend missed that they share the cores."""
    from gpuscale.analysis.script_runs import settle_script_runs
    from gpuscale.analysis.summary import RunSummary

    def start(replicas: int, workers: int, platform: str) -> StartEvent:
        return StartEvent(
            t=1000.0,
            gpuscale_version="t",
            host="h",
            pid=1,
            source="script",
            config={"script": "train.py", "every": 10},
            model="train.py",
            strategy="multi-worker" if workers > 1 else "mirrored",
            num_replicas=replicas,
            num_workers=workers,
            platform=platform,
            global_batch=64,
            per_replica_batch=64 // replicas,
        )

    runs = [
        (RunSummary(model="train.py"), start(1, 1, "cpu"), "a"),
        (RunSummary(model="train.py"), start(2, 1, "cpu-logical"), "b"),
        (RunSummary(model="train.py"), start(2, 2, "cpu"), "c"),
    ]
    settled = {source: s for _summary, s, source in settle_script_runs(runs)}
    assert settled["a"].platform == "cpu-logical"
    assert settled["b"].platform == "cpu-logical"
    assert settled["c"].platform == "cpu"
