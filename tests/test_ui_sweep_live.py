"""`recommend --watch`'s live sweep (gpuscale.ui.live_sweep) in the scaling view,
with stand-in runs that replay synthetic events (no TensorFlow): the view fills in
count by count, and q stops the run in progress and keeps what was measured."""

from __future__ import annotations

import queue
import re
import sys
import threading

import pytest

from gpuscale.cli import main
from gpuscale.events.schema import EndEvent
from gpuscale.ui.live_sweep import LiveSweep
from gpuscale.ui.sweep_app import SweepApp, SweepView
from gpuscale.ui.synthetic import synthetic_run


class StandInRun:
    """The part of ``LiveRun`` a live sweep uses; ``config`` is the device count.
    With ``hold``, the run stops half-way (an int: after that many events) and
    waits for :meth:`stop`."""

    def __init__(self, devices: int, hold: bool | int = False) -> None:
        self.devices = devices
        self.hold = hold
        self.queue: queue.Queue = queue.Queue()
        self.error = None
        self.end = None
        self.recording_path = None
        self.stopped = False
        self.started = threading.Event()
        self._done = threading.Event()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def start(self) -> StandInRun:
        events = synthetic_run(gpus=self.devices, duration_s=12, seed=self.devices)
        if self.hold:
            events = events[: len(events) // 2 if self.hold is True else self.hold]
        self.count = len(events)
        for event in events:
            if isinstance(event, EndEvent):
                self.end = event
            self.queue.put(event)
        if not self.hold:
            self._finish()
        self.started.set()
        return self

    def _finish(self) -> None:
        self.queue.put(None)
        self._done.set()

    def stop(self) -> None:
        if self.done:
            return
        self.stopped = True
        self.end = EndEvent(t=1e9, status="stopped")
        self.queue.put(self.end)
        self._finish()

    def events(self, timeout=None):
        while True:
            try:
                event = self.queue.get(timeout=timeout)
            except queue.Empty:
                return
            if event is None:
                self.queue.put(None)
                return
            yield event


def _sweep(counts, hold_at=None, hold: bool | int = True):
    runs: dict[int, StandInRun] = {}

    def factory(config, record):
        runs[config] = StandInRun(config, hold=hold if config == hold_at else False)
        return runs[config]

    view = SweepView(
        points=[], heading="Sweep on stand-in GPUs", planned=list(counts), state="running"
    )
    return LiveSweep(
        view, list(counts), record=False, run_factory=factory, status_interval_s=0
    ), runs


async def test_live_sweep_fills_in_count_by_count_and_completes():
    runner, runs = _sweep([1, 2, 4])
    shown: list[list[int]] = []
    app = SweepApp(runner.view, runner=runner)
    original = app.show_sweep

    def spy(view):
        shown.append(view.measured_counts)
        original(view)

    app.show_sweep = spy
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.view.state == "complete"
        assert [1] in shown and [1, 2] in shown and shown[-1] == [1, 2, 4]
        assert app.recommendation is not None
        assert "COMPLETE" in str(app.header_panel.render())
        assert "Sweep stopped" not in str(app.advice_panel.body.render())
    assert sorted(runs) == [1, 2, 4] and not any(r.stopped for r in runs.values())


@pytest.mark.parametrize("key", ["q", "ctrl+c", "ctrl+q"])
async def test_q_stops_the_run_in_progress_and_recommends_from_what_was_measured(key):
    # the 2-device run held in its warm-up: nothing of it counted, so nothing kept
    runner, runs = _sweep([1, 2, 4], hold_at=2, hold=12)
    app = SweepApp(runner.view, runner=runner)
    async with app.run_test(size=(80, 24)) as pilot:
        while 2 not in runs or not runs[2].started.is_set():
            await pilot.pause(0.01)
        await pilot.pause()
        assert app.runner_active
        assert "2 devices" in str(app.header_panel.render())
        await pilot.press(key)
        # Wait for the sweep to end, an event: not for every worker to complete (the
        # app exits once the sweep ended, and may cancel a worker that has not yet
        # returned: seen under load).
        while not runner.finished.is_set():
            await pilot.pause(0.01)
        await pilot.pause()
    assert runs[2].stopped and 4 not in runs  # stopped cleanly; no further count started
    # Ctrl-C is an interruption: the command prints the report and exits 130; q, ctrl+q exit 0
    assert app.interrupted_by == ("Ctrl-C" if key == "ctrl+c" else None)
    assert runner.view.state == "stopped" and runner.view.measured_counts == [1]
    assert runner.view.state_line() == (
        "Sweep stopped after 1 of 3 counts: recommending from what was measured (1 device)"
    )


class _Config(int):
    """A device count that plans 300 steps, as a trainer configuration does."""

    steps = 300


async def _q_in_the_first_count(hold: bool | int):
    runner, runs = _sweep([1, 2], hold_at=1, hold=hold)
    runner.configs = [_Config(1), _Config(2)]
    app = SweepApp(runner.view, runner=runner)
    async with app.run_test(size=(80, 24)) as pilot:
        while 1 not in runs or not runs[1].started.is_set():
            await pilot.pause(0.01)
        await pilot.pause()
        await pilot.press("q")
        while not runner.finished.is_set():
            await pilot.pause(0.01)
        await pilot.pause()
    assert runs[1].stopped and 2 not in runs  # stopped cleanly; no other count began
    return runner


async def test_q_during_the_first_count_keeps_the_steps_it_counted():
    """q after the first count counted steps: they are kept, as a plain sweep's
    Ctrl-C keeps them and `recommend --from` reads them from its recording (it
    said "no count finished, so nothing to judge" and dropped them)."""
    runner = await _q_in_the_first_count(hold=True)  # half its events: 22 counted steps
    assert runner.view.measured_counts == [1]
    assert runner.kept_cut_short == (1, 22)
    assert runner.view.state == "stopped"
    assert runner.view.state_line() == (
        "Sweep stopped during the 1-device run, kept with the 22 steps it counted: "
        "recommending from what was measured (1 device)"
    )
    cut = runner.cut_short
    assert cut is not None
    assert re.fullmatch(r"the first count \(1 device, \d+ of 300 steps\)", cut), cut


async def test_q_during_the_first_counts_warm_up_says_how_far_it_got():
    """q before the first count counted a step (warm-up only): nothing is kept, the
    sweep says which count it cut short and how far (the command: nothing to
    judge), and the view does not claim to recommend "from what was measured
    (none devices)"."""
    runner = await _q_in_the_first_count(hold=12)  # its start and warm-up steps only
    assert runner.view.measured_counts == [] and runner.kept_cut_short is None
    cut = runner.cut_short
    assert cut is not None
    assert re.fullmatch(r"the first count \(1 device, \d+ of 300 steps\)", cut), cut
    assert runner.view.state_line() == (
        "Sweep stopped before a count was measured: nothing to recommend from"
    )


@pytest.mark.parametrize("one_process", [True, False])
def test_a_count_in_the_shared_process_builds_its_model_rather_than_start_tensorflow(
    one_process,
):
    """One TensorFlow process for every count: only the first starts TensorFlow;
    a process per count: each does."""
    runs: dict[int, StandInRun] = {}

    def factory(config, record):
        runs[config] = StandInRun(config)
        return runs[config]

    view = SweepView(points=[], heading="stand-in", planned=[1, 2], state="running")
    runner = LiveSweep(
        view,
        [1, 2],
        record=False,
        run_factory=factory,
        status_interval_s=0,
        one_process=one_process,
    )
    said: list[str] = []
    runner.run(lambda v: said.append(v.status_line or ""), lambda v: None)
    assert "1 device: starting TensorFlow" in said
    second = "2 devices: building the model" if one_process else "2 devices: starting TensorFlow"
    assert second in said
    assert ("2 devices: starting TensorFlow" in said) is not one_process


def test_watch_refuses_from_and_json(capsys):
    assert main(["recommend", "--watch", "--from", "x.json"]) == 2
    assert "gpuscale replay FILE FILE" in capsys.readouterr().err
    assert main(["recommend", "--watch", "--json"]) == 2
    assert "leave it out for --json" in capsys.readouterr().err


@pytest.mark.parametrize(("stopped_after", "stopped_by"), [(0, None), (1, None), (1, "Ctrl-C")])
def test_watch_command_prints_the_recommendation_from_what_was_measured(
    monkeypatch, capsys, stopped_after, stopped_by
):
    """The command around the screen: the report printed after the app closes says
    the sweep stopped and what the recommendation rests on."""
    import gpuscale.commands.recommend_live as live
    import gpuscale.ui.app as ui_app

    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setattr(live, "plan", lambda args: ([1, 2, 4], "Sweep on stand-in GPUs", None, 4))
    monkeypatch.setattr(live, "sweep_configs", lambda *a: ([1, 2, 4], []))
    monkeypatch.setattr(live, "shared_process", lambda *a, **k: None)  # stand-in runs
    made: list[LiveSweep] = []

    def fake_run(app):
        runner = app.runner
        made.append(runner)
        runner.run_factory = lambda config, record: StandInRun(config)
        runner.configs = runner.configs[:stopped_after]
        runner.view.planned = runner.view.planned[:stopped_after]
        runner.run(lambda v: None, lambda v: None)
        runner.view.planned = [1, 2, 4]
        runner.view.state = "stopped"
        return stopped_by  # what run_until_stop_signal says after the Ctrl-C key or q

    monkeypatch.setattr(ui_app, "run_until_stop_signal", fake_run)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)  # the screen: in a terminal
    code = main(["recommend", "--watch", "--no-chart"])
    captured = capsys.readouterr()
    if stopped_after == 0:  # q before any count: a note, exit 0 (Ctrl-C would be 130)
        assert code == 0
        assert "stopped before its first count began: nothing ran" in captured.err
    else:
        assert code == (130 if stopped_by else 0)  # Ctrl-C: the report, then 130
        assert (
            "Sweep stopped after 1 of 3 counts: recommending from what was measured" in captured.out
        )
        # One measured count has nothing to compare with: no verdict, and what to
        # measure next (issue 19's rule holds for a stopped sweep too).
        assert "Recommendation: NONE yet: measured at 1 device only" in captured.out
        assert "Measure 2 next" in captured.out


PIPED_WATCH = """
import sys
sys.path.insert(0, {tests!r})
import gpuscale.commands.recommend_live as live
from gpuscale.analysis.sweep import Sweep
from sweep_fixtures import gpu_points

def run_sweep(args, quiet=False):
    print("plain sweep ran", file=sys.stderr)
    return Sweep(points=gpu_points(), sources=["stand-in"], available_devices=8), "Stand-in sweep"

live.run_sweep = run_sweep
live.plan = lambda args: ([1, 2, 4, 8], "Stand-in sweep", None, 8)
from gpuscale.cli import main
sys.exit(main(["recommend", "--watch", "--no-chart"]))
"""


def test_watch_off_a_terminal_prints_the_text_result_and_ends():
    """Piped (CI, `| cat`), --watch is plain `recommend` with a note on stderr: no
    screen drawn for ever. The subprocess's stdout is a pipe; a hang fails here."""
    import subprocess
    from pathlib import Path

    tests = str(Path(__file__).resolve().parent)
    done = subprocess.run(
        [sys.executable, "-c", PIPED_WATCH.format(tests=tests)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    assert "plain sweep ran" in done.stderr
    assert "recommend --watch shows the sweep in a terminal; stdout is not one" in done.stderr
    assert "Recommendation:" in done.stdout and "\x1b[" not in done.stdout


async def _hold_at_two(app, runner, runs, pilot) -> None:
    """Wait until the 2-device run (held half-way) is in the view's model whole,
    then draw it now (charts included)."""
    while not (
        2 in runs
        and runs[2].started.is_set()
        and runner.model is not None
        and runner.model_devices == 2
        and runner.model.events_absorbed == runs[2].count
    ):
        await pilot.pause(0.01)
    await pilot.pause()
    # Draw now, until the layout has settled: the cards mount on the first pass
    # and the panels take their size after it (how many passes that takes
    # depends on timing, so a fixed two once left a chart drawn at a passing
    # height in a snapshot).
    for _ in range(50):
        app.follow_run(now=True)
        await pilot.pause()
        if app._run_chart_sizes() == app._run_sizes:
            break


async def test_watch_shows_the_run_in_progress_beside_the_scaling_view():
    """As `watch` does: the run's device cards, step-time chart and phases, live,
    with the dashboard's own widgets; the scaling view has the counts measured."""
    from gpuscale.ui.widgets.charts import BREAKDOWN_CHART, STEP_CHART
    from gpuscale.ui.widgets.devices import DeviceGrid

    runner, runs = _sweep([1, 2, 4], hold_at=2)
    app = SweepApp(runner.view, runner=runner)
    try:
        async with app.run_test(size=(200, 60)) as pilot:
            await _hold_at_two(app, runner, runs, pilot)
            grid = app.query_one(DeviceGrid)
            assert grid.display and grid.border_title == "Devices · run on 2 devices"
            titles = [card.border_title for card in grid.query(".card")]
            assert titles[0] == "host" and len(titles) == 3 and all("GPU" in t for t in titles[1:])
            steps = app.run_charts[STEP_CHART]
            phases = app.run_charts[BREAKDOWN_CHART]
            assert steps.border_title == "Step time (ms) · run on 2 devices"
            assert "step" in str(steps.render()) and "ms" in str(steps.render())
            assert "compute" in str(phases.render()) and "all-reduce" in str(phases.render())
            # beside them, the scaling view of what is measured so far
            for panel in (steps, phases, app.throughput_panel, app.phases_panel, app.advice_panel):
                assert panel.display and panel.region.height >= 10
            assert "devices (log2)" in str(app.throughput_panel.render())
            assert "1✓ 2…" in str(app.header_panel.render())
            runner.stop()
            await app.workers.wait_for_complete()
    finally:
        runner.stop()


async def test_watch_at_80x24_hides_panels_and_c_cycles_the_charts():
    """Small: the device cards condense to a line each, one chart at a time (c),
    nothing clipped."""
    from gpuscale.ui.widgets.charts import BREAKDOWN_CHART, STEP_CHART

    runner, runs = _sweep([1, 2, 4], hold_at=2)
    app = SweepApp(runner.view, runner=runner)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await _hold_at_two(app, runner, runs, pilot)
            assert app.device_grid.compact
            charts = [
                app.run_charts[STEP_CHART],
                app.run_charts[BREAKDOWN_CHART],
                app.throughput_panel,
                app.phases_panel,
            ]
            seen = []
            for _ in range(len(charts) + 1):
                shown = [c for c in charts if c.display and c.parent.display]
                assert len(shown) == 1 and shown[0].region.height >= 8
                seen.append(shown[0])
                await pilot.press("c")
                await pilot.pause()
            assert seen == [*charts, charts[0]]
            for line in app.device_grid.query(".card-body"):
                assert line.region.width >= 38  # a whole card line, not clipped
            runner.stop()
            await app.workers.wait_for_complete()
    finally:
        runner.stop()


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
def test_watch_snapshot_of_a_run_in_progress(snap_compare, size):
    runner, runs = _sweep([1, 2, 4], hold_at=2)
    app = SweepApp(runner.view, runner=runner)

    async def run_before(pilot):
        await _hold_at_two(app, runner, runs, pilot)

    try:
        assert snap_compare(app, terminal_size=size, run_before=run_before)
    finally:
        runner.stop()


def test_the_status_line_says_a_probe_longer_than_the_median_step_is_not_resolved():
    """The header said ``1301 ms/step | compute 1050 ms, all-reduce 619 ms`` (a probe
    longer than the step): it says such a probe is not resolved, as the chart does."""
    import msgspec

    from gpuscale.events.schema import PhaseEvent, StepEvent
    from gpuscale.ui.live_sweep import _status

    step = next(e for e in synthetic_run() if isinstance(e, StepEvent) and not e.warmup)
    probe = next(e for e in synthetic_run() if isinstance(e, PhaseEvent))
    line = _status(2, step, "", 60)
    median_s = step.step_time_s
    fits = msgspec.structs.replace(
        probe, compute_s=0.5 * median_s, allreduce_s=0.1 * median_s, apply_s=0.0, input_s=0.0
    )
    assert "compute" in _status(2, fits, line, 60, median_s)
    over = msgspec.structs.replace(fits, compute_s=1.5 * median_s)
    said = _status(2, over, line, 60, median_s)
    assert "not resolved" in said and "compute" not in said, said
    assert said.startswith(line.partition(" | ")[0])


def test_the_status_line_shows_the_median_step_its_phases_are_parts_of():
    """The header said ``step 78/200, 63 ms/step | compute 67 ms`` at 80x24: a
    recent step beside the phases of a probe checked against the median step
    (70.5 ms). It shows that median, and a compute pass no shorter than it is not
    resolved."""
    import msgspec

    from gpuscale.events.schema import PhaseEvent, StepEvent
    from gpuscale.ui.live_sweep import _status

    step = next(e for e in synthetic_run() if isinstance(e, StepEvent) and not e.warmup)
    probe = next(e for e in synthetic_run() if isinstance(e, PhaseEvent))
    recent = msgspec.structs.replace(step, step=77, step_time_s=0.063)
    line = _status(1, recent, "", 200, 0.0705)
    assert line == "1 device: step 78/200, median 70 ms/step", line
    fits = msgspec.structs.replace(
        probe, compute_s=0.067, allreduce_s=0.0, apply_s=0.003, input_s=0.0
    )
    line = _status(1, fits, line, 200, 0.0705)
    assert line.endswith("| compute 67 ms, all-reduce 0 ms, apply 3 ms"), line
    line = _status(1, msgspec.structs.replace(recent, step=78), line, 200, 0.0704)
    assert line.startswith("1 device: step 79/200, median 70 ms/step | compute 67 ms"), line
    fills = msgspec.structs.replace(fits, compute_s=0.071, apply_s=0.0)
    # one device: the pass is the step within its noise, never a number over it
    said = _status(1, fills, line, 200, 0.0705)
    assert said.endswith("| compute \u2248 the whole step"), said
    # several: compute alone filling the step leaves no exposed exchange to derive
    assert "not resolved" in _status(2, fills, line, 200, 0.0705)
