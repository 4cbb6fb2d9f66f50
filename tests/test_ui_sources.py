"""Replay and live sources: timing, transport controls, damaged files (no Textual)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from ui_fixtures import FakeClock, FakeLiveRun, cpu_run, replay

from gpuscale.errors import GpuscaleError
from gpuscale.events.schema import EndEvent, StartEvent, StepEvent
from gpuscale.ui.model import RunModel
from gpuscale.ui.sources import LiveSource, ReplaySource
from gpuscale.ui.synthetic import write_run


def drain(source, model: RunModel | None = None) -> list:
    got = []
    while (batch := source.read(0.0)) is not None:
        if batch.reset:
            got.clear()
            if model is not None:
                model.reset()
        got.extend(batch.events)
        if model is not None:
            model.absorb(batch.events)
    return got


def test_replay_releases_events_as_the_clock_advances():
    events = cpu_run()
    clock = FakeClock()
    source = replay(events, clock=clock)
    first = drain(source)
    assert isinstance(first[0], StartEvent)
    assert all(e.t - events[0].t <= 0 for e in first)
    clock.now += 5.0
    more = drain(source)
    assert more and all(0 < e.t - events[0].t <= 5.0 for e in more)
    assert not source.finished
    clock.now += 1000
    rest = drain(source)
    assert isinstance(rest[-1], EndEvent)
    assert len(first) + len(more) + len(rest) == len(events)
    assert source.finished


def test_speed_pause_seek_and_end():
    events = cpu_run()
    clock = FakeClock()
    source = replay(events, clock=clock, speed=1.0)
    assert source.change_speed(+1) == 2.0
    clock.now += 2.0
    assert source.position_s == pytest.approx(4.0)
    assert source.toggle_pause() is True
    clock.now += 50.0
    assert source.position_s == pytest.approx(4.0)  # paused: the clock does not count
    source.seek(10.0)
    assert source.position_s == pytest.approx(14.0)
    assert source.change_speed(-1) == 1.0
    assert source.change_speed(-1) == 0.5
    source.jump_to_end()
    status = source.replay_status()
    assert status.position_s == pytest.approx(source.duration_s) and status.paused
    drain(source)
    assert source.replay_status().at_end


def test_seeking_back_rebuilds_the_model_from_the_start():
    events = cpu_run()
    clock = FakeClock()
    source = replay(events, clock=clock, end=True)
    model = RunModel()
    drain(source, model)
    steps_at_end = model.last_step
    source.seek(-20.0)
    got = drain(source, model)
    assert isinstance(got[0], StartEvent), "a backwards seek restarts from the start event"
    assert 0 < model.last_step < steps_at_end
    assert model.end is None


def test_end_flag_shows_the_final_state_at_once():
    events = cpu_run()
    source = replay(events, end=True)
    got = drain(source)
    assert len(got) == len(events) and source.finished


def test_bad_speed_is_a_clear_error():
    with pytest.raises(GpuscaleError, match="--speed"):
        replay(cpu_run(), speed=0)


def test_truncated_last_line_is_a_warning_not_an_error(tmp_path):
    path = write_run(tmp_path / "cut.ndjson", cpu_run())
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 25])  # the crash case: the last line is cut
    source = ReplaySource(path)
    text = " ".join(source.info.warnings)
    assert "truncat" in text or "cut" in text
    assert source.info.warnings


def test_unusable_files_raise_gpuscale_error(tmp_path):
    garbage = tmp_path / "garbage.ndjson"
    garbage.write_bytes(b"\x00\x01binary\xff\n")
    with pytest.raises(GpuscaleError) as info:
        ReplaySource(garbage)
    assert info.value.exit_code == 2
    with pytest.raises(GpuscaleError):
        ReplaySource(tmp_path / "missing.ndjson")


def test_live_source_reads_until_the_end_marker_and_stops_once():
    events = cpu_run()
    run = FakeLiveRun(events)
    source = LiveSource(run)
    source.start()
    assert run.started and source.info.label == "/runs/fake.ndjson"
    got = drain(source)
    assert got == events
    assert source.read(0.0) is None and source.finished
    source.stop()
    source.stop()
    assert run.stop_calls == 1


def test_model_absorbs_a_run():
    model = RunModel()
    events = cpu_run()
    model.absorb(events)
    snap = model.snapshot()
    last_step = max(e.step for e in events if isinstance(e, StepEvent))
    assert snap.last_step == last_step
    assert snap.steps_done == last_step + 1  # numbered from 0, as the format says
    assert snap.elapsed_s == pytest.approx(events[-1].t - events[0].t)
    assert [d.kind for d in snap.devices] == ["cpu-logical", "cpu-logical"]
    assert snap.end is not None and snap.host is not None
    version, summary = model.summary()
    assert summary.steps_total == last_step + 1 == snap.end.steps and summary.phase_steps > 0


def test_replay_command_never_imports_tensorflow(tmp_path):
    path = write_run(tmp_path / "run.ndjson", cpu_run())
    script = f"""
import asyncio, sys
from gpuscale.ui import app as appmod

def headless_run(self, *args, **kwargs):
    async def go():
        async with self.run_test(size=(80, 24)) as pilot:
            await self.settle()
            await pilot.press("q")
    asyncio.run(go())

appmod.GpuscaleApp.run = headless_run
sys.stdout.isatty = lambda: True  # as in a terminal: the dashboard, not the printed summary
from gpuscale.cli import main
rc = main(["replay", {str(path)!r}, "--end"])
assert "tensorflow" not in sys.modules, "replay imported TensorFlow"
print("rc", rc)
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "rc 0" in out.stdout


def test_replay_command_exit_2_for_unreadable_files(tmp_path, capsys):
    from gpuscale.cli import main

    bad = tmp_path / "bad.ndjson"
    bad.write_text("this is not a recording\n")
    assert main(["replay", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpuscale: error: ") and "Traceback" not in err
    assert main(["replay", str(tmp_path / "nope.ndjson")]) == 2
    assert main(["replay", str(tmp_path)]) == 2
    assert main(["replay", str(bad), "--speed", "-1"]) == 2


def test_replay_of_a_damaged_sweep_file_says_what_recommend_from_says(tmp_path, capsys):
    """A sweep file replay cannot read is said in recommend --from's words (trial 8:
    the same damage, the same line), not as a recording's fault."""
    from gpuscale.cli import main

    sweep = tmp_path / "sweep.json"
    sweep.write_text('{\n  "points": [{"devices": 1, "step_time_s": 0.5}]\n}\n')
    assert main(["replay", str(sweep)]) == 2
    err = capsys.readouterr().err
    assert main(["recommend", "--from", str(sweep)]) == 2
    assert err == capsys.readouterr().err
    assert err == f'gpuscale: error: {sweep}: points[0] needs scaling ("strong" or "weak")\n'


def test_replay_off_a_terminal_prints_the_summary_and_exits(tmp_path):
    """Piped or redirected, a dashboard would write escape codes for ever: the
    recording's summary instead, and exit 0; a killed run says it was interrupted."""
    path = write_run(tmp_path / "run.ndjson", [e for e in cpu_run() if not isinstance(e, EndEvent)])
    out = subprocess.run(
        [sys.executable, "-m", "gpuscale", "replay", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stderr
    assert "status: interrupted (no end event)" in out.stdout and "step time:" in out.stdout
    assert "\x1b" not in out.stdout
    assert "stdout is not" in out.stderr and "terminal" in out.stderr


def test_replay_off_a_terminal_warns_as_recommend_from_does(tmp_path, capsys):
    """A file cut mid-line and without its end event: piped replay says on stderr,
    one ``gpuscale: warning:`` line each, what ``recommend --from`` says of it."""
    from gpuscale.cli import main

    path = write_run(tmp_path / "cut.ndjson", cpu_run())
    data = path.read_bytes()
    last_line = data.rstrip(b"\n").rindex(b"\n") + 1  # the end event's line
    path.write_bytes(data[: last_line + 20])  # killed while writing it
    assert main(["replay", str(path)]) == 0
    replay_err = capsys.readouterr().err
    replay_warnings = [x for x in replay_err.splitlines() if x.startswith("gpuscale: warning:")]
    assert any("cut off" in x for x in replay_warnings)
    assert any("no end event" in x for x in replay_warnings)
    main(["recommend", "--from", str(path)])
    recommend_err = capsys.readouterr().err
    recommend_warnings = [
        x for x in recommend_err.splitlines() if x.startswith("gpuscale: warning:")
    ]
    assert replay_warnings == recommend_warnings


def test_run_with_nothing_after_the_double_dash_is_an_error(capsys):
    from gpuscale.cli import main

    for command in ("run", "watch"):
        assert main([command, "--"]) == 2
        err = capsys.readouterr().err
        assert "nothing after '--'" in err and "\n" not in err.strip()
