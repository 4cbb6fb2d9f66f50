"""The Keras callback's sample count: read every few steps, not every step, and still
exact at every read (a short batch shows on the next read)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.tf


def _run_script(name: str, *args: str, **env_extra: str) -> subprocess.CompletedProcess:
    """Run ``tests/scripts_keras/NAME ARGS`` in a fresh Python on CPU, outside gpuscale
    (none of its variables), and check it exited 0."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUSCALE_", "TF_CONFIG"))}
    env.update(TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="", **env_extra)
    script = Path(__file__).parent / "scripts_keras" / name
    proc = subprocess.run(
        [sys.executable, str(script), *args], env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _monitor():
    """A ScalingMonitor whose sample counter is a list's first item (the total so
    far), and the values it read; its clock moves a second at every look (slow
    steps: the counter is read every SAMPLES_READ_EVERY steps)."""
    from gpuscale.keras.callback import ScalingMonitor

    monitor = ScalingMonitor(record=None)
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0
        return now[0]

    monitor._clock = clock
    total = [0]
    reads: list[int] = []

    def seen() -> int:
        reads.append(total[0])
        return total[0]

    monitor._samples_seen = seen  # the counter stands in for the strategy's variable
    monitor._last_samples = 0
    return monitor, total, reads


def test_uniform_batches_read_every_few_steps_report_each_step():
    from gpuscale.keras.callback import SAMPLES_READ_EVERY

    monitor, total, reads = _monitor()
    reported = []
    for _ in range(3 * SAMPLES_READ_EVERY):
        total[0] += 32
        reported.append(monitor._step_samples(1))
    assert reported == [32] * len(reported)
    assert len(reads) == 3  # the first step, then every SAMPLES_READ_EVERY steps


def test_short_steps_read_the_counter_at_most_every_half_second():
    """A read costs about 0.17 ms: with 5 ms steps, every 10 steps would be 3 % of
    them; at most every SAMPLES_READ_INTERVAL_S it is well under 0.1 %."""
    from gpuscale.keras.callback import SAMPLES_READ_INTERVAL_S

    monitor, total, reads = _monitor()
    now = [0.0]
    monitor._clock = lambda: now[0]
    reported = []
    for i in range(400):  # 2 s of 5 ms steps
        now[0] += 0.005
        total[0] += 32
        reported.append(monitor._step_samples(1, last_of_epoch=i == 399))
    assert reported == [32] * 400
    # the first step, one read per half second, and the epoch's last step
    assert len(reads) == 1 + int(400 * 0.005 / SAMPLES_READ_INTERVAL_S)


def test_a_short_batch_shows_on_the_next_read_and_the_sum_is_exact():
    from gpuscale.keras.callback import SAMPLES_READ_EVERY

    monitor, total, _reads = _monitor()
    batches = [32] * 5 + [4] + [32] * (2 * SAMPLES_READ_EVERY)  # a short batch mid-run
    reported = []
    for i, batch in enumerate(batches):
        total[0] += batch
        reported.append(monitor._step_samples(1, last_of_epoch=i == len(batches) - 1))
    assert reported[5] == 32  # not read there: the usual batch
    assert reported[SAMPLES_READ_EVERY] == 32 - 28  # the next read owns up
    assert set(reported[SAMPLES_READ_EVERY + 1 :]) == {32}  # and the usual batch goes on
    assert sum(reported) == sum(batches)  # exact at the epoch's last step


def test_an_epochs_end_takes_the_count_its_last_step_read():
    """An epoch of known length reads Keras's count at its last step; its end read it
    again (0.1-0.3 ms a fit, with nothing run between) to carry it over to the next
    epoch. Now it takes what the last step read; an epoch whose steps since the last
    read are unread (its length unknown: no step knew it was the last) still reads."""
    monitor, total, reads = _monitor()
    monitor._tracker = object()  # Keras's own count: its base carried over at each end
    for epoch in range(2):
        monitor._epoch_open = True
        for i in range(12):
            total[0] += 32 if i < 11 else 8
            monitor._step_samples(1, last_of_epoch=i == 11)
        before = len(reads)
        monitor._close_epoch()
        assert len(reads) == before, epoch  # read at the last step: not again
        assert monitor._tracker_base == total[0] == 360 * (epoch + 1)
    monitor._epoch_open = True
    total[0] += 32
    monitor._step_samples(1)  # the epoch's last, unknown to be
    before = len(reads)
    monitor._close_epoch()
    assert len(reads) == before + 1 and monitor._tracker_base == total[0]


def test_several_steps_per_call_report_per_step():
    monitor, total, _reads = _monitor()
    reported = []
    for i in range(12):
        total[0] += 2 * 32
        reported.append(monitor._step_samples(2, last_of_epoch=i == 11))
    assert reported == [32] * 12
    assert sum(r * 2 for r in reported) == total[0]


def test_a_short_last_batch_does_not_lower_the_usual_batch():
    """72 samples over the epoch's last 3 steps (32, 32, 8) are no steps of 24: the
    next epoch still reports 32 a step between its reads."""
    from gpuscale.keras.callback import SAMPLES_READ_EVERY

    monitor, total, _reads = _monitor()
    epoch = [32] * (SAMPLES_READ_EVERY + 2) + [8]  # reads at steps 0, 10, then the last
    reported = []
    for _ in range(2):
        for i, batch in enumerate(epoch):
            total[0] += batch
            reported.append(monitor._step_samples(1, last_of_epoch=i == len(epoch) - 1))
    assert reported[len(epoch) - 1] == 8
    assert reported[len(epoch) : len(epoch) + SAMPLES_READ_EVERY] == [32] * SAMPLES_READ_EVERY
    assert sum(reported) == total[0]


def test_a_first_read_that_was_short_is_raised_by_a_full_one():
    from gpuscale.keras.callback import SAMPLES_READ_EVERY

    monitor, total, _reads = _monitor()
    batches = [8] + [32] * (2 * SAMPLES_READ_EVERY)  # a one-step epoch of 8 first
    reported = []
    for i, batch in enumerate(batches):
        total[0] += batch
        reported.append(monitor._step_samples(1, last_of_epoch=i == 0))
    assert reported[-SAMPLES_READ_EVERY + 1 :] == [32] * (SAMPLES_READ_EVERY - 1)


def test_a_model_fitted_before_and_monitored_twice_counts_its_samples():
    """A notebook's order: ``fit`` without gpuscale, then two ``fit`` calls with a new
    ScalingMonitor each: every step's samples are counted (none 0, a short last batch
    right), the probes run, and Keras's own train function is kept (its loss tracker
    counts the samples); a model with a ``train_step`` of its own is counted by
    gpuscale's counter, as exactly."""
    result = json.loads(_run_script("train_refit.py").stdout.strip().splitlines()[-1])
    epoch = [32] * 11 + [8]
    for fit in ("first", "second", "own"):
        assert result[fit]["samples"] == epoch * 2, fit
        assert result[fit]["probed_after"] == [4, 9, 14, 19], fit
        # the scheduler judges the breakdown on the probes' phases, as the summary does
        assert result[fit]["scheduled_phases"] == 4 and result[fit]["replicas"] == 2, fit
    # Keras's own train step counts the samples (its loss tracker): the function Keras
    # built without gpuscale is the one that runs with it, never traced again
    assert not result["first"]["built_again"] and not result["second"]["built_again"]


def test_keras_own_count_survives_validation_unknown_lengths_and_a_new_compile():
    """Keras's loss tracker starts again from 0 every epoch and for validation, and a
    compile() makes a new one: the samples reported still add up to the data, and a
    subclassed model fitted before the monitor still gets its probes (the function is
    traced again for the input shape, which the model cannot give)."""
    result = json.loads(_run_script("train_counts.py").stdout.strip().splitlines()[-1])
    n = 32 * 11 + 8
    unknown = result["unknown_length"]["samples"]
    assert len(unknown) == 36 and sum(unknown) == 3 * n  # was 3 x 384: a short batch as full
    assert unknown == ([32] * 11 + [8]) * 3  # each epoch's last step settled at its end
    again = result["compiled_again"]["samples"]
    assert again == ([32] * 11 + [8]) * 2  # was 360 a step: the old tracker's count
    sub = result["subclassed_fitted_before"]
    assert sum(sub["samples"]) == 2 * n and sub["probes"] == 4


def test_a_monitor_used_for_two_fits_alone_records_both(tmp_path):
    """Outside gpuscale, one ScalingMonitor given to two fit calls (compiled again
    between them): the second fit said 'recorded 24 steps to FILE' and no FILE was
    written (its recorder never got a start). Each fit is a recording of its own, as
    two monitors make, with its own steps and samples."""
    from gpuscale.events.schema import StepEvent
    from gpuscale.recording.reader import load_run

    proc = _run_script("train_twice.py", GPUSCALE_DATA_DIR=str(tmp_path))
    assert "nothing recorded" not in proc.stderr, proc.stderr
    said = [line for line in proc.stderr.splitlines() if "gpuscale: recorded" in line]
    files = sorted((tmp_path / "runs").glob("*.ndjson*"))
    assert len(said) == len(files) == 4, (proc.stderr, files)
    runs = sorted((load_run(f) for f in files), key=lambda r: r.start.t)
    # the two fits, then a custom loop started twice with one monitor: each run ends
    # (the second close() did nothing: its recording read as interrupted)
    assert [r.end.steps if r.end else None for r in runs] == [12, 24, 3, 3]
    steps = [[e for e in r.events if isinstance(e, StepEvent)] for r in runs]
    assert [sum(e.samples for e in s) for s in steps] == [360, 720, 96, 96]
    # each run's steps say its fit's plan (one epoch of 12, then two): the loops none
    assert [{e.total_steps for e in s} for s in steps] == [{12}, {24}, {None}, {None}]


def test_a_monitor_given_to_another_model_probes_and_counts_that_model():
    """One ScalingMonitor given to a second model's fit: its probe ran the first
    model's gradients (4 tensors, inputs of 8 features, not the second's 2 tensors
    and 5 features), and its samples were read from the first model's counter (360
    a step, then 0)."""
    result = json.loads(_run_script("train_reuse.py").stdout.strip().splitlines()[-1])
    epoch = [32] * 11 + [8]
    assert result["first"]["samples"] == result["second"]["samples"] == epoch
    assert result["first"]["probe_tensors"] == [4, 4]
    assert result["first"]["probe_input"] == [[16, 8]]  # 32 a step over 2 replicas
    assert result["second"]["probe_tensors"] == [2, 2]
    assert result["second"]["probe_input"] == [[16, 5]]
    assert result["first"]["warnings"] == result["second"]["warnings"] == []


@pytest.fixture(scope="module")
def unknown_length(tmp_path_factory) -> dict:
    """train_unknown_length.py's fits (data of unknown length, the counter's clock
    frozen), and the path of the one it recorded."""
    path = tmp_path_factory.mktemp("unknown") / "run.ndjson"
    proc = _run_script("train_unknown_length.py", str(path))
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["path"] = path
    return result


def test_a_second_fit_of_unknown_length_does_not_take_the_first_fits_length(unknown_length):
    """A second fit on data of unknown length took the first fit's epoch length (3
    batches) for its own and read the counter at every step past it (0.17 ms a read),
    as though each were an epoch's last: read at its first step and its epoch's end."""
    assert unknown_length["three_batches"]["reads"] == [1, 3]
    assert unknown_length["then_twelve"]["reads"] == [1, 12]


def test_one_epoch_of_unknown_length_reports_its_short_last_batch(unknown_length):
    """One epoch of data of unknown length whose last batch is short: nothing told the
    callback it was the last step (no next epoch, no known length), so it was said as
    full, 384 samples for the 360 trained on. The step is held back until the next
    step or the epoch's end, where the counter is read once more."""
    from gpuscale.analysis.summary import summarize
    from gpuscale.events.schema import StepEvent
    from gpuscale.recording.reader import load_run

    epoch = [32] * 11 + [8]
    assert unknown_length["then_twelve"]["samples"] == epoch  # a monitor's second fit
    assert unknown_length["recorded"]["samples"] == epoch
    run = load_run(unknown_length["path"])
    steps = [e for e in run.events if isinstance(e, StepEvent)]
    assert [e.step for e in steps] == list(range(12))
    assert [e.samples for e in steps] == epoch
    # each step's time is its end, not the later one at which it was reported: a step
    # began after the one before it ended (a later time made the last step begin
    # about a step before the one before it ended: a negative gap between steps)
    for before, step in zip(steps, steps[1:], strict=False):
        assert step.t - step.step_time_s >= before.t - 1e-4, (before, step)
    # Keras does not know the epoch's length: no total (the progress bar says N/?)
    assert all(e.total_steps is None for e in steps)
    summary = summarize(run.events)
    assert summary.mean_samples_per_step * 12 == pytest.approx(360)
    step_s = sum(e.step_time_s for e in steps)
    assert summary.mean_step_throughput_samples_s == pytest.approx(360 / step_s)


def test_steps_per_execution_counts_the_steps_of_an_epochs_last_call(tmp_path):
    """With steps_per_execution=5 and 12-step epochs, each epoch's last call runs 2
    steps, not 5: it was said as 5 steps of 8 samples (30 steps for the 24 trained,
    indices 4, 9, 14, ...; its time divided by 5)."""
    from gpuscale.events.schema import StepEvent
    from gpuscale.recording.reader import load_run

    path = tmp_path / "run.ndjson"
    result = json.loads(
        _run_script("train_multi_step.py", str(path)).stdout.strip().splitlines()[-1]
    )
    assert result["optimizer_steps"] == 24
    assert result["steps"] == [4, 9, 11, 16, 21, 23]
    assert result["samples"] == [32, 32, 20] * 2  # per step: 32 + 8 over the last 2
    run = load_run(path)
    assert run.end.steps == 24
    # an event stands for the steps since the one before (its samples are per step)
    ends = [e.step for e in run.events if isinstance(e, StepEvent)]
    counts = [b - a for a, b in zip([-1, *ends], ends, strict=False)]
    assert counts == [5, 5, 2] * 2
    samples = [e.samples for e in run.events if isinstance(e, StepEvent)]
    assert sum(s * c for s, c in zip(samples, counts, strict=True)) == 2 * (32 * 11 + 8)


def test_steps_per_execution_on_data_that_repeats_counts_every_call_whole(tmp_path):
    """With ``repeat()`` and ``steps_per_epoch=12`` at 5 steps a call, Keras runs each
    epoch's last call whole (15 steps an epoch, 30 in all): the optimizer's count says
    so, and the recording says 30 (it said 24, the last calls' time over 2 steps and
    20 samples a step for a batch of 32)."""
    from gpuscale.events.schema import StepEvent
    from gpuscale.recording.reader import load_run

    path = tmp_path / "run.ndjson"
    result = json.loads(
        _run_script("train_multi_step.py", str(path), "repeat").stdout.strip().splitlines()[-1]
    )
    assert result["optimizer_steps"] == 30
    assert result["steps"] == [4, 9, 14, 19, 24, 29]
    assert result["samples"] == [32] * 6
    run = load_run(path)
    assert run.end.steps == 30
    assert sum(e.samples * 5 for e in run.events if isinstance(e, StepEvent)) == 30 * 32


@pytest.mark.parametrize("mode", ["filter", "filter-twice", "filter-batch"])
def test_steps_per_execution_on_data_of_unknown_length_counts_the_last_call_right(tmp_path, mode):
    """Data of unknown length (a ``filter``), 12 steps an epoch at 5 a call: each
    epoch's last call runs 2, and was said as 5 (30 steps for 24, samples over); so
    too in a monitor's second fit alone (its steps counted from the last fit's: 27),
    and with ``batch_size`` given (never held back: 30)."""
    from gpuscale.events.schema import StepEvent
    from gpuscale.recording.reader import load_run

    path = tmp_path / "run.ndjson"
    proc = _run_script("train_multi_step.py", str(path), mode)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    fits = 2 if mode == "filter-twice" else 1
    assert result["optimizer_steps"] == 24 * fits
    ends = result["steps"]  # the second fit alone is a run of its own, from 0
    counts = [b - a if b > a else b + 1 for a, b in zip([-1, *ends], ends, strict=False)]
    assert counts == [5, 5, 2] * 2 * fits
    total = sum(s * c for s, c in zip(result["samples"], counts, strict=True))
    # batch_size says every step's samples, the short last batch's too (README)
    per_epoch = 32 * 12 if mode == "filter-batch" else 32 * 11 + 8
    assert total == 2 * fits * per_epoch
    run = load_run(path)  # the first fit's (the second's is refused: the file is there)
    assert run.end.steps == 24
    assert [e.step for e in run.events if isinstance(e, StepEvent)] == ends[:6]
    if mode == "filter-twice":
        assert "gpuscale: 24 steps, not recorded" in proc.stderr


def test_steps_per_execution_first_call_is_warm_up_and_the_summary_counts_every_step(tmp_path):
    """The first call of several steps carries the tracing: it is warm-up (it was
    counted: a compile's seconds in the throughput), and a run's first event stands
    for the steps from 0 (its 5, not 1: 710.4 samples for the 720 trained)."""
    from gpuscale.analysis.summary import summarize
    from gpuscale.events.schema import StepEvent
    from gpuscale.keras.monitor import Monitor

    monitor = Monitor(record=None, phases=False)  # the default 2 warm-up steps
    sent: list = []
    monitor._emit = sent.append
    monitor._started = True
    for _ in range(3):
        monitor.record_step(0.01, 32, steps=5)
    assert [e.warmup for e in sent] == [True, False, False]
    steps = [
        StepEvent(t=1.0 + i, worker=0, step=s, step_time_s=0.2, samples=30, warmup=False)
        for i, s in enumerate([4, 9, 11])
    ]
    summary = summarize(steps)
    assert summary.mean_samples_per_step * 12 == pytest.approx(360)


def test_a_step_held_back_goes_out_before_a_probe_not_after(monkeypatch):
    """Data of unknown length: each step is held to the next. A probe due there ran
    before the step just ended was said, so that step's time came behind the probe's
    events (a compile's seconds at first: the recorder's 'clock stepped back'). Now
    the step goes out first and the events' times never go back."""
    from types import SimpleNamespace

    monitor, total, _reads = _monitor()
    monitor.phases = True
    monitor.schedule.every = 3  # a probe every 3rd step
    monitor._started, monitor._pending_start = True, False
    monitor._model = SimpleNamespace(steps_per_execution=1)
    monitor.params = {"steps": None}
    sent: list = []
    monitor._emit = lambda event: sent.append(
        (event.t, "step", event.step) if hasattr(event, "step") else (event.t, "probe", None)
    )
    clock = [1000.0]

    def probe(step_time_s: float) -> None:
        clock[0] += 7.0  # the probe's compile
        monitor._emit(SimpleNamespace(t=clock[0]))  # its event, as _run_probe emits it

    monkeypatch.setattr(monitor, "_run_probe", probe)
    monkeypatch.setattr("gpuscale.keras.callback.time.time", lambda: clock[0])
    for batch in range(10):
        monitor.on_train_batch_begin(batch)
        total[0] += 32
        clock[0] += 0.1
        monitor.on_train_batch_end(batch)
    monitor._release_held()
    times = [t for t, _, _ in sent]
    assert times == sorted(times)
    assert [k for _, k, _ in sent].count("probe") == 3
    assert [s for _, k, s in sent if k == "step"] == list(range(10))


def test_another_models_first_steps_are_warm_up_again():
    """A monitor given another model (under gpuscale its steps go on): that model's
    first steps trace it, so they are warm-up as a fit's first are (they were counted:
    a compile's seconds in the throughput)."""
    from gpuscale.keras.callback import ScalingMonitor

    monitor = ScalingMonitor(record=None, phases=False)
    sent: list = []
    monitor._emit = sent.append
    monitor._started = True
    for _ in range(3):
        monitor.record_step(0.01, 32)
    monitor._forget_model()  # set_model(another model) does this
    for _ in range(3):
        monitor.record_step(0.01, 32)
    assert [e.warmup for e in sent] == [True, True, False] * 2
    assert [e.step for e in sent] == list(range(6))


def _begun_monitor(**kwargs):
    """A monitor (no probes, no recording) whose run began with a 32-sample step, on a
    small model without a strategy: (monitor, the events it sent, model, strategy)."""
    import keras
    import tensorflow as tf

    from gpuscale.keras.callback import ScalingMonitor

    monitor = ScalingMonitor(record=None, phases=False, **kwargs)
    sent: list = []
    monitor._emit = sent.append
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    strategy = tf.distribute.get_strategy()
    monitor._begin(model, strategy, 32)
    monitor.record_step(0.01, 32)
    return monitor, sent, model, strategy


def test_a_restart_with_another_batch_is_said(monkeypatch):
    """Two fits of different batches under one ``gpuscale run`` are one run: its median
    step and throughput mix both, so the restart says the batch changed."""
    monitor, sent, model, strategy = _begun_monitor()
    monitor.record_step(0.01, 8)  # the data's short last batch: no change of batch
    monitor._run_ended = False  # as under gpuscale: the run goes on
    monitor._begin(model, strategy, 32)
    monitor.record_step(0.01, 32)
    monitor._begin(model, strategy, 128)
    said = [e.message for e in sent if getattr(e, "level", "") == "warning"]
    assert len(said) == 1 and "the batch changed: 128 samples a step, was 32" in said[0]


def test_a_restart_is_said_without_building_a_whole_start(monkeypatch):
    """Every fit after the first (under gpuscale, or one monitor's) is a restart, said in
    a log line; it built a whole StartEvent and dropped it (the parameter count, the
    host, the cores: 0.2-0.4 ms of the fit's first step). What it says is the same."""
    import gpuscale.keras.monitor as monitor_module

    counted: list = []
    count = monitor_module.trainable_bytes
    monkeypatch.setattr(monitor_module, "trainable_bytes", lambda m: counted.append(m) or count(m))
    monitor, sent, model, strategy = _begun_monitor(name="restarts")
    monitor._begin(model, strategy, 64)
    assert len(counted) == 1  # the start's, not the restart's
    assert type(sent[0]).__name__ == "StartEvent" and sent[0].model == "restarts"
    assert [e.message for e in sent[2:]] == [
        "training restarted (restarts, none, 1 replicas); steps continue from 1",
        "the batch changed: 64 samples a step, was 32; this run's median step and "
        "throughput mix both (to compare device counts, keep one batch a run)",
    ]


def test_the_count_is_read_in_one_op_a_replica(monkeypatch):
    """A replica's count was read with ``numpy()``: a read, a copy and layers of Python,
    35 us a replica against 13 us for the read alone (2 CPU logical devices; at a fit's
    first and last steps). The same count, read without it."""
    import tensorflow as tf

    from gpuscale.keras.callback import ScalingMonitor, sample_counter

    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        counter = sample_counter()
    strategy.run(lambda: counter.assign_add(24))
    monitor = ScalingMonitor(record=None, phases=False)
    monitor._strategy, monitor._samples_var = strategy, counter
    replica = type(strategy.experimental_local_results(counter)[0])
    monkeypatch.setattr(replica, "numpy", lambda self: pytest.fail("read with numpy()"))
    assert monitor._samples_seen() == 24


def test_a_loop_started_outside_its_strategy_says_it_is_taken_as_one_device(monkeypatch):
    """``wrap()``/``step()`` start the run with the current strategy: outside
    ``with strategy.scope()`` none, and a 2-device loop was said to be 1 device
    (``--devices 2 but the script trains on 1 replica``) without a word why."""
    import tensorflow as tf

    from gpuscale.keras import custom_loop
    from gpuscale.keras.callback import ScalingMonitor

    monkeypatch.setattr(custom_loop, "_several_devices", lambda: True)
    for strategy, warned in ((None, True), (tf.distribute.OneDeviceStrategy("/cpu:0"), False)):
        monitor = ScalingMonitor(record=None, phases=False, batch_size=8)
        sent: list = []
        monitor._emit = sent.append
        monitor.start(strategy=strategy)
        said = [e.message for e in sent if getattr(e, "level", "") == "warning"]
        assert bool(said) is warned
        if warned:
            assert "call monitor.start(model, strategy) before the loop" in said[0]


def test_a_probe_due_just_before_an_epochs_short_last_step_leaves_it_settled(monkeypatch):
    """A probe due at the held step before an epoch's last: the last step was sent at
    once as a full batch so the probe could follow it, and nothing settled it after
    (32 said for 8; with several steps a call, 15 steps for 12). Now the probe's events
    wait for it, and the epoch's end settles it."""
    from types import SimpleNamespace

    from gpuscale.events.schema import StepEvent

    monitor, total, _reads = _monitor()
    monitor.phases = True
    monitor.schedule.every = 9  # due when the 9th step of 10 is said
    monitor._started, monitor._pending_start = True, False
    monitor._model = SimpleNamespace(steps_per_execution=1)
    monitor.params = {"steps": None}
    sent: list = []
    monitor._emit = sent.append
    monitor._run_probe = lambda step_time_s: monitor._emit(SimpleNamespace(t=time.time()))
    monitor.on_epoch_begin(0)
    for batch, size in enumerate([32] * 9 + [8]):
        monitor.on_train_batch_begin(batch)
        total[0] += size
        monitor.on_train_batch_end(batch)
    monitor.on_epoch_end(0)
    steps = [e for e in sent if isinstance(e, StepEvent)]
    assert sum(e.samples for e in steps) == 9 * 32 + 8
    assert len(sent) == 11  # and the probe's event
    times = [e.t for e in sent]
    assert times == sorted(times)


def test_the_optimizers_count_is_not_trusted_under_loss_scaling():
    """fp16's loss scaling skips a step whose gradients overflow, uncounted by its
    ``iterations``: an epoch's last call would read short (5, 5, 1 for 5, 5, 2)."""
    from types import SimpleNamespace

    import keras

    from gpuscale.keras.callback import ScalingMonitor

    monitor = ScalingMonitor(record=None)
    monitor._model = SimpleNamespace(optimizer=keras.optimizers.SGD())
    assert monitor._optimizer_iterations() == 0
    scaled = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD())
    monitor._model = SimpleNamespace(optimizer=scaled)
    assert monitor._optimizer_iterations() is None
    accumulating = keras.optimizers.SGD(gradient_accumulation_steps=4)
    monitor._model = SimpleNamespace(optimizer=accumulating)
    assert monitor._optimizer_iterations() is None


def test_a_strategys_one_cpu_device_is_the_same_platform_as_its_two():
    """A script's 1-device run (a MirroredStrategy of one CPU device) said ``cpu``, its
    2-device run ``cpu-logical``: ``recommend`` split them into two configurations
    (``…, CPU`` and ``…, CPU devices``), each with no answer. The built-in trainer says
    ``cpu-logical`` at every count; no strategy at all stays ``cpu``."""
    import tensorflow as tf

    from gpuscale.keras.describe import describe_strategy

    one = describe_strategy(tf.distribute.MirroredStrategy(["/cpu:0"]))
    assert one["platform"] == "cpu-logical"
    assert describe_strategy(tf.distribute.get_strategy())["platform"] == "cpu"


def test_a_multi_worker_strategys_cpus_are_cpus_not_cpu_logical_devices():
    """A script under ``--local-workers 2`` (MultiWorkerMirroredStrategy, one CPU per
    worker) was recorded as ``cpu-logical``: its summary said "2 x CPU logical devices
    (2 workers, 1 each)" and ``recommend`` missed that the workers share one host's
    cores (no "not what separate machines would do"). The built-in trainer says ``cpu``."""
    from types import SimpleNamespace

    from gpuscale.keras.describe import describe_strategy

    class MultiWorkerMirroredStrategy:  # the name describe_strategy goes by
        num_replicas_in_sync = 2
        cluster_resolver = SimpleNamespace(
            cluster_spec=lambda: SimpleNamespace(
                as_dict=lambda: {"worker": ["localhost:1", "localhost:2"]}
            )
        )
        extended = SimpleNamespace(worker_devices=("/job:worker/replica:0/task:0/device:CPU:0",))

    info = describe_strategy(MultiWorkerMirroredStrategy())
    assert info["strategy"] == "multi-worker"
    assert info["num_workers"] == 2
    assert info["platform"] == "cpu"
    assert [d.kind for d in info["devices"]] == ["cpu"]


def test_a_loop_without_a_batch_is_told_how_to_give_it_once():
    """A custom loop without ``batch_size`` (nor ``samples=``) had a summary saying
    "batch unknown" and no throughput, without a word on how to give it."""
    import tensorflow as tf

    from gpuscale.keras.callback import ScalingMonitor
    from gpuscale.keras.custom_loop import NO_BATCH_HINT

    for batch, hinted in ((None, 1), (8, 0)):
        monitor = ScalingMonitor(record=None, phases=False, batch_size=batch)
        sent: list = []
        monitor._emit = sent.append
        monitor.start(strategy=tf.distribute.OneDeviceStrategy("/cpu:0"))
        for _ in range(3):
            with monitor.step() as step:
                step.sync(tf.ones(2))
        said = [e.message for e in sent if getattr(e, "level", "") == "warning"]
        assert said.count(NO_BATCH_HINT) == hinted, said
        assert sum(type(e).__name__ == "StepEvent" for e in sent) == 3
    assert "ScalingMonitor(batch_size=" in NO_BATCH_HINT
