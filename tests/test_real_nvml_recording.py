"""Recordings made on a real NVIDIA H100 (benchmarks/gpu/check.sh, 2026-11-26) and H200 (2026-11-27):
`gpuscale run --record ... -- python benchmarks/gpu/load.py`, a PyTorch load in
phases (idle, bf16 matrix products, device copies, host-to-device copies) without
gpuscale's callback. Real NVML samples, GPM included, read back by every view."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpuscale.analysis.summary import summarize
from gpuscale.recording.reader import load_run
from gpuscale.ui.app import build_app
from gpuscale.ui.sources import ReplaySource
from gpuscale.ui.widgets.advice import AdvicePanel
from gpuscale.ui.widgets.header import RunHeader

ROOT = Path(__file__).resolve().parent.parent
H100 = ROOT / "tests" / "fixtures" / "h100_load.ndjson"
H200 = ROOT / "tests" / "fixtures" / "h200_load.ndjson"
"""The same load on an NVIDIA H200 (benchmarks/gpu/check.sh, 2026-11-27, driver 580.159.04)."""


@pytest.mark.parametrize("recording", [H100, H200], ids=["h100", "h200"])
def test_the_real_samples_pass_the_device_checks(recording):
    """benchmarks/gpu/telemetry.py's checks, phase by phase, on the real samples:
    busy is not working (copies 100% busy with no tensor work, host copies with
    the SMs idle), GPM tensor activity under matrix products, PCIe rx, own memory."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu" / "telemetry.py"), str(recording)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == "real NVML: 8 of 8 checks passed (0 n/a)"


def test_the_summary_of_a_real_gpu_script_run():
    run = load_run(H100)
    assert run.start.devices[0].name == "NVIDIA H100 80GB HBM3"
    assert (run.start.devices[0].pcie_gen, run.start.devices[0].pcie_width) == (5, 16)
    s = summarize(run.events)
    assert s.platform == "gpu" and s.no_step_times and s.steps_total == 0
    # a third of the samples idle, the rest busy; the SMs work in two phases of three
    assert 50 < s.gpu_util_mean_pct < 60
    assert 30 < s.gpu_sm_activity_mean_pct < 40
    assert 12 < s.gpu_tensor_activity_mean_pct < 22
    assert s.gpu_util_median_pct == 98.0  # the median sample, not the time average
    assert 30 < run.end.duration_s < 35  # from the launch, not from the end


def test_the_h200_recording_reads_as_the_same_load_on_its_own_gpu():
    """The other Hopper card: 141 GB (150.8 GB decimal) of HBM3e, the same load's shares."""
    run = load_run(H200)
    device = run.start.devices[0]
    assert device.name == "NVIDIA H200" and device.memory_total_bytes == 150_754_820_096
    assert (device.pcie_gen, device.pcie_width) == (5, 16)
    s = summarize(run.events)
    assert s.platform == "gpu" and s.no_step_times
    assert 50 < s.gpu_util_mean_pct < 60
    assert 30 < s.gpu_sm_activity_mean_pct < 40
    assert 12 < s.gpu_tensor_activity_mean_pct < 22
    assert 30 < run.end.duration_s < 35


def test_replay_prints_its_duration_and_what_the_gpu_did():
    done = subprocess.run(
        [sys.executable, "-m", "gpuscale", "replay", str(H100)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("load.py on 1 x NVIDIA H100 80GB HBM3: strategy unknown")
    assert "status: completed in 31.8 s, 0 steps" in done.stdout
    # no step times: the whole recording, its start-up included, and it says so
    assert (
        "GPUs: busy 55% · working SM 36%, tensor 17% (GPM): time averages over the whole "
        "run (31.5 s sampled, start-up included)"
    ) in done.stdout


async def test_the_dashboard_replays_it_with_its_samples_and_no_waiting():
    app = build_app(ReplaySource(H100, end=True))
    async with app.run_test(size=(120, 36)) as pilot:
        await app.settle()
        await pilot.pause()
        header = str(app.query_one(RunHeader).render())
        assert "load.py · strategy unknown · 1x GPU · batch unknown" in header
        assert "replay 0:31/0:31 1x · no step times" in header  # one clock: the replay's
        advice = str(app.query_one(AdvicePanel).body.render())
        assert "busy 55% · working SM 36%" in advice
        assert "over the whole run (31.5 s sampled, start-up included)" in " ".join(advice.split())
        assert "No step times" in advice and "Waiting" not in advice
        screen = app.export_screenshot().replace("&#160;", " ")  # the SVG's spaces
        assert "Utilization (%)" in screen and "s since start" in screen  # the chart
        assert "utilization appears after the first samples" not in screen
        # the run ended without step times: the step and phase charts say so, never
        # that step times will appear
        assert "after the first steps" not in screen and "after the first probe" not in screen
        assert screen.count("no step times in this run (telemetry") == 2  # wraps at 120x36
        assert "GPM" in screen  # the GPU's card


def test_a_recording_by_0_1_0_with_its_made_up_start_at_the_end_reads_from_the_launch(
    tmp_path,
):
    """gpuscale 0.1.0 stamped the start it made up for a script without the callback
    when it made it, at the run's end: such a recording read as lasting 0.2 ms. The
    reader takes the run as begun at the launch (its provisional start)."""
    import json

    lines = H100.read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if json.loads(line)["kind"] == "start"]
    assert len(starts) == 2  # gpuscale's provisional one, then the one made up
    end_t = json.loads(lines[-1])["t"]
    made_up = json.loads(lines[starts[1]])
    made_up["t"] = end_t - 0.0002  # as 0.1.0 wrote it
    lines[starts[1]] = json.dumps(made_up)
    old = tmp_path / "old.ndjson"
    old.write_text("\n".join(lines) + "\n")
    run = load_run(old)
    assert run.start.t == json.loads(lines[starts[0]])["t"]
    done = subprocess.run(
        [sys.executable, "-m", "gpuscale", "replay", str(old)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "status: completed in 3" in done.stdout, done.stdout  # 31.8 s, not 0.2 ms


async def test_the_callback_hint_keeps_its_code_whole_at_80x24():
    """A script run without the callback: at 80x24 the summary pane (30 columns)
    once broke ``callbacks=[gpuscale.keras.Scal`` / ``ingMonitor()]``."""
    app = build_app(ReplaySource(H100, end=True))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        await pilot.pause()
        screen = app.export_screenshot().replace("&#160;", " ")  # the SVG's spaces
        # the SVG has one text run per line (and style): a word broken across
        # lines shows as a run ending, or starting, inside it
        runs = re.findall(r">([^<>]*)</text>", screen)
        pieces = [r.strip() for r in runs if "Monitor" in r or "Scal" in r]
        assert any("callbacks=[ScalingMonitor()]" in r for r in pieces), pieces
        # every piece of the name is the whole name (no "...keras.Scal" / "ingMonitor()]")
        assert all(
            r.count("Scal") == r.count("ScalingMonitor") == r.count("Monitor") for r in pieces
        ), pieces


async def test_playing_it_says_telemetry_without_step_times_not_waiting():
    """Playing (not --end): the GPU's samples stream from the launch, under gpuscale's
    provisional start, while the script's own start comes only at the end. The header
    and the panel said "step 0" and "Waiting for the first steps…" beside a busy GPU
    card: they say what is true then, telemetry and no step times yet."""
    from ui_fixtures import FakeClock

    clock = FakeClock()
    source = ReplaySource(H100, clock=clock)
    app = build_app(source)
    async with app.run_test(size=(120, 36)) as pilot:
        clock.now += 15.0  # mid-run: the matrix products, the GPU busy
        await app.settle()
        await pilot.pause()
        assert app.model.start.provisional and app.model.end is None
        header = str(app.query_one(RunHeader).render())
        assert "RUNNING  replay 0:15/0:31 1x · no step times yet" in header, header
        assert "step 0" not in header
        advice = str(app.query_one(AdvicePanel).body.render())
        assert "Waiting for the first steps" not in advice
        assert (
            "Telemetry from 1 GPU, no step times yet: waiting for the script's start "
            "from gpuscale's callback" in " ".join(advice.split())
        ), advice
        clock.now += 60.0  # the made-up start, then the end: none will come
        await app.settle()
        await pilot.pause()
        header = str(app.query_one(RunHeader).render())
        assert "COMPLETED  replay 0:31/0:31 1x · no step times" in header, header
        advice = str(app.query_one(AdvicePanel).body.render())
        assert "No step times" in advice and "yet" not in advice
