"""One trainer process for several device counts, split back into a run per
count (gpuscale.live.trainer_sweep), without TensorFlow: a stand-in trainer
(tests/fake_sweep_trainer.py) reports the counts one after the other."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from gpuscale.errors import GpuscaleError
from gpuscale.events.schema import (
    DeviceInfo,
    EndEvent,
    ErrorEvent,
    LogEvent,
    StartEvent,
    StepEvent,
)
from gpuscale.live.trainer_sweep import TrainerSweep, next_count
from gpuscale.recording.reader import load_run
from gpuscale.trainer.options import (
    TrainConfig,
    device_positions,
    shared_process_refusal,
    sweep_from_json,
    sweep_to_json,
    widest,
)
from gpuscale.trainer.plan import DevicePlan

FAKE = Path(__file__).with_name("fake_sweep_trainer.py")


def _configs(*counts: int, **changes) -> list[TrainConfig]:
    return [
        TrainConfig(devices=n, global_batch=16, steps=6, warmup_steps=1, **changes) for n in counts
    ]


def _sweep(
    tmp_path: Path, scenario: str, *counts: int, record: bool = True, **env: str
) -> TrainerSweep:
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE}" "$@"\n')
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    return TrainerSweep(
        _configs(*counts),
        record="default" if record else None,
        sampler=False,
        python=str(python),
        env={"FAKE_SWEEP": scenario, **env},
    )


def _consume(sweep: TrainerSweep) -> list[list]:
    """Each count's events, consumed as recommend does: one run after the other."""
    out = []
    for run in sweep.runs:
        run.start()
        out.append(list(run.events(timeout=30)))
        assert run.done
    assert sweep.done or sweep._done.wait(10)
    return out


def test_next_count_follows_only_a_completed_count():
    done = EndEvent(t=0, status="completed", steps=5, duration_s=1.0)
    assert next_count(0, done, 3, stopping=False) == 1
    assert next_count(2, done, 3, stopping=False) is None  # the last
    assert next_count(0, done, 3, stopping=True) is None
    for status in ("failed", "stopped", "lost"):
        end = EndEvent(t=0, status=status, steps=5, duration_s=1.0)
        assert next_count(0, end, 3, stopping=False) is None


def test_each_count_is_a_run_and_a_recording_of_its_own(tmp_path, _isolated_data_dir):
    sweep = _sweep(tmp_path, "complete", 1, 2)
    events = _consume(sweep)
    assert sweep.returncode == 0
    paths = []
    for n, (run, evs) in enumerate(zip(sweep.runs, events, strict=True), start=1):
        starts = [e for e in evs if isinstance(e, StartEvent)]
        assert len(starts) == 1 and starts[0].num_replicas == n
        assert starts[0].config["devices"] == n
        assert [e.step for e in evs if isinstance(e, StepEvent)] == list(range(6))
        assert isinstance(evs[-1], EndEvent) and evs[-1].status == "completed"
        assert sum(isinstance(e, EndEvent) for e in evs) == 1
        assert evs[-1].summary and evs[-1].summary["steps_counted"] == 5
        assert run.error is None and run.start_event is starts[0]
        loaded = load_run(run.recording_path)
        assert loaded.start.num_replicas == n and not loaded.start.provisional
        assert loaded.end is not None and loaded.end.status == "completed"
        assert [e.step_time_s for e in loaded.events if isinstance(e, StepEvent)] == [0.01 * n] * 6
        paths.append(run.recording_path)
    assert paths[0] != paths[1] and "1x" in paths[0].name and "2x" in paths[1].name
    # the process's own output went to the count in progress (the first)
    assert any("fake trainer: loading" in getattr(e, "message", "") for e in events[0])


def test_each_count_keeps_the_output_it_printed_even_when_it_arrives_late(
    tmp_path, _isolated_data_dir
):
    """The trainer's stdout/stderr and its events travel apart: a count's last lines
    may reach gpuscale after its end event. They still land in that count's run
    and recording, not in the next count's."""
    sweep = _sweep(tmp_path, "complete", 1, 2, 4, FAKE_LATE_LINES="1")
    events = _consume(sweep)
    assert sweep.returncode == 0
    for index, (run, evs) in enumerate(zip(sweep.runs, events, strict=True)):
        trainer_lines = [
            e.message for e in load_run(run.recording_path).events if isinstance(e, LogEvent)
        ]
        assert f"output of count {index}" in trainer_lines
        assert f"warning of count {index}" in trainer_lines
        others = [m for m in trainer_lines if " of count " in m and not m.endswith(f" {index}")]
        assert others == [], f"count {index} got another count's lines: {others}"
        shown = [e.message for e in evs if isinstance(e, LogEvent)]
        assert f"output of count {index}" in shown  # the consumer saw it with its count
        assert isinstance(evs[-1], EndEvent) and evs[-1].status == "completed"


def test_output_that_does_not_catch_up_goes_on_marked_as_its_count(
    tmp_path, _isolated_data_dir, monkeypatch
):
    """A count's output that lags more than the catch-up time behind its end: the
    count is finished without it, saying so, and the late lines are kept in the
    next count's log, marked as the earlier count's."""
    import gpuscale.live.trainer_sweep as trainer_sweep

    monkeypatch.setattr(trainer_sweep, "OUTPUT_CATCH_UP_S", 0.1)
    sweep = _sweep(tmp_path, "complete", 1, 2, FAKE_LATE_LINES="1", FAKE_LATE_S="1.5")
    _consume(sweep)
    first, second = (
        [e.message for e in load_run(run.recording_path).events if isinstance(e, LogEvent)]
        for run in sweep.runs
    )
    assert not any("of count" in m for m in first)
    assert any("had not caught up" in m and "late output of the 1-device count" in m for m in first)
    assert "[late output of the 1-device count] output of count 0" in second
    assert "output of count 1" in second  # the second count's own, unmarked


def test_a_failing_count_ends_the_sweep_with_its_error(tmp_path, _isolated_data_dir):
    sweep = _sweep(tmp_path, "fail-second", 1, 2, 4)
    events = _consume(sweep)
    first, second, third = sweep.runs
    assert first.end.status == "completed" and first.error is None
    assert second.end.status == "failed"
    assert second.error is not None and "out of device memory" in second.error.message
    assert any(isinstance(e, ErrorEvent) for e in events[1])
    assert second.returncode == 1  # the process's exit status, as for a separate run
    assert load_run(second.recording_path).end.status == "failed"
    # never begun: ended at once, nothing recorded
    assert third.end.status == "stopped" and third.recording_path is None
    assert [type(e) for e in events[2]] == [EndEvent]


def test_a_crash_is_the_count_in_progress_lost(tmp_path, _isolated_data_dir):
    sweep = _sweep(tmp_path, "crash-second", 1, 2)
    _consume(sweep)
    first, second = sweep.runs
    assert first.end.status == "completed"
    assert second.end.status == "lost" and second.returncode == 3
    assert "without reporting an end" in second.error.message
    assert load_run(first.recording_path).end.status == "completed"


def test_stopping_a_count_stops_the_sweep_and_keeps_what_ran(tmp_path, _isolated_data_dir):
    sweep = _sweep(tmp_path, "slow", 1, 2)
    first, second = sweep.runs
    first.start()
    for event in first.events(timeout=30):
        if isinstance(event, StepEvent) and event.step == 1:
            first.stop()
    assert first.done and first.end.status == "stopped"
    assert second.done and second.end.status == "stopped" and second.recording_path is None
    loaded = load_run(first.recording_path)
    assert loaded.end.status == "stopped" and loaded.end.steps >= 2
    assert sweep.done


def test_stopping_before_the_start_begins_nothing(tmp_path, _isolated_data_dir):
    sweep = _sweep(tmp_path, "complete", 1, 2)
    sweep.stop()
    assert all(run.done and run.recording_path is None for run in sweep.runs)
    assert sweep.runs[0].start() and sweep._proc is None  # a stopped sweep starts no process


def test_factory_hands_out_the_counts_in_order(tmp_path):
    sweep = _sweep(tmp_path, "complete", 1, 2, record=False)
    factory = sweep.factory()
    assert factory(sweep.configs[0], None) is sweep.runs[0]
    with pytest.raises(GpuscaleError):
        factory(sweep.configs[0], None)
    factory.close()


def test_only_runs_that_differ_in_their_devices_share_a_process():
    assert shared_process_refusal(_configs(1, 2, 4)) is None
    assert shared_process_refusal(_configs(1)) is not None
    assert shared_process_refusal(_configs(1, 2, strategy="multi-worker")) is not None
    mixed = _configs(1, 2)
    mixed[1] = TrainConfig(devices=2, global_batch=32, steps=6, warmup_steps=1)
    assert "more than their devices" in shared_process_refusal(mixed)
    gpus = [TrainConfig(gpus=[0]), TrainConfig(devices=2)]
    assert shared_process_refusal(gpus) is not None
    with pytest.raises(GpuscaleError, match="cannot share"):
        sweep_from_json(sweep_to_json(mixed))
    with pytest.raises(GpuscaleError, match="cannot share"):
        TrainerSweep(mixed)
    with pytest.raises(GpuscaleError, match="default names"):
        TrainerSweep(_configs(1, 2), record="one-file.ndjson")  # two runs cannot share a file
    assert sweep_from_json(sweep_to_json(_configs(1, 2))) == _configs(1, 2)


def test_the_widest_devices_hold_every_count():
    assert widest(_configs(1, 2, 4)).devices == 4
    on_gpus = [TrainConfig(gpus=g) for g in ([3], [3, 1], [3, 1, 0, 2])]
    wide = widest(on_gpus)
    assert wide.gpus == [3, 1, 0, 2]
    assert [device_positions(wide, c) for c in on_gpus] == [[0], [0, 1], [0, 1, 2, 3]]
    odd = [TrainConfig(gpus=[2]), TrainConfig(gpus=[0, 1])]  # best-connected pairs need not nest
    wide = widest(odd)
    assert wide.gpus == [0, 1, 2] and device_positions(wide, odd[0]) == [2]
    assert device_positions(widest(_configs(1, 2)), _configs(2)[0]) == [0, 1]


def test_a_plan_subset_keeps_the_chosen_devices_in_order():
    infos = [
        DeviceInfo(index=i, name=f"GPU {i}", kind="gpu", tf_name=f"/gpu:{i}") for i in range(4)
    ]
    plan = DevicePlan("gpu", [f"/gpu:{i}" for i in range(4)], infos, "a warning")
    part = plan.subset([2, 0])
    assert part.names == ["/gpu:2", "/gpu:0"] and [d.index for d in part.infos] == [2, 0]
    assert part.platform == "gpu" and part.warning == "a warning"


def test_the_scaling_view_sweep_runs_on_the_shared_process(tmp_path, _isolated_data_dir):
    """`recommend --watch` drives LiveSweep; with the sweep's factory every count
    comes from the one process, each measured and recorded on its own."""
    from gpuscale.ui.live_sweep import LiveSweep
    from gpuscale.ui.sweep_app import SweepView

    sweep = _sweep(tmp_path, "complete", 1, 2)
    view = SweepView(points=[], heading="stand-in", planned=[1, 2], state="running")
    runner = LiveSweep(view, sweep.configs, run_factory=sweep.factory(), status_interval_s=0)
    sweep.stamp(runner.sweep_id)  # as recommend --watch does
    try:
        final = runner.run(lambda v: None, lambda v: None)
    finally:
        sweep.close()
    assert runner.failure is None and final.state == "complete"
    assert [p.devices for p in final.points] == [1, 2]
    assert final.sources == [str(run.recording_path) for run in sweep.runs]
    refs = [load_run(run.recording_path).start.sweep for run in sweep.runs]
    assert [(r.id, r.index, r.planned) for r in refs] == [
        (runner.sweep_id, 0, [1, 2]),
        (runner.sweep_id, 1, [1, 2]),
    ]
    assert sweep.returncode == 0


def test_the_trainer_refuses_a_sweep_that_cannot_share_its_process():
    """`python -m gpuscale.trainer --sweep` checks the runs before TensorFlow loads:
    one error event, one end event, exit 2."""
    import json
    import subprocess

    one = sweep_to_json(_configs(1))
    done = subprocess.run(
        [sys.executable, "-m", "gpuscale.trainer", "--sweep", one],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert [e["kind"] for e in events] == ["error", "end"]
    assert "cannot share one trainer process" in events[0]["message"]
    assert events[1]["status"] == "failed"


def test_a_finished_shared_sweep_leaves_nothing_of_gpuscale_running(tmp_path, _isolated_data_dir):
    """After the last count of a shared process, no reader, server or run thread
    is left and the process is idle (a leftover would skew what runs next)."""
    import asyncio
    import threading

    from test_trainer_session import assert_nothing_of_gpuscale_runs

    older = set(threading.enumerate())
    sweep = _sweep(tmp_path, "complete", 1, 2)
    _consume(sweep)
    sweep.close()
    asyncio.run(assert_nothing_of_gpuscale_runs(older))


def test_a_counts_teardown_output_comes_before_the_line_that_closes_it(monkeypatch, capfd):
    """The sweep's trainer process (gpuscale.trainer.worker, here with a stand-in for
    training and no TensorFlow): what tearing a count down prints (TensorFlow's C++
    runtime writes to stderr itself as the count's objects go: an iterator's end,
    a collective's rendezvous) comes before that count's closing line, so gpuscale
    puts it in that count's recording, not the next one's."""
    import queue
    import signal
    import warnings

    from gpuscale.events.transport import EventServer
    from gpuscale.trainer import worker
    from gpuscale.trainer.options import count_over_line

    received: queue.Queue = queue.Queue()
    server = EventServer(received.put)
    for key, value in server.env(0).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(signal, "signal", lambda *a: None)  # pytest's handlers stay
    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)  # restored after
    monkeypatch.setattr(worker, "_prepare_environment", lambda config: None)
    monkeypatch.setattr(worker, "_train", lambda config, *a: (config.steps, "completed"))

    def release(self) -> None:  # what TensorFlow's runtime prints as a count's objects go
        print(f"teardown of run {self.run}", file=sys.stderr, flush=True)

    monkeypatch.setattr(worker._Devices, "release", release)
    try:
        assert worker.main(["--sweep", sweep_to_json(_configs(1, 2))]) == 0
    finally:
        server.close()
    err = capfd.readouterr().err.splitlines()
    assert "teardown of run 1" in err
    assert (
        err.index("teardown of run 1")
        < err.index(count_over_line(0))
        < err.index(count_over_line(1))
    )
