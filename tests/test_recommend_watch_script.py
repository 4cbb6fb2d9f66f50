"""`gpuscale recommend --watch -- python train.py`: the user's script swept inside
the scaling view, one run of it per count, as `recommend -- python train.py` runs
it without the screen (it was refused: "--watch sweeps the built-in trainer").
The script's failure is passed through as its own status, after the report from
the counts measured. No TensorFlow: the script is tests/fake_script.py, run as a
real one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gpuscale.cli import main
from gpuscale.commands import recommend_live
from gpuscale.commands.recommend_script import count_envs
from gpuscale.live.script_sweep import ScriptCounts
from gpuscale.ui.live_sweep import LiveSweep
from gpuscale.ui.sweep_app import SweepApp, SweepView

SCRIPT = Path(__file__).with_name("fake_script.py")
COMMAND = [sys.executable, str(SCRIPT)]
ARGV = ["recommend", "--watch", "--no-chart", "--no-record", "--", *COMMAND]


@pytest.fixture
def screen(monkeypatch):
    """The screen stood in for: the sweep runs to its end as the app's worker would
    run it; what it made is kept for the test to look at."""
    import gpuscale.ui.app as ui_app

    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr(recommend_live, "plan", lambda args: ([1, 2], "Sweep on CPU", None, 2))
    made: list[LiveSweep] = []

    def run_to_the_end(app):
        made.append(app.runner)
        app.runner.run(lambda v: None, lambda v: None)
        return None

    monkeypatch.setattr(ui_app, "run_until_stop_signal", run_to_the_end)
    return made


def _in_a_terminal(monkeypatch) -> None:
    """stdout a terminal (the screen is drawn only there): patched in the test
    itself, on the stdout capsys has put in place by then."""
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)


def test_the_scripts_sweep_runs_in_the_view_and_prints_the_recommendation(
    screen, monkeypatch, capsys
):
    _in_a_terminal(monkeypatch)
    code = main(ARGV)
    out, err = capsys.readouterr()
    assert code == 0, err
    assert screen, out + err
    (runner,) = screen
    assert isinstance(runner.script, ScriptCounts) and runner.script.command == COMMAND
    assert [p.devices for p in runner.view.points] == [1, 2]
    assert runner.view.state == "complete"
    # one workload (the script's runs settled together), judged as the plain sweep judges it
    assert len({p.config for p in runner.view.points}) == 1
    assert "one run per count" in out and "Recommendation: SINGLE device" in out
    assert "--watch sweeps the built-in trainer" not in err


@pytest.mark.parametrize(("status", "code"), [("3", 3), ("-9", 128 + 9)])
def test_a_later_count_failing_prints_the_report_then_the_scripts_status(
    screen, monkeypatch, capsys, status, code
):
    _in_a_terminal(monkeypatch)
    monkeypatch.setenv("FAKE_FAIL_AT", "2")
    monkeypatch.setenv("FAKE_FAIL_STATUS", status)
    assert main(ARGV) == code
    out, err = capsys.readouterr()
    assert "Recommendation: NONE yet: measured at 1 device only" in out
    (error,) = [line for line in err.splitlines() if line.startswith("gpuscale: error:")]
    assert error.startswith("gpuscale: error: the 2-device run failed: the script (")


def test_the_first_count_failing_is_one_line_with_the_scripts_status(screen, monkeypatch, capsys):
    _in_a_terminal(monkeypatch)
    monkeypatch.setenv("FAKE_FAIL_AT", "1")
    assert main(ARGV) == 3
    out, err = capsys.readouterr()
    assert out == ""
    assert "no recommendation: the 1-device run failed: the script (" in err
    assert err.rstrip().endswith("RuntimeError: out of memory")


def test_a_script_that_cannot_start_is_one_line_before_any_screen(screen, monkeypatch, capsys):
    _in_a_terminal(monkeypatch)
    assert main([*ARGV[:-2], "/no/such/interpreter", "train.py"]) == 2
    assert "cannot start /no/such/interpreter train.py" in capsys.readouterr().err
    assert screen == []


async def test_the_view_fills_in_the_scripts_counts():
    view = SweepView(points=[], heading="Sweep on CPU", planned=[1, 2], state="running")
    statuses: list[str] = []
    runner = LiveSweep(
        view,
        count_envs(None, None, [1, 2]),
        record=False,
        script=ScriptCounts(COMMAND),
        status_interval_s=0,
    )
    app = SweepApp(runner.view, runner=runner)
    original = app.update_status

    def spy(v):
        statuses.append(v.status_line or "")
        original(v)

    app.update_status = spy
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.view.state == "complete"
        assert app.view.measured_counts == [1, 2]
        assert app.recommendation is not None
    assert "1 device: starting the script" in statuses


def test_the_status_line_says_a_scripts_planned_total():
    """A script's fit says its total (format 1.8): the line counts out of it, as the
    trainer's counts do out of --steps."""
    from gpuscale.events.schema import StepEvent
    from gpuscale.ui.live_sweep import _status

    step = StepEvent(t=1.0, step=4, step_time_s=0.01, samples=64, total_steps=60)
    assert _status(2, step, "", None).startswith("2 devices: step 5/60, ")
    unplanned = StepEvent(t=1.0, step=4, step_time_s=0.01, samples=64)
    assert _status(2, unplanned, "", None).startswith("2 devices: step 5, ")
    assert _status(2, step, "", 300).startswith("2 devices: step 5/300, ")  # --steps


def test_a_count_whose_script_fails_after_its_steps_is_no_measurement(screen, monkeypatch, capsys):
    """It was kept as a point and the sweep went on (exit 0): the plain sweep fails it."""
    _in_a_terminal(monkeypatch)
    monkeypatch.setenv("FAKE_FAIL_LATE_AT", "2")
    assert main(ARGV) == 3
    out, err = capsys.readouterr()
    assert "Recommendation: NONE yet: measured at 1 device only" in out
    (error,) = [line for line in err.splitlines() if line.startswith("gpuscale: error:")]
    assert error.startswith("gpuscale: error: the 2-device run failed: the script (")
    assert error.endswith("exited with status 3")


class _Held:
    """A count's run that is in progress until stopped, noting how it was stopped."""

    interrupt_grace_s = 10.0

    def __init__(self) -> None:
        self.how: list[str] = []
        self.done = False

    def stop(self) -> None:
        self.how.append("stop")
        self.done = True

    def interrupt(self) -> None:
        self.how.append("interrupt")
        self.done = True


def test_q_gives_the_script_in_progress_ctrl_c_first_and_a_signal_stops_it():
    """q (and Ctrl-C) stopped the script with SIGTERM at once: its own `except
    KeyboardInterrupt` (a checkpoint) never ran, unlike under watch -- script."""
    view = SweepView(points=[], heading="h", planned=[1], state="running")
    for by_hand, expected in ((True, ["interrupt"]), (False, ["stop"])):
        runner = LiveSweep(view, [{}], record=False, script=ScriptCounts(COMMAND))
        held = _Held()
        runner._current = held
        assert runner.interrupt_grace_s == 10.0
        (runner.interrupt if by_hand else runner.stop)()
        assert held.how == expected and runner.stop_requested.is_set()


def test_a_step_past_its_plan_is_no_31_of_30():
    from gpuscale.events.schema import StepEvent
    from gpuscale.formatting import step_of
    from gpuscale.ui.live_sweep import _status

    assert step_of(31, 30) == "31/31" and step_of(21, 60) == "21/60" and step_of(5, None) == "5"
    over = StepEvent(t=1.0, step=30, step_time_s=0.01, samples=64, total_steps=30)
    assert _status(1, over, "", None).startswith("1 device: step 31/31, ")
