"""The Keras callback end to end: a user's script (model.fit under MirroredStrategy
on 2 logical CPU devices, then a custom loop) reporting through a real EventServer,
and the same script run standalone, writing its own recording; and a one-replica
script. They run two at a time, once for the module."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from gpuscale.analysis import metrics
from gpuscale.analysis.script_runs import scaling_of
from gpuscale.events.schema import EndEvent, LogEvent, PhaseEvent, StartEvent, StepEvent
from gpuscale.events.transport import EventServer
from gpuscale.recording.reader import load_run

SCRIPT = Path(__file__).parent / "scripts_keras" / "train_tiny.py"
TINY_PARAMS = 8 * 16 + 16 + 16 * 3 + 3
FIT_STEPS = 7


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUSCALE_", "TF_CONFIG"))}
    env.update({"TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}, **extra)
    return env


def _script_events(argv: list[str], ends: int) -> list:
    """Run a script with an EventServer listening; every event it sent. The script
    sends ``ends`` EndEvents: they are waited for (an event, not a time: the server
    may still be reading a closed connection's last lines on a busy machine)."""
    received: queue.Queue = queue.Queue()
    server = EventServer(received.put)
    events: list = []
    try:
        proc = subprocess.run(
            [sys.executable, *argv],
            env=_env(**server.env(0)),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        while sum(isinstance(e, EndEvent) for e in events) < ends:
            try:
                events.append(received.get(timeout=120))
            except queue.Empty:
                break  # an end never sent: the tests' assertions say what is missing
    finally:
        server.close()
    while not received.empty():
        events.append(received.get())
    return events


def _standalone(data_dir: Path) -> subprocess.CompletedProcess:
    """The script run alone (no gpuscale listening), recording into ``data_dir``."""
    return subprocess.run(
        [sys.executable, str(SCRIPT), "4"],
        env=_env(GPUSCALE_DATA_DIR=str(data_dir)),
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def scripts(tmp_path_factory) -> dict[str, Future]:
    """The module's script runs, two at a time (one per core of a 2-core machine; their
    checks are of events and recordings, never of timings); each test waits for its
    own: ``fit``, every event
    train_tiny.py sent to an EventServer (two fits and the custom loop: three ends);
    ``alone``, it run standalone, and the folder it recorded into; ``one_replica``,
    every event of train_one_replica.py."""
    data_dir = tmp_path_factory.mktemp("standalone")
    with ThreadPoolExecutor(2) as pool:
        yield {
            "fit": pool.submit(_script_events, [str(SCRIPT), str(FIT_STEPS)], ends=3),
            "alone": pool.submit(lambda: (_standalone(data_dir), data_dir)),
            "one_replica": pool.submit(
                _script_events, [str(SCRIPT.parent / "train_one_replica.py"), "8"], ends=1
            ),
        }


@pytest.fixture(scope="module")
def reported_events(scripts) -> list:
    return scripts["fit"].result()


@pytest.mark.tf
def test_fit_sends_start_steps_phases_end(reported_events):
    starts = [e for e in reported_events if isinstance(e, StartEvent)]
    assert len(starts) == 1  # the custom loop after fit continues the run, no second start
    start = starts[0]
    assert start.source == "script" and start.model == "tiny"
    assert start.strategy == "mirrored" and start.num_replicas == 2
    assert start.platform == "cpu-logical" and len(start.devices) == 2
    assert start.cross_device_ops == "collective"  # TensorFlow's pick on CPU
    assert start.param_count == TINY_PARAMS and start.payload_bytes == TINY_PARAMS * 4
    assert start.global_batch == 32 and start.per_replica_batch == 16  # sent after step 1

    fit_steps = [e for e in reported_events if isinstance(e, StepEvent)][:FIT_STEPS]
    assert [s.step for s in fit_steps] == list(range(FIT_STEPS))
    assert all(s.samples == 32 for s in fit_steps)  # counted in the train step
    assert [s.warmup for s in fit_steps[:3]] == [True, True, False]
    assert all(s.step_time_s > 0 for s in fit_steps)

    phases = [e for e in reported_events if isinstance(e, PhaseEvent)]
    assert [p.step for p in phases] == [2, 5]  # every=3
    for phase in phases:
        assert phase.compute_s > 0 and phase.allreduce_s >= 0 and phase.apply_s >= 0
        assert phase.payload_bytes == TINY_PARAMS * 4 and phase.num_tensors == 4
        assert phase.method == "callback-probe"
    # the passes' order alternates and is recorded, for the summary to balance
    assert [p.compute_first for p in phases] == [True, False]
    # compiling the probe's passes, once, timed apart from the first probe's cost
    assert phases[0].setup_s is not None and phases[0].setup_s > 0
    assert phases[1].setup_s is None


@pytest.mark.tf
def test_steps_per_execution_and_custom_loop_follow_fit(reported_events):
    steps = [e for e in reported_events if isinstance(e, StepEvent)]
    # steps_per_execution=2: one event per call of 2 steps, numbered by its last step
    multi = steps[FIT_STEPS : FIT_STEPS + 2]
    assert [s.step for s in multi] == [FIT_STEPS + 1, FIT_STEPS + 3]
    assert all(s.samples == 32 for s in multi)  # per step, as for every StepEvent
    loop_steps = steps[FIT_STEPS + 2 :]
    first = FIT_STEPS + 4
    assert [s.step for s in loop_steps] == [first, first + 1, first + 2]
    assert all(s.samples == 4 and s.step_time_s > 0 for s in loop_steps)
    ends = [e for e in reported_events if isinstance(e, EndEvent)]
    assert [e.status for e in ends] == ["completed"] * 3  # two fits, then the loop
    assert ends[0].steps == FIT_STEPS and ends[1].steps == 4
    logs = [e.message for e in reported_events if isinstance(e, LogEvent)]
    assert sum("training restarted" in m for m in logs) == 2


@pytest.mark.tf
def test_each_fits_steps_say_where_it_is_planned_to_end(reported_events):
    """``StepEvent.total_steps`` (the progress bar's and the header's N/total): the
    first fit's 7 steps; the second fit (another monitor, 4 steps) goes on in the
    stream's numbering, so its steps say 11; the custom loop's say none (a script's
    bar read 11/? throughout)."""
    steps = [e for e in reported_events if isinstance(e, StepEvent)]
    totals = [s.total_steps for s in steps]
    assert totals == [FIT_STEPS] * FIT_STEPS + [FIT_STEPS + 4] * 2 + [None] * 3


@pytest.mark.tf
def test_standalone_script_writes_its_own_recording(scripts):
    proc, data_dir = scripts["alone"].result()
    assert proc.returncode == 0, proc.stderr[-3000:]
    recordings = sorted((data_dir / "runs").glob("*.ndjson"))
    # each monitor writes its own recording: two fits and the custom loop
    assert len(recordings) == 3, recordings
    assert "gpuscale replay" in proc.stderr
    fit_run = load_run(next(p for p in recordings if p.name.endswith("_tiny_2xcpu.ndjson")))
    assert fit_run.start.model == "tiny" and fit_run.start.num_replicas == 2
    assert fit_run.end is not None and fit_run.end.status == "completed"
    assert len([e for e in fit_run.events if isinstance(e, StepEvent)]) == 4
    assert fit_run.end.summary is not None
    # the custom loop said weak scaling: its start, summary and note say so (not fit's split)
    loop_run = load_run(next(p for p in recordings if "train-tiny" in p.name))
    assert loop_run.start.scaling == "weak" and scaling_of(loop_run.start) == "weak"
    assert "Keras splits" not in (loop_run.start.note or "")
    assert fit_run.end.summary["scaling"] == "strong"
    assert loop_run.end.summary.get("scaling", "weak") == "weak"  # the default is left out


@pytest.mark.tf
def test_one_replica_reports_no_exchange(scripts):
    """Issue 18: with one replica there is nothing to all-reduce; the callback
    must not report a difference of two noisy timings as an exchange."""
    events = scripts["one_replica"].result()
    start = next(e for e in events if isinstance(e, StartEvent))
    assert start.num_replicas == 1
    phases = [e for e in events if isinstance(e, PhaseEvent)]
    assert [p.step for p in phases] == [3, 5, 7]  # every=2, after the 2 warm-up steps
    assert phases[0].setup_s and [p.setup_s for p in phases[1:]] == [None, None]
    for p in phases:
        assert p.allreduce_s == 0.0
        assert p.compute_first is None  # one pass: no order
        assert p.compute_allreduce_s is None and p.allreduce_total_s is None
        assert p.probe_cost_s is not None and p.probe_cost_s > 0
        # against the usual step: the median of the counted steps so far that followed
        # no probe (ProbeScheduler.reference_step_s), not the probed step alone
        probed = {q.step for q in phases}
        usual = [
            e.step_time_s
            for e in events
            if isinstance(e, StepEvent)
            and not e.warmup
            and e.step <= p.step
            and e.step - 1 not in probed
        ]
        assert p.step_time_s == pytest.approx(metrics.median(usual), rel=1e-9), (p, usual)


CUSTOM_LOOP = """
import keras, tensorflow as tf
from gpuscale.keras import ScalingMonitor
loop = ScalingMonitor(batch_size=4, phases=False)
loop.start()  # the loop says nothing of its scaling
dense = keras.layers.Dense(2)
for _ in range(3):
    with loop.step() as step:
        step.sync(dense(tf.ones((4, 8))))
loop.close()
"""


@pytest.mark.tf
def test_a_custom_loop_says_tf_distribute_splits_its_batch(tmp_path):
    """A custom loop's run (the start/step helper, no fit) is recorded as one, and
    its note says tf.distribute splits the batch, not Keras."""
    from gpuscale.analysis.script_runs import CUSTOM_LOOP_BATCH_NOTE

    proc = subprocess.run(
        [sys.executable, "-c", CUSTOM_LOOP],
        env=_env(GPUSCALE_DATA_DIR=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (recording,) = (tmp_path / "runs").glob("*.ndjson")
    start = load_run(recording).start
    assert start.config["custom_loop"] is True and start.scaling == "strong"
    assert start.note == CUSTOM_LOOP_BATCH_NOTE
