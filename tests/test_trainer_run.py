"""End to end with TensorFlow: a tiny mnist-cnn on 2 logical CPU devices, run
once through LiveRun (a real trainer child process) and checked from several
sides; and Ctrl-C on the real `gpuscale run`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from fake_nvml import FakeNvml

from gpuscale.events.schema import EndEvent, PhaseEvent, StartEvent, StepEvent
from gpuscale.live.trainer_run import LiveRun
from gpuscale.trainer.options import TrainConfig

pytestmark = pytest.mark.tf

WIDTH = 8


def mnist_cnn_params(width: int) -> int:
    """Seed 002's network, counted by hand: 5x5 conv from 1 channel, 5x5 conv,
    four 3x3 convs, then 3x3xwidth features into a dense 10."""
    conv = (25 * 1 * width + width) + (25 * width * width + width) + 4 * (9 * width * width + width)
    return conv + (9 * width * 10 + 10)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> tuple[LiveRun, list]:
    path = tmp_path_factory.mktemp("trainer") / "run.ndjson"
    config = TrainConfig(
        devices=2, width=WIDTH, global_batch=32, steps=14, warmup_steps=2, phase_every=3
    )
    run = LiveRun(config, record=path, nvml=FakeNvml.scenario("no-driver"))
    run.start()
    events = list(run.events(timeout=120))
    assert run.done, "the trainer did not finish within 2 minutes"
    return run, events


def test_run_completes_with_one_start_and_one_end(finished_run):
    run, events = finished_run
    assert run.error is None, run.error
    assert isinstance(events[-1], EndEvent) and events[-1].status == "completed"
    starts = [e for e in events if isinstance(e, StartEvent)]
    assert len(starts) == 1
    start = starts[0]
    assert start.num_replicas == 2 and start.platform == "cpu-logical"
    assert start.cpu_cores == os.cpu_count()  # the cores its logical devices share
    assert [d.tf_name.rsplit(":", 1)[-1] for d in start.devices] == ["0", "1"]
    assert start.scaling == "strong" and start.global_batch == 32 and start.per_replica_batch == 16
    steps = [e for e in events if isinstance(e, StepEvent)]
    assert [s.step for s in steps] == list(range(14))
    assert [s.warmup for s in steps[:3]] == [True, True, False]
    assert all(s.step_time_s > 0 and s.samples == 32 for s in steps)
    assert all(s.total_steps == 14 for s in steps)  # --steps: the progress's N/14


def test_payload_is_the_trainable_parameter_bytes(finished_run):
    _, events = finished_run
    start = next(e for e in events if isinstance(e, StartEvent))
    params = mnist_cnn_params(WIDTH)
    assert start.param_count == params
    assert start.payload_bytes == 4 * params  # float32 gradients
    phases = [e for e in events if isinstance(e, PhaseEvent)]
    assert phases and all(p.payload_bytes == 4 * params for p in phases)
    assert all(p.num_tensors == 14 for p in phases)  # 7 layers x (kernel, bias)


def test_phases_are_positive_and_add_up_to_the_step(finished_run):
    _, events = finished_run
    phases = [e for e in events if isinstance(e, PhaseEvent)]
    # --phase-every 3 asks after steps 2, 5, 8, 11; the next step runs split and is probed
    assert [p.step for p in phases] == [3, 6, 9, 12]
    assert {p.method for p in phases} == {"split-step"}
    for p in phases:
        assert p.compute_s > 0
        assert p.allreduce_s >= 0 and p.apply_s >= 0 and p.input_s >= 0
        assert p.allreduce_total_s is not None and p.allreduce_total_s > 0
    steps = sorted(e.step_time_s for e in events if isinstance(e, StepEvent) and not e.warmup)
    median_step = steps[len(steps) // 2]
    sums = sorted(p.compute_s + p.allreduce_s + p.apply_s for p in phases)
    median_sum = (sums[1] + sums[2]) / 2
    assert 0.5 * median_step < median_sum < 2.0 * median_step
    computes = sorted(p.compute_s for p in phases)
    assert (computes[1] + computes[2]) / 2 < 1.5 * median_step  # compute is part of the step


def test_probes_keep_their_raw_timing_and_cost(finished_run):
    _, events = finished_run
    phases = [e for e in events if isinstance(e, PhaseEvent)]
    for p in phases:
        assert p.compute_allreduce_s is not None and p.compute_allreduce_s > 0
        assert p.allreduce_s == pytest.approx(max(0.0, p.compute_allreduce_s - p.compute_s))
        assert p.probe_cost_s is not None  # the extra passes: compute and the all-reduce alone
        assert p.probe_cost_s >= p.compute_s + p.allreduce_total_s
    # the compute pass before the split step, then after it: recorded, for the summary
    assert [p.compute_first for p in phases] == [i % 2 == 0 for i in range(len(phases))]


def test_compiling_the_probe_is_timed_apart_on_the_first_probe(finished_run):
    """The split step and the probe's passes compile once, after the first step:
    not in any probe's cost (the budget's), but said on the first probe after."""
    _, events = finished_run
    phases = [e for e in events if isinstance(e, PhaseEvent)]
    assert phases[0].setup_s is not None and phases[0].setup_s > 0
    assert all(p.setup_s is None for p in phases[1:])


def test_recording_holds_the_run(finished_run):
    run, events = finished_run
    from gpuscale.recording.reader import load_run

    loaded = load_run(run.recording_path)
    assert loaded.start.model == f"mnist-cnn-w{WIDTH}"
    assert loaded.end is not None and loaded.end.status == "completed"
    assert loaded.end.summary and loaded.end.summary["steps_counted"] == 12
    assert sum(isinstance(e, StepEvent) for e in loaded.events) == 14
    # one duration: the end event's is the one `gpuscale runs` shows (it was the
    # trainer's wall time with its start-up: 123.8 s there, 115.8 s in `runs`)
    from gpuscale.recording.store import list_runs

    (listed,) = list_runs(run.recording_path.parent)
    assert loaded.end.duration_s == pytest.approx(listed.duration_s, abs=1e-6)


# `gpuscale` as a user runs it, with the NVML stand-in (never real NVML in tests).
CLI_WITH_FAKE_NVML = (
    "import faulthandler, functools, signal, sys\n"
    "faulthandler.register(signal.SIGUSR1, all_threads=True)\n"  # stacks, if a test hangs
    # Ctrl-C as in a terminal, even when pytest itself runs as a background job
    # (`pytest &`: the shell starts it, and so every child, with SIGINT ignored)
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
    "from fake_nvml import FakeNvml\n"
    "import gpuscale.live.trainer_run as session\n"
    "session.LiveRun.__init__ = functools.partialmethod(\n"
    "    session.LiveRun.__init__, nvml=FakeNvml.scenario('no-driver'))\n"
    "from gpuscale.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def test_failing_user_model_is_one_paragraph_and_exit_1(tmp_path):
    (tmp_path / "badmodels.py").write_text(
        "def build():\n    raise RuntimeError('no weights here')\n"
    )
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            CLI_WITH_FAKE_NVML,
            "run",
            "--model",
            "badmodels:build",
            "--no-record",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
    )
    assert result.returncode == 1, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("gpuscale: error:")]
    assert len(errors) == 1
    assert "RuntimeError: no weights here" in errors[0]
    assert "badmodels.py:2 in build" in errors[0]
    assert "Traceback" not in result.stderr + result.stdout


def test_ctrl_c_stops_gpuscale_run_and_leaves_no_orphan(tmp_path):
    """SIGINT to the `gpuscale run` process only (the trainer is in its own
    session, as after a Ctrl-C in a terminal): exit 130 within 5 s, summary
    printed, trainer gone."""
    recording = tmp_path / "interrupted.ndjson"
    argv = [
        "run",
        "--width",
        "8",
        "--global-batch",
        "32",
        "--steps",
        "100000",
        "--record",
        str(recording),
    ]
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI_WITH_FAKE_NVML, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    deadline = time.monotonic() + 120
    trainer_pid = None
    while time.monotonic() < deadline:
        if recording.exists():
            lines = recording.read_text().splitlines()
            # Counted steps, not warm-up ones: the summary's step time needs them
            # (on a loaded machine three warm-up steps could be all there was).
            counted = sum('"kind":"step"' in ln and '"warmup":true' not in ln for ln in lines)
            if counted >= 3:
                trainer_pid = json.loads(lines[0])["pid"]
                break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    assert trainer_pid is not None, "the run never got to 3 counted steps"
    interrupted = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)  # every thread's stack to stderr, then give up
        time.sleep(2)
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"gpuscale run did not stop 30 s after SIGINT; its stderr:\n{err}")
    assert time.monotonic() - interrupted < 5.0 + 1.0  # 5 s, plus the interpreter's exit
    assert proc.returncode == 130, err
    assert "status: stopped" in out
    assert "step time:" in out
    assert not psutil.pid_exists(trainer_pid) or (
        psutil.Process(trainer_pid).status() == psutil.STATUS_ZOMBIE
    )
    last = json.loads(recording.read_text().splitlines()[-1])
    assert last["kind"] == "end" and last["status"] == "stopped"


def test_a_precision_not_reached_is_said_in_the_final_summary(tmp_path):
    """25 steps cannot pin the exposed share to ±0.5 points (the budget buys one
    probe): the summary says so, with the steps likely still needed."""
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            CLI_WITH_FAKE_NVML,
            "run",
            *("--devices", "2", "--width", str(WIDTH), "--global-batch", "32"),
            *("--steps", "25", "--warmup-steps", "2", "--precision", "0.5%"),
            "--no-record",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert result.returncode == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if "precision:" in x)
    assert (
        "±0.5% asked (step time ±0.5%, exposed share ±0.5 points), not reached by the end" in line
    )
    assert "more steps would" in line
    # and said early, as soon as the first probe's cost showed it (stderr, above the bar)
    assert (
        "--precision ±0.5%: at the probe budget (2%: 1% for the probes, 1% for the per-step cost"
        in result.stderr
    )
    assert "it will likely end before reaching it" in result.stderr
