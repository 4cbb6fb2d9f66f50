"""A run stopped before its trainer's start event (Ctrl-C while TensorFlow loads)
is recorded as what was asked (model, strategy, devices), says it stopped before
it started, and has nothing after its end event, in the file or in time. No
TensorFlow: a stand-in trainer that never gets past loading."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

from fake_nvml import FakeNvml

from gpuscale.cli import main
from gpuscale.events.schema import EndEvent, LogEvent
from gpuscale.live.trainer_run import LiveRun
from gpuscale.recording.reader import load_run
from gpuscale.trainer.options import TrainConfig

# Connects, says it is loading, and on SIGTERM sends its own end, then takes a
# second to exit (as TensorFlow does): telemetry of that second is not the run's.
STILL_LOADING = textwrap.dedent(
    f"""\
    #!{sys.executable}
    import os, signal, sys, time
    sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
    from gpuscale.events.schema import EndEvent
    from gpuscale.events.transport import EventClient
    client = EventClient.from_env()
    began = time.time()
    def stop(signum, frame):
        client.send(EndEvent(t=time.time(), status="stopped", duration_s=time.time() - began))
        client.close()
        time.sleep(1.0)
        sys.exit(0)
    signal.signal(signal.SIGTERM, stop)
    print("fake trainer: loading TensorFlow", flush=True)
    while True:
        time.sleep(0.05)
    """
)


def test_a_run_stopped_while_loading_is_recorded_as_asked(tmp_path, _isolated_data_dir, capsys):
    fake = tmp_path / "python"
    fake.write_text(STILL_LOADING)
    fake.chmod(0o755)
    run = LiveRun(
        TrainConfig(),  # devices not given: 2 CPU logical devices on a machine without a GPU, "the default"
        record="default",
        python=str(fake),
        nvml=FakeNvml.scenario("no-driver"),
        sample_interval_s=0.1,
    )
    run.start()
    deadline = time.monotonic() + 30
    while not any(
        isinstance(e, LogEvent) and "loading" in e.message for e in run.drain()
    ):  # wait until the trainer is "loading TensorFlow"
        assert time.monotonic() < deadline, "the stand-in never started"
        time.sleep(0.05)
    run.stop()
    path = run.recording_path
    assert path is not None and path.name.endswith("_mnist-cnn_2xcpu.ndjson"), path
    loaded = load_run(path)
    start = loaded.start
    assert start.provisional and start.num_replicas == 2 and start.platform == "cpu-logical"
    assert start.strategy == "mirrored" and start.model == "mnist-cnn"
    end = loaded.events[-1]
    assert isinstance(end, EndEvent) and end.status == "stopped"
    assert all(e.t <= end.t for e in loaded.events[1:-1]), "an event after the end, in time"

    assert main(["replay", str(path)]) == 0
    out = capsys.readouterr().out
    assert "mnist-cnn on 2 x CPU logical devices (the default): mirrored" in out
    assert "stopped before it started" in out and "weak scaling (0" not in out
    assert main(["runs", "--json"]) == 0
    assert '"devices": 2' in capsys.readouterr().out
