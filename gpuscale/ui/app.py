"""The dashboard: one Textual app for live runs and replays.

Data flow: a background thread reads the :class:`~gpuscale.ui.sources.EventSource`
and folds events into a :class:`~gpuscale.ui.model.RunModel`; a timer redraws
the screen from the model at most ``refresh_hz`` times a second, whatever the
event rate; charts and the analysis are computed in another thread at most
every ``chart_interval_s`` and arrive as coalescing messages. The app never
asks where events come from beyond ``source.replay_status()`` (the transport
keys) and ``source.interrupt()`` / ``source.stop()`` (quit by hand / on SIGTERM, SIGHUP).
"""

from __future__ import annotations

import os
import threading
import time
from datetime import datetime
from pathlib import Path

from textual import work
from textual.actions import SkipAction
from textual.app import App, ComposeResult, SystemCommand
from textual.containers import Horizontal
from textual.screen import Screen
from textual.worker import get_current_worker

from gpuscale.analysis.script_runs import before_own_start, steps_elsewhere
from gpuscale.analysis.summary import RunSummary
from gpuscale.errors import EXIT_INTERRUPTED
from gpuscale.events.schema import EndEvent, ErrorEvent
from gpuscale.formatting import format_duration_s, plural
from gpuscale.live.base import passed_on_note
from gpuscale.recording.store import screenshots_dir
from gpuscale.ui import keys
from gpuscale.ui.messages import (
    RUN_ENDED_TOAST_S,
    AdviceReady,
    ChartsReady,
    ChartTexts,
    RunFailed,
    RunFinished,
    make_room_for_toast,
)
from gpuscale.ui.model import RunModel, Snapshot
from gpuscale.ui.sources import EventSource, ReplaySource, ReplayStatus
from gpuscale.ui.widgets.advice import AdvicePanel, predict_from_run
from gpuscale.ui.widgets.charts import (
    BREAKDOWN_CHART,
    STEP_CHART,
    UTIL_CHART,
    ChartPanel,
    render_charts,
)
from gpuscale.ui.widgets.devices import DeviceGrid
from gpuscale.ui.widgets.footer import StableFooter
from gpuscale.ui.widgets.header import RunHeader
from gpuscale.ui.widgets.logpane import LogPane
from gpuscale.ui.widgets.screens import ErrorScreen, HelpScreen

CHART_IDS = (STEP_CHART, BREAKDOWN_CHART, UTIL_CHART)


def rows_beside_cards(width: int, height: int) -> int:
    """The rows the dashboard needs besides full device cards (app.tcss), else they
    condense: the header (2), the grid's border (1), a chart with four rows of plot
    (10), the log (5; 8 from 36 rows), the footer (1) and, 120 columns wide or more,
    the recommendation's row under the charts (at most 6 rows; 9 from 36 rows). That
    row was not counted: at 120x30 the step-time chart kept one row of plot."""
    tall = height >= 36
    rows = 2 + 1 + 10 + (8 if tall else 5) + 1
    if width >= 120:
        rows += 9 if tall else 6
    return rows


READ_TIMEOUT_S = 0.05


class GpuscaleApp(App[int]):
    """The dashboard. Build it with :func:`build_app`."""

    CSS_PATH = ["run_panels.tcss", "app.tcss"]
    TITLE = "gpuscale"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]
    BINDINGS = keys.bindings()  # every key: gpuscale/ui/keys.py
    REPLAY_ONLY = keys.actions("replay")
    LIVE_ONLY = keys.actions("live")

    def __init__(
        self,
        source: EventSource,
        *,
        refresh_hz: float = 10.0,
        chart_interval_s: float = 0.5,
        screenshot_dir: Path | None = None,
    ) -> None:
        super().__init__()
        self.source = source
        self.model = RunModel()
        self.refresh_hz = refresh_hz
        self.chart_interval_s = chart_interval_s
        self.screenshot_dir = screenshot_dir
        self.display_paused = False
        self._held: list[object] = []
        """What arrived while the display was frozen (``p``): charts, the analysis, the
        run's end or failure and their notices, shown when it thaws, in order."""
        self.frames = 0
        self.frame_time_total_s = 0.0
        self._pump_lock = threading.Lock()
        self._drawn_version = -1
        self._charted_version = -1
        self._last_chart_build = 0.0
        self._finished_posted = False
        self._failed: RunFailed | None = None
        self._error_shown = False
        self._chart_index = 0
        self._charted_sizes: dict[str, tuple[int, int]] = {}
        self._summary = None
        self._summary_version = -1
        self._quitting = False
        self.interrupted_by: str | None = None  # "Ctrl-C" when that key stopped a live run
        self.stop_signal: str | None = None
        """The stop signal that quits the app (``SIGTERM``...; :func:`run_until_stop_signal`):
        a live run is then stopped as that signal asks, not by hand."""
        self._last_snap: Snapshot | None = None
        self._drawn_replay: ReplayStatus | None = None
        for warning in source.info.warnings:
            self.model.add_notice(warning)

    @property
    def is_replay(self) -> bool:
        return isinstance(self.source, ReplaySource)

    def _on_notify(self, event) -> None:  # Textual's handler for notify()
        """One toast of a kind, two at most (:func:`make_room_for_toast`)."""
        make_room_for_toast(self, event.notification.title, event.notification.message)
        super()._on_notify(event)

    # -- layout ------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        # Kept as attributes: a modal screen (help, error) may be on top while
        # the dashboard underneath keeps being drawn.
        self.header_panel = RunHeader(id="header")
        self.device_grid = DeviceGrid(id="devices", rows_left=rows_beside_cards)
        self.charts = {chart_id: ChartPanel(chart_id) for chart_id in CHART_IDS}
        self.advice_panel = AdvicePanel(id="advice")
        self.log_pane = LogPane(id="log")
        yield self.header_panel
        yield self.device_grid
        with Horizontal(id="middle"):
            with Horizontal(id="charts"):
                yield from self.charts.values()
            yield self.advice_panel
        yield self.log_pane
        yield StableFooter(compact=True, show_command_palette=False)  # ctrl+p: in ? help

    def on_mount(self) -> None:
        self._show_chart(0)
        self.redraw(force=True)
        self.pump()
        self.set_interval(1 / self.refresh_hz, self.tick, name="redraw")

    # -- background: source -> model ---------------------------------------------
    @work(thread=True, exclusive=True, group="pump", exit_on_error=False)
    def pump(self) -> None:
        """Read the source and fold its events into the model (own thread)."""
        worker = get_current_worker()
        try:
            self.source.start()
        except Exception as exc:  # a live run that cannot start: show why, stay open
            message = str(exc) or type(exc).__name__
            # the model too: the header said STARTING and the host card waited for a
            # first sample for ever beside the error (the run ended here, failed)
            now = time.time()
            self.model.absorb(
                [
                    ErrorEvent(t=now, message=message, source="gpuscale"),
                    EndEvent(t=now, status="failed"),
                ]
            )
            self.post_message(RunFailed(message))
            return
        while not worker.is_cancelled and not self._quitting:
            try:
                self.pump_once(READ_TIMEOUT_S)
            except Exception as exc:  # the stream broke: say so, keep what we have
                self.post_message(RunFailed(f"the event stream failed: {exc}"))
                return
            if self._finished_posted and not self.is_replay:
                return  # a live run that ended sends nothing more: stop polling it
            # Give the GIL away once: pump_once's lock, released above, is otherwise taken
            # again at once for the next waiting read, and settle() (tests, snapshots, the
            # benchmark) waited through one read after another for it (0.15 s a call).
            time.sleep(0)

    def pump_once(self, timeout_s: float = 0.0) -> int:
        """Move one batch from the source into the model; returns events moved."""
        with self._pump_lock:
            batch = self.source.read(timeout_s)
            if batch is not None:
                if batch.reset:
                    self.model.reset()
                    self._finished_posted = False
                self.model.absorb(batch.events)
            if self.source.finished and not self._finished_posted:
                self._finished_posted = True
                self.post_message(RunFinished(self.model.end))
        return len(batch.events) if batch is not None else 0

    # -- foreground: model -> screen ---------------------------------------------
    def tick(self) -> None:
        """The redraw timer: draw if anything changed, and start chart builds."""
        if self.display_paused:
            return
        if self.model.version != self._drawn_version:
            self.redraw()
        elif self.is_replay and self.source.replay_status() != self._drawn_replay:
            self._draw_header(None)  # the replay clock moved (an idle one draws nothing)
        now = time.monotonic()
        sizes = self._chart_sizes()
        if (
            self._charted_version != self.model.version or sizes != self._charted_sizes
        ) and now - self._last_chart_build >= self.chart_interval_s:
            self._last_chart_build = now
            self.build_charts(sizes)

    def redraw(self, force: bool = False) -> None:
        """Draw every panel from a fresh snapshot of the model (not while the
        display is frozen with p)."""
        if self.display_paused:
            return
        started = time.perf_counter()
        log = self.log_pane
        snap = self.model.snapshot(logs_after=log.last_seq if log.epoch == self.model.epoch else 0)
        self._drawn_version = snap.version
        self._draw_header(snap)
        self.device_grid.show(snap)
        log.show(snap.epoch, snap.logs)
        if snap.version != self._charted_version and self._summary is None:
            self._show_advice(None, None)
        self.frames += 1
        self.frame_time_total_s += time.perf_counter() - started

    def _draw_header(self, snap: Snapshot | None) -> None:
        if snap is None:
            snap = self._last_snap
            if snap is None:
                return
        self._last_snap = snap
        self._drawn_replay = self.source.replay_status()
        self.header_panel.show(
            snap,
            self.source.info,
            self._drawn_replay,
            self.display_paused,
            ended_while_paused=self.display_paused and self.ended_while_frozen,
            over=self._finished_posted and not self.display_paused,
        )

    def _chart_sizes(self) -> dict[str, tuple[int, int]]:
        sizes = {}
        for chart_id in CHART_IDS:
            panel = self.charts[chart_id]
            if panel.display and panel.content_size.width > 0:
                sizes[chart_id] = (panel.content_size.width, panel.content_size.height)
        return sizes

    @work(thread=True, exclusive=True, group="charts", exit_on_error=False)
    def build_charts(self, sizes: dict[str, tuple[int, int]]) -> None:
        """Charts and the analysis, off the UI thread; results arrive as messages."""
        self._charted_sizes = sizes
        analysis = self.analyze()
        self.post_message(ChartsReady(self.compute_charts(sizes, analysis[1])))
        self.post_message(AdviceReady(analysis))

    def analyze(self) -> tuple[int, object, object]:
        """(model version, RunSummary, Recommendation or None) for the panel; the
        recommendation from this one run predicts other device counts."""
        final = self.model.end is not None or self._finished_posted
        version, summary = self.model.summary(live=not final)
        return version, summary, predict_from_run(self.model.start, summary, final=final)

    def compute_charts(
        self, sizes: dict[str, tuple[int, int]], summary: RunSummary | None = None
    ) -> ChartTexts:
        """The charts at ``sizes``; the phase breakdown agrees with ``summary`` (the
        run's analysis, computed here when not given)."""
        if summary is None:
            summary = self.model.summary()[1]
        return render_charts(self.model.snapshot(logs_after=2**62), sizes, summary)

    def on_charts_ready(self, message: ChartsReady) -> None:
        if self._hold(message):
            return
        if message.charts.version < self._charted_version:
            return  # built from an older snapshot than what is shown
        self._charted_version = message.charts.version
        current = self._chart_sizes()
        for chart_id, text in message.charts.texts.items():
            if current.get(chart_id) == message.charts.sizes[chart_id]:
                self.charts[chart_id].update(text)  # else drawn for a size now gone

    def on_advice_ready(self, message: AdviceReady) -> None:
        if self._hold(message):
            return
        version, summary, recommendation = message.analysis  # type: ignore[misc]
        if version < self._summary_version:
            return
        self._summary_version = version
        self._summary = summary
        self._show_advice(summary, recommendation)

    def _show_advice(self, summary, recommendation) -> None:
        """The panel, titled by how the run stands; a run that failed says so
        and why there, not "waiting for the first steps"."""
        interrupted = self.model.end is None and self._finished_posted
        failure = self._failed.message if self._failed is not None else None
        final = self.model.end is not None or interrupted
        snap = self._last_snap  # the header's: the panel says what it does
        waiting = None
        if snap is not None and not final:
            waiting = before_own_start(snap.start, snap.gpus_sampled)
        self.advice_panel.show(
            summary,
            recommendation,
            final=final,
            interrupted=interrupted,
            failure=failure,
            waiting=waiting,
            elsewhere=steps_elsewhere(snap.start) if snap is not None else None,
        )

    async def settle(self) -> None:
        """Absorb everything the source has ready now and draw it all, charts
        included, synchronously (tests, snapshots and the benchmark)."""
        while self.pump_once(0.0):
            pass
        self.redraw(force=True)
        self.on_charts_ready(ChartsReady(self.compute_charts(self._chart_sizes())))
        self.on_advice_ready(AdviceReady(self.analyze()))

    # -- run end and failure -------------------------------------------------------
    def on_run_finished(self, message: RunFinished) -> None:
        if self._hold(message):
            self._draw_header(None)  # the pause badge says the run ended meanwhile
            return
        end: EndEvent | None = message.end
        self.redraw(force=True)
        snap = self.model.snapshot(logs_after=2**62)
        snap_errors = snap.errors
        # the run's recorded duration (the log's, `gpuscale runs`'), not the header's
        # clock from the launch
        took = format_duration_s(snap.duration_s)
        if end is not None and end.status != "failed" and not snap_errors:
            # One line, briefly: at 80x24 a toast covers the log's last lines, which
            # say the same (and the header says the status, the summary panel the rest).
            self.notify(
                f"Run {end.status}: {plural(end.steps, 'step')} in {took}.",
                timeout=RUN_ENDED_TOAST_S,
            )
        elif end is None and not snap_errors and self.source.info.still_running:
            # one line at 80x24 too, as the completed run's (the header says the rest)
            self.notify(
                f"Still running: {plural(snap.steps_done, 'step')} so far.",
                timeout=6,
            )
        elif end is None and not snap_errors:
            # the log says once that there is no end event, and the header INTERRUPTED
            self.notify(
                f"Run interrupted: {plural(snap.steps_done, 'step')} in {took}.",
                severity="warning",
                timeout=6,
            )
        failed = self._failure(end)
        if failed is not None:
            self.post_message(failed)
        self.build_charts(self._chart_sizes())

    def _failure(self, end: EndEvent | None) -> RunFailed | None:
        """The run's failure, as its end says it: its last error, or a failed or lost
        status; None where it did not fail."""
        errors = self.model.snapshot(logs_after=2**62).errors
        if errors or (end is not None and end.status in ("failed", "lost")):
            error = errors[-1] if errors else None
            text = error.message if error else f"the run ended with status '{end.status}'"
            return RunFailed(text, error.traceback if error else None)
        return None

    def on_run_failed(self, message: RunFailed) -> None:
        if self._hold(message):
            return
        self._failed = message
        self.refresh_bindings()  # the footer offers `e` from now on
        self._show_advice(self._summary, None)
        if not self._error_shown:
            self._error_shown = True
            self.push_screen(ErrorScreen(message.message, message.traceback))

    # -- actions -------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in self.REPLAY_ONLY:
            return self.is_replay
        if action in self.LIVE_ONLY:
            return not self.is_replay
        return True  # `e` without a failure says so (action_show_error)

    def footer_hides(self, action: str) -> bool:
        """Keys that work but are not offered in the footer now (:class:`StableFooter`):
        ``e`` before the run failed (pressed, it says there is no error to show)."""
        return action == "show_error" and self._failed is None

    async def action_quit(self) -> None:
        """ctrl+q (and the palette's quit) also stop a live run cleanly."""
        self.action_quit_run()

    def action_interrupt(self) -> None:
        """Ctrl-C: as ``q``, and a live run still going then counts as interrupted
        (exit 130, like ``gpuscale run``); a replay, or a run already over, just quits.
        After ``q``, while the stop it began is under way, it changes nothing (exit 0,
        as ``q``): the run ends the same, only the user is in a hurry."""
        over = self.model.end is not None or self._finished_posted
        if not self.is_replay and not over and not self._quitting and self.interrupted_by is None:
            self.interrupted_by = "Ctrl-C"
        self.action_quit_run()

    def action_help_quit(self) -> None:  # Textual's own ctrl+c action, should a screen use it
        self.action_interrupt()

    def action_help(self) -> None:
        self.push_screen(HelpScreen(replay=self.is_replay))

    def by_hand(self) -> bool:
        """Whether the app is quit by the user (``q``, Ctrl-C, ``ctrl+q``, or SIGINT, as
        Ctrl-C): a live script is then sent Ctrl-C first (:meth:`EventSource.interrupt`);
        after SIGTERM or SIGHUP it is stopped at once."""
        return self.stop_signal in (None, "SIGINT")

    def action_quit_run(self) -> None:
        """Quit; a live run's trainer is stopped cleanly first (the recording is
        finalized by the run's own stop)."""
        if self._quitting:
            return
        self._quitting = True
        if self.source.info.kind == "live":
            how = passed_on_note(self.source, self.by_hand())
            if how:
                self.notify(
                    f"Stopping the script{how}; then the recording is finalized…",
                    timeout=getattr(self.source, "interrupt_grace_s", 0.0) + 10,
                )
            else:
                self.notify("Stopping the trainer and finalizing the recording…", timeout=10)
        self._stop_and_exit()

    @work(thread=True, group="quit", exit_on_error=False)
    def _stop_and_exit(self) -> None:
        try:
            if self.by_hand():
                self.source.interrupt()
            else:
                self.source.stop()
        finally:
            self.call_from_thread(self.exit, 0)

    def _hold(self, message: object) -> bool:
        """While the display is frozen nothing on screen changes: ``message`` waits
        for ``p`` (True: held)."""
        if self.display_paused:
            if isinstance(message, ChartsReady | AdviceReady):  # only the latest counts
                self._held = [m for m in self._held if type(m) is not type(message)]
            self._held.append(message)
            return True
        return False

    @property
    def ended_while_frozen(self) -> bool:
        return any(isinstance(m, RunFinished | RunFailed) for m in self._held)

    def action_toggle_display(self) -> None:
        self.display_paused = not self.display_paused
        self._draw_header(None)
        if not self.display_paused:
            self.redraw(force=True)
            held, self._held = self._held, []
            for message in held:  # in the order they came
                if isinstance(message, ChartsReady):
                    self.on_charts_ready(message)
                elif isinstance(message, AdviceReady):
                    self.on_advice_ready(message)
                elif isinstance(message, RunFinished):
                    self.on_run_finished(message)
                elif isinstance(message, RunFailed):
                    self.on_run_failed(message)

    def _keys_on_dashboard(self) -> None:
        """Textual tries the app's priority bindings on a modal screen too (the command
        palette, help, the error): there ←/→, space and +/- are the focused widget's
        (the palette's cursor, its typing), not the dashboard's. (Not ``check_action``:
        that would also take them off the dashboard's footer behind the modal.)"""
        if self.screen is not self.screen_stack[0]:
            raise SkipAction()

    def action_toggle_replay(self) -> None:
        self._keys_on_dashboard()
        self._toggle_replay()

    def _toggle_replay(self) -> None:
        if isinstance(self.source, ReplaySource):
            paused = self.source.toggle_pause()
            self.notify("Replay paused (space resumes)" if paused else "Replay resumed", timeout=2)
            self._draw_header(None)

    def action_seek(self, direction: int) -> None:
        self._keys_on_dashboard()
        if isinstance(self.source, ReplaySource):
            self.source.seek(direction * self.source.seek_step_s)
            self._draw_header(None)

    def action_panel(self, direction: int) -> None:
        self._keys_on_dashboard()
        if direction < 0:
            self.screen.focus_previous()
        else:
            self.screen.focus_next()

    def action_speed(self, direction: int) -> None:
        self._keys_on_dashboard()
        if isinstance(self.source, ReplaySource):
            speed = self.source.change_speed(direction)
            self.notify(f"Replay speed {speed:g}x", timeout=2)
            self._draw_header(None)

    def action_jump_end(self) -> None:
        if isinstance(self.source, ReplaySource):
            self.source.jump_to_end()

    def action_restart(self) -> None:
        if isinstance(self.source, ReplaySource):
            self.source.seek_to(0.0)

    def action_screenshot(self) -> None:
        """An SVG of the screen in the data folder's ``screenshots/`` (the toast says where)."""
        directory = self.screenshot_dir or screenshots_dir()
        start = self.model.start
        model = (start.model if start else "") or "run"
        name = f"gpuscale_{model}_{datetime.now():%Y%m%d-%H%M%S}.svg"
        try:
            directory.mkdir(parents=True, exist_ok=True)
            path = self.save_screenshot(name, str(directory))
        except OSError as exc:
            self.notify(f"Could not save the screenshot in {directory}: {exc}", severity="error")
            return
        self.notify(f"Screenshot saved to {path}", title="Screenshot", timeout=6)

    def action_next_chart(self) -> None:
        """The next chart: on a narrow screen it replaces the one shown; on a wide one,
        where all are shown, it takes the focus (its border lights up)."""
        self._show_chart(self._chart_index + 1)
        chart = self.charts[CHART_IDS[self._chart_index]]
        if isinstance(self.screen, Screen) and not self.screen.has_class("-narrow"):
            chart.focus()
        self.notify(f"Chart: {chart.border_title}", timeout=2)
        self.build_charts(self._chart_sizes())

    def _show_chart(self, index: int) -> None:
        self._chart_index = index % len(CHART_IDS)
        for n, chart_id in enumerate(CHART_IDS):
            self.charts[chart_id].set_class(n == self._chart_index, "-shown")
        self.call_after_refresh(lambda: self.build_charts(self._chart_sizes()))

    def action_toggle_debug(self) -> None:
        self.log_pane.toggle_debug()
        self.redraw(force=True)

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.current_theme.dark else "textual-dark"

    def action_show_error(self) -> None:
        failed = self._failed
        held = [m for m in self._held if isinstance(m, RunFinished | RunFailed)]
        if failed is None and held:
            # frozen (p) when the run failed, the failure waits for the thaw: e, asked
            # for it, shows it now (and the thaw does not show it again)
            last = held[-1]
            failed = last if isinstance(last, RunFailed) else self._failure(last.end)
        if failed is not None:
            self._error_shown = True
            self.push_screen(ErrorScreen(failed.message, failed.traceback))
            return
        end = self.model.end
        if end is not None:
            state = f"the run {end.status}"
        elif self._finished_posted and self.source.info.still_running:
            state = "the run is still running, no error recorded so far"
        elif self._finished_posted:
            # as the toast said when it ended: no end event, and no error was recorded
            state = "the run was interrupted (no end event) and recorded no error"
        else:
            state = "the run has not failed"
        self.notify(f"No error to show: {state} (e shows a failed run's error).", timeout=3)

    def get_system_commands(self, screen: Screen):
        yield from super().get_system_commands(screen)
        yield SystemCommand(
            "Pause display", "Freeze the screen; the run goes on", self.action_toggle_display
        )
        yield SystemCommand(
            "Save screenshot",
            "An SVG of the screen in gpuscale's data folder (screenshots/)",
            self.action_screenshot,
        )
        yield SystemCommand(
            "Next chart", "Cycle the chart shown on a narrow screen", self.action_next_chart
        )
        yield SystemCommand(
            "Light / dark theme",
            "Toggle between textual-light and textual-dark",
            self.action_toggle_theme,
        )
        if self.is_replay:
            yield SystemCommand("Replay: pause / resume", "Same as space", self._toggle_replay)
            yield SystemCommand("Replay: jump to end", "Show the final state", self.action_jump_end)
            yield SystemCommand(
                "Replay: back to start", "Replay from the beginning", self.action_restart
            )
        if self._failed is not None:
            yield SystemCommand(
                "Show the error", "The failed run's message and traceback", self.action_show_error
            )


def build_app(source: EventSource, **options: object) -> GpuscaleApp:
    """The dashboard for ``source`` (live run, replay, or in-memory events);
    the one factory used by the commands, the tests and the benchmark."""
    return GpuscaleApp(source, **options)  # type: ignore[arg-type]


STOP_SIGNAL_EXIT_S = 5.0
"""After SIGTERM or SIGHUP, the process is gone within this (the run stopped and
its recording ended first), even when the terminal is gone and the dashboard's
own shutdown blocks writing to it. After SIGINT, which a live script gets as Ctrl-C
first, within :data:`~gpuscale.live.child.INTERRUPT_GRACE_S` more."""


def run_until_stop_signal(app: App) -> str | None:
    """Run ``app``; SIGINT, SIGTERM and SIGHUP (``kill``, ``timeout``, ``scancel``, a closed
    terminal) quit it the way ``q`` does, from the app's own loop, so the terminal
    is restored and a live run's trainer is stopped with its recording ending in
    its end event. Raising into a running Textual app instead leaves a traceback.
    The Ctrl-C key (Textual reads it as a key, not SIGINT) does the same through
    the app's ``interrupted_by``.

    A watchdog makes the promise hold when the terminal is gone (Textual's
    shutdown can block for ever writing to it): it stops the source itself and,
    if the app is still shutting down :data:`STOP_SIGNAL_EXIT_S` after the signal,
    ends the process with exit status 130. Once the app has returned the watchdog
    stands down, and the stop signals stay ignored until gpuscale exits: later
    signals (a third Ctrl-C, a repeated ``kill``) cut neither the report the
    command prints next nor the recording (a second signal once ended the process
    at once, the report unprinted). Returns the name of the signal that ended it,
    "Ctrl-C" when that key stopped a live run, or None."""
    import asyncio
    import signal

    received: list[str] = []
    returned = threading.Event()  # app.run() is over: its terminal is given back

    def watchdog(began: float, by_hand: bool) -> None:
        grace_s = getattr(app.source, "interrupt_grace_s", 0.0) if by_hand else 0.0
        deadline = began + STOP_SIGNAL_EXIT_S + grace_s
        try:
            # idempotent; a live run ends its recording here (after SIGINT a script gets
            # Ctrl-C first; after SIGTERM, SIGHUP a Ctrl-C that q passed on is cut short)
            interrupt = getattr(app.source, "interrupt", None) if by_hand else None
            (interrupt if callable(interrupt) else app.source.stop)()
            # a second stop() returns at once: wait for the run itself to be over
            wait = getattr(getattr(app.source, "run", None), "wait", None)
            if callable(wait):
                wait(max(0.0, deadline - time.monotonic()))
        except Exception:  # noqa: BLE001 - the exit below must happen regardless
            pass
        if not returned.wait(max(0.3, deadline - time.monotonic())):
            os._exit(EXIT_INTERRUPTED)  # the shutdown is stuck (a lost terminal)

    def on_stop_signal(signum: int, frame: object) -> None:
        received.append(signal.Signals(signum).name)
        if len(received) == 1:
            app.stop_signal = received[0]  # type: ignore[attr-defined]  # how to stop a run
            by_hand = received[0] == "SIGINT"
            threading.Thread(
                target=watchdog,
                args=(time.monotonic(), by_hand),
                name="gpuscale-stop",
                daemon=True,
            ).start()
        try:
            asyncio.get_running_loop().call_soon_threadsafe(app.action_quit_run)
        except RuntimeError:  # the app is not running (yet, or any more)
            if len(received) == 1:  # a later one: the stop is under way, nothing to add
                raise KeyboardInterrupt(received[-1]) from None

    previous = {}
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is not None and signal.getsignal(signum) is not signal.SIG_IGN:
            previous[signum] = signal.signal(signum, on_stop_signal)
    try:
        app.run()
    finally:
        returned.set()
        for signum, handler in previous.items():  # after a stop signal: ignored till exit
            signal.signal(signum, signal.SIG_IGN if received else handler)
    if received:
        return received[0]
    return getattr(app, "interrupted_by", None)
