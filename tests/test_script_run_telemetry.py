"""A script's telemetry flows from its launch (`gpuscale watch -- python train.py`),
to the consumer (the dashboard) and the recording, while TensorFlow may still be
importing; the script's own events still wait for its start (or the made-up one
after ``start_timeout_s``), as before."""

from __future__ import annotations

import sys
from pathlib import Path

from fake_nvml import FakeNvml

from gpuscale.events.schema import GpuSample, HostSample, LogEvent, StartEvent
from gpuscale.live.script_run import ScriptRun
from gpuscale.recording.reader import load_run

# Prints a line at once, then waits until the test creates the flag file: the run
# stays before its start (no callback, start timeout far away) as long as the test needs.
WAITER = (
    "import os, sys, time\n"
    "print('script says hello', flush=True)\n"
    "while not os.path.exists(sys.argv[1]):\n"
    "    time.sleep(0.02)\n"
    "print('script says bye', flush=True)\n"
)


def test_telemetry_reaches_the_consumer_and_the_recording_before_the_scripts_start(tmp_path):
    flag = tmp_path / "go"
    path = tmp_path / "run.ndjson"
    run = ScriptRun(
        [sys.executable, "-c", WAITER, str(flag)],
        record=path,
        start_timeout_s=3600.0,  # never reached: only telemetry may make the start known
        sample_interval_s=0.1,
        nvml=FakeNvml.scenario("h100-box"),
    ).start()
    try:
        seen: list = []
        # Wait for events, not time: a host sample and a GPU sample of each kind must
        # come while the script waits for the flag (before that, no end is possible).
        for event in run.events(timeout=60):
            seen.append(event)
            if any(isinstance(e, HostSample) for e in seen) and any(
                isinstance(e, GpuSample) for e in seen
            ):
                break
        assert not run.done, "the telemetry only came with the end of the run"
        first = seen[0]
        assert isinstance(first, StartEvent) and first.provisional  # a start, first
        assert first.model == run.name and first.source == "script"
        # the script's own output still waits for its start (or the start timeout)
        assert not any(isinstance(e, LogEvent) and e.source == "script" for e in seen)
        assert sum(isinstance(e, StartEvent) for e in seen) == 1
    finally:
        flag.write_text("")
    rest = list(run.events(timeout=120))
    assert run.done and run.status == "completed"
    everything = seen + rest
    logs = [e.message for e in everything if isinstance(e, LogEvent) and e.source == "script"]
    assert logs == ["script says hello", "script says bye"]  # shown after all, in order
    starts = [e for e in everything if isinstance(e, StartEvent)]
    assert [s.provisional for s in starts] == [True, False]  # one provisional, then the run's
    # The recording has the samples from the launch too, before the script's end.
    loaded = load_run(Path(path))
    samples = [e for e in loaded.events if isinstance(e, (HostSample, GpuSample))]
    assert samples and samples[0].t < loaded.end.t


def test_the_provisional_start_of_a_script_given_devices_has_those_devices(tmp_path):
    """`gpuscale watch --devices 2 -- python train.py` on CPUs: gpuscale sets up 2
    logical devices for the script, so the start it shows before the callback's (and
    records first) says 2 logical CPUs, not 1 CPU."""
    import os

    from gpuscale.live.devices import device_env
    from gpuscale.ui.model import RunModel
    from gpuscale.ui.widgets.header import describe_run

    flag = tmp_path / "go"
    path = tmp_path / "run.ndjson"
    run = ScriptRun(
        [sys.executable, "-c", WAITER, str(flag)],
        record=path,
        start_timeout_s=3600.0,
        sample_interval_s=0.1,
        nvml=FakeNvml.scenario("no-gpus"),
        env={**os.environ, **device_env(2, None, {})},
    ).start()
    try:
        first = next(iter(run.events(timeout=60)))
    finally:
        flag.write_text("")
    list(run.events(timeout=120))
    assert isinstance(first, StartEvent) and first.provisional
    assert (first.num_replicas, first.platform) == (2, "cpu-logical")
    model = RunModel()
    model.absorb([first])
    assert "· 2x logical CPU ·" in describe_run(model.snapshot())
    recorded = [e for e in load_run(path).events if isinstance(e, StartEvent)]
    assert (recorded[0].num_replicas, recorded[0].platform) == (2, "cpu-logical")


def _gpuscale_run(options: list[str], code: str, data: Path, columns: int):
    """``gpuscale run OPTIONS --no-record -- python -c CODE`` in a child process."""
    import os
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "gpuscale", "run", *options, "--no-record", "--"]
        + [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "GPUSCALE_DATA_DIR": str(data), "COLUMNS": str(columns)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def test_run_prints_a_scripts_start_once(tmp_path):
    """`gpuscale run -- COMMAND` shows no samples: it keeps its telemetry with the
    script's events, so it prints the run's start once, not a provisional one first."""
    code = "import time; print('hi', flush=True); time.sleep(1.5)"
    done = _gpuscale_run([], code, tmp_path, 200)
    shown = done.stderr + done.stdout  # the progress on stderr, the report on stdout
    headers = [line for line in shown.splitlines() if " on 1 x CPU, strategy unknown" in line]
    assert len(headers) == 1, shown


def test_devices_asked_of_a_script_without_gpuscale_keras_is_said_not_applied(tmp_path):
    """`--devices 2` reaches a script through `import gpuscale.keras`: a script without
    it ran on what TensorFlow found, and the warning says --devices was not applied."""
    done = _gpuscale_run(["--devices", "2"], "print('hi')", tmp_path, 400)
    assert "--devices 2 was not applied either" in done.stderr, done.stderr
