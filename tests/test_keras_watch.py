"""`gpuscale watch -- COMMAND`'s pieces together: a ScriptRun feeding the dashboard
(Pilot), for a script without the callback (no TensorFlow needed)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

from gpuscale.events.schema import StartEvent, StepEvent
from gpuscale.live.script_run import ScriptRun
from gpuscale.ui.app import build_app
from gpuscale.ui.sources import LiveSource, QueueSource
from gpuscale.ui.widgets.advice import AdvicePanel
from gpuscale.ui.widgets.header import RunHeader
from gpuscale.ui.widgets.logpane import LogPane

README_SCRIPT = Path(__file__).parent / "scripts_keras" / "train_readme.py"


async def _until_the_end(app, pilot, run: ScriptRun) -> None:
    """Wait for the run's end to reach the dashboard: events, not a time (a loaded
    machine takes minutes to import TensorFlow); the bound only keeps a hang from
    lasting for ever."""
    deadline = time.monotonic() + 900
    while app.model.end is None and time.monotonic() < deadline:
        await pilot.pause(0.1)
        if run.done:  # its last events are queued: the pump takes them in at once
            await app.settle()
    await app.settle()


async def test_dashboard_shows_a_script_without_callback_and_how_to_add_it(tmp_path):
    script = "import time; print('epoch 1 done', flush=True); time.sleep(0.5)"
    run = ScriptRun(
        [sys.executable, "-c", script],
        record=tmp_path / "watch.ndjson",
        start_timeout_s=0.2,
        sampler=False,
    )
    source = LiveSource(run)
    app = build_app(source)
    async with app.run_test(size=(100, 30)) as pilot:
        await _until_the_end(app, pilot, run)
        assert app.model.end is not None and app.model.end.status == "completed"
        assert app.model.start.source == "script"
        log_text = "\n".join(str(line.text) for line in app.query_one(LogPane).lines)
        assert "epoch 1 done" in log_text
        assert "step times are unavailable" in log_text
        assert "callbacks=[gpuscale.keras.ScalingMonitor()]" in log_text
        assert "COMPLETED" in str(app.query_one(RunHeader).render())
        # the run lasted from the launch (gpuscale made its start up at the end, stamped
        # before the script was spawned): at least the script's 0.5 s sleep, however
        # late gpuscale's own start-up ended (tests/test_script_launch_time.py)
        assert app.model.end.duration_s >= 0.4
        assert app.model.snapshot(logs_after=2**62).elapsed_s >= 0.4
        advice = str(app.query_one(AdvicePanel).body.render())
        assert "No step times: the script does not use gpuscale's callback" in advice
        assert "Waiting for the first steps" not in advice
    source.stop()
    await asyncio.sleep(0)
    assert run.done and (tmp_path / "watch.ndjson").exists()


async def test_the_header_takes_the_callbacks_start_once_it_arrives():
    """A script's run is first shown with gpuscale's provisional start (the script's
    name, nothing known of strategy or batch); the callback's start replaces it."""
    source = QueueSource()
    app = build_app(source)
    t0 = 1_700_000_000.0
    common = {"gpuscale_version": "t", "host": "h", "pid": 1, "source": "script"}
    async with app.run_test(size=(120, 30)) as pilot:
        source.put(StartEvent(t=t0, model="train.py", strategy="unknown", **common))
        await pilot.pause(0.3)
        await app.settle()
        header = str(app.query_one(RunHeader).render())
        assert "train.py" in header and "batch unknown" in header
        source.put(
            StartEvent(
                t=t0 + 20,
                model="train.py",
                strategy="mirrored",
                cross_device_ops="collective",
                num_replicas=2,
                platform="cpu-logical",
                global_batch=64,
                per_replica_batch=32,
                **common,
            )
        )
        source.put(StepEvent(t=t0 + 21, step=0, step_time_s=0.1, samples=64))
        await pilot.pause(0.3)
        await app.settle()
        header = str(app.query_one(RunHeader).render())
        assert "mirrored (collective)" in header and "2x logical CPU" in header
        assert "batch 2x32=64" in header


@pytest.mark.tf
async def test_watch_a_script_with_the_callback_no_warning_and_a_full_header(tmp_path):
    """`gpuscale watch --devices 2 -- python train.py` as the dashboard sees it, with
    the start timeout passing long before TensorFlow is imported: the header ends with
    the callback's strategy, devices and batch, the log has the script's output and no
    missing-callback warning."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUSCALE_", "TF_CONFIG"))}
    env.update({"TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": "", "GPUSCALE_DEVICES": "2"})
    run = ScriptRun(
        [sys.executable, str(README_SCRIPT), "--verbose"],
        record=tmp_path / "watch.ndjson",
        start_timeout_s=0.1,
        sampler=False,
        env=env,
    )
    source = LiveSource(run)
    app = build_app(source)
    async with app.run_test(size=(120, 36)) as pilot:
        await _until_the_end(app, pilot, run)
        assert app.model.end is not None and app.model.end.status == "completed"
        header = str(app.query_one(RunHeader).render())
        assert "train_readme.py" in header and "mirrored" in header
        assert "2x logical CPU" in header and "batch 2x16=32" in header
        log_text = "\n".join(str(line.text) for line in app.query_one(LogPane).lines)
        assert "replicas: 2" in log_text and "6/6" in log_text  # Keras's bar, settled
        assert "\r" not in log_text and "\x1b" not in log_text
        assert "step times are unavailable" not in log_text
    source.stop()
