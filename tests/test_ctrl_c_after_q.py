"""Ctrl-C pressed after ``q``, while the stop ``q`` began is still under way (a
user hurrying a slow stop), changes nothing: the stop, the report and the exit
status are ``q``'s (0), in ``recommend --watch`` and in ``watch`` alike. It made
the exit status 130. Ctrl-C first is still an interruption (130): see
tests/test_ui_sweep_live.py and tests/test_ui_app.py. Stand-in runs, no TensorFlow."""

from __future__ import annotations

import threading

from ui_fixtures import FakeLiveRun, cpu_run

from gpuscale.ui.app import build_app
from gpuscale.ui.sources import LiveSource
from gpuscale.ui.sweep_app import SweepApp
from tests.test_ui_sweep_live import StandInRun, _sweep


class SlowStop(StandInRun):
    """A count whose stop takes until ``release`` is set (TensorFlow finishing a step)."""

    release = threading.Event()
    stopping = threading.Event()

    def stop(self) -> None:
        self.stopping.set()
        self.release.wait(30)
        super().stop()


async def test_recommend_watch_ctrl_c_during_qs_stop_keeps_q():
    SlowStop.release.clear()
    SlowStop.stopping.clear()
    runner, runs = _sweep([1, 2, 4], hold_at=2, hold=12)
    made = runner.run_factory

    def factory(n, record):
        run = made(n, record)
        if n == 2:
            run = runs[2] = SlowStop(2, hold=12)
        return run

    runner.run_factory = factory
    app = SweepApp(runner.view, runner=runner)
    async with app.run_test(size=(80, 24)) as pilot:
        while 2 not in runs or not runs[2].started.is_set():
            await pilot.pause(0.01)
        await pilot.press("q")
        while not SlowStop.stopping.is_set():
            await pilot.pause(0.01)
        assert app.runner_active  # the stop is under way
        await pilot.press("ctrl+c")
        SlowStop.release.set()
        while not runner.finished.is_set():
            await pilot.pause(0.01)
        await pilot.pause()
    assert runs[2].stopped and 4 not in runs
    assert app.interrupted_by is None  # q's exit status: 0
    assert runner.view.measured_counts == [1]


class SlowStopRun(FakeLiveRun):
    release = threading.Event()
    stopping = threading.Event()

    def stop(self) -> None:
        self.stopping.set()
        self.release.wait(30)
        super().stop()


async def test_watch_ctrl_c_during_qs_stop_keeps_q():
    run = SlowStopRun(cpu_run()[:40], finish=False)  # still running
    app = build_app(LiveSource(run))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        await pilot.press("q")
        while not run.stopping.is_set():
            await pilot.pause(0.01)
        await pilot.press("ctrl+c")
        run.release.set()
        await pilot.pause(0.2)
    assert run.stop_calls == 1
    assert app.interrupted_by is None and app.return_value == 0
