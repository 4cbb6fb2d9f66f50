"""A run the trainer refuses on its configuration before its first step
(``gpuscale run --model mymod:build`` whose ``build()`` returns an int, or
``--model os:path``: exit 2 after TensorFlow started) leaves no recording, as the
refusals gpuscale makes before starting the trainer leave none: it never ran, so
nothing is lost, and no ``failed`` leftover stops ``recommend --from
runs/*.ndjson`` later. A trainer that fails otherwise (exit 1) keeps its recording,
listed as failed. No TensorFlow: stand-in trainers."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

from fake_nvml import FakeNvml

from gpuscale.cli import main
from gpuscale.live.trainer_run import LiveRun, is_configuration_error
from gpuscale.trainer.options import TrainConfig

# Says it is loading TensorFlow, sends the trainer's error and failed end, exits as
# gpuscale.trainer.worker does for a GpuscaleError (2) or anything else (1).
FAILS = textwrap.dedent(
    f"""\
    #!{sys.executable}
    import sys, time
    sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
    from gpuscale.events.schema import EndEvent, ErrorEvent
    from gpuscale.events.transport import EventClient
    client = EventClient.from_env()
    print("fake trainer: loading TensorFlow", flush=True)
    time.sleep(0.3)
    client.send(ErrorEvent(t=time.time(), message=MESSAGE))
    client.send(EndEvent(t=time.time(), status="failed", duration_s=0.3))
    client.close()
    sys.exit(CODE)
    """
)


def _run(tmp_path: Path, code: int, message: str) -> LiveRun:
    fake = tmp_path / "python"
    fake.write_text(FAILS.replace("MESSAGE", repr(message)).replace("CODE", str(code)))
    fake.chmod(0o755)
    run = LiveRun(
        TrainConfig(model="mymod:build"),
        record="default",
        python=str(fake),
        nvml=FakeNvml.scenario("no-driver"),
        sample_interval_s=0.1,
    )
    run.start()
    deadline = time.monotonic() + 60
    while not run.done:
        assert time.monotonic() < deadline, "the stand-in never ended"
        run.drain()
        time.sleep(0.05)
    return run


def test_a_configuration_the_trainer_refuses_leaves_no_recording(
    tmp_path, _isolated_data_dir, capsys
):
    run = _run(tmp_path, 2, "--model mymod:build: build() returned 'int', not a Keras model")
    assert is_configuration_error(run) and run.end.status == "failed"
    assert run.recording_path is None
    runs = _isolated_data_dir / "runs"
    assert not runs.exists() or list(runs.iterdir()) == []
    assert main(["runs"]) == 0
    assert "No recordings" in capsys.readouterr().out


def test_a_trainer_that_fails_otherwise_keeps_its_recording_listed_failed(
    tmp_path, _isolated_data_dir, capsys
):
    run = _run(tmp_path, 1, "ResourceExhaustedError: out of memory")
    assert not is_configuration_error(run)
    path = run.recording_path
    assert path is not None and path.exists()
    assert main(["runs", "--json"]) == 0
    assert '"status": "failed"' in capsys.readouterr().out


def test_replay_says_a_run_that_failed_before_its_first_step_failed(
    tmp_path, _isolated_data_dir, capsys
):
    """Its summary said "stopped before it started: TensorFlow was still starting"."""
    run = _run(tmp_path, 1, "ResourceExhaustedError: out of memory")
    capsys.readouterr()
    assert main(["replay", str(run.recording_path)]) == 0  # off a terminal: the summary
    out = capsys.readouterr().out
    assert "  failed before its first step: nothing was measured" in out
    assert "stopped" not in out
