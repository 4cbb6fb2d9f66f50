"""The scaling view: a sweep over device counts on one screen.

``gpuscale replay RUN1 RUN2 ...`` shows the recordings of a sweep here, offline,
without TensorFlow. The screen draws from a :class:`SweepView` (measured points, the
counts planned, the state of the sweep) and recommends from what was measured, with
the same code as ``gpuscale recommend``; :meth:`SweepApp.show_sweep` replaces the
view, so a live sweep can feed it one device count at a time.

Layout: a header (what was swept, which counts are measured, the state); the
throughput chart; the stacked bars of where the step time goes; the recommendation.
A live sweep (``gpuscale recommend --watch``) also shows the run in progress as
``gpuscale watch`` does, with the dashboard's own widgets: its device cards across
the top and, beside the scaling charts, its step times and phase breakdown.
Narrower than 120 columns the recommendation goes under the charts; shorter than 36
rows one chart is shown at a time and ``c`` shows the next (the device cards
condense to a line each first).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Static

from gpuscale.analysis.recommend import DEFAULT_MIN_EFFICIENCY, Recommendation, recommend
from gpuscale.analysis.sweep import SweepPoint
from gpuscale.errors import GpuscaleError
from gpuscale.events.schema import Topology
from gpuscale.formatting import markup_literal, plural
from gpuscale.plots.scaling import build_scaling_chart
from gpuscale.ui import keys
from gpuscale.ui.messages import ChartsReady, make_room_for_toast
from gpuscale.ui.model import RunModel
from gpuscale.ui.widgets.charts import (
    BREAKDOWN_CHART,
    CHART_TITLES,
    STEP_CHART,
    ChartPanel,
    render_charts,
)
from gpuscale.ui.widgets.devices import DeviceGrid
from gpuscale.ui.widgets.footer import StableFooter
from gpuscale.ui.widgets.scaling import (
    PHASES_PANEL,
    THROUGHPUT_PANEL,
    RecommendationPanel,
    ScalingChartPanel,
)
from gpuscale.ui.widgets.screens import HelpScreen

if TYPE_CHECKING:
    from gpuscale.ui.live_sweep import LiveSweep

RUN_CHART_IDS = (STEP_CHART, BREAKDOWN_CHART)
"""The run dashboard's charts a live sweep shows for its run in progress."""
RUN_WAITING = {
    STEP_CHART: "the run's step times appear here after its first steps",
    BREAKDOWN_CHART: "the run's phases appear here after its first probe",
}


@dataclass
class SweepView:
    """What the scaling view shows: the measured points so far and where the sweep is."""

    points: list[SweepPoint]
    heading: str = "Scaling sweep"
    planned: list[int] = field(default_factory=list)
    """Device counts the sweep set out to measure (empty: whatever ``points`` has)."""
    state: str = "complete"
    """``running``, ``complete`` or ``stopped`` (by the user or a failed run)."""
    running_devices: int | None = None
    status_line: str | None = None
    """One line on the run in progress, for a live sweep."""
    available_devices: int | None = None
    min_efficiency: float = DEFAULT_MIN_EFFICIENCY
    max_devices: int | None = None
    sources: list[str] = field(default_factory=list)
    cut_short: tuple[int, int] | None = None
    """A live sweep's count that a stop cut short after it counted steps, kept:
    ``(devices, steps counted)``."""
    warnings: list[str] = field(default_factory=list)
    """What the readers forgave and inputs counted once (replay of several files),
    shown once as notifications."""
    topology: Topology | None = None
    """The machine's GPU topology the runs' recordings agree on
    (:attr:`gpuscale.analysis.sweep.Sweep.topology`): the recommendation names the
    GPUs to use by it."""

    @property
    def measured_counts(self) -> list[int]:
        return sorted({p.devices for p in self.points})

    def recommendation(self) -> Recommendation | None:
        if not self.points:
            return None
        try:
            return recommend(
                self.points,
                min_efficiency=self.min_efficiency,
                max_devices=self.max_devices,
                available_devices=self.available_devices,
                topology=self.topology,
            )
        except GpuscaleError:
            return None

    def state_line(self) -> str | None:
        """What the recommendation rests on, when the sweep is not complete."""
        measured = ", ".join(map(str, self.measured_counts)) or "none"
        unit = "device" if self.measured_counts == [1] else "devices"
        if self.state == "stopped" and not self.measured_counts:
            return "Sweep stopped before a count was measured: nothing to recommend from"
        if self.state == "stopped" and self.cut_short is not None:
            n, counted = self.cut_short
            return (
                f"Sweep stopped during the {n}-device run, kept with the "
                f"{plural(counted, 'step')} it counted: recommending from what was "
                f"measured ({measured} {unit})"
            )
        if self.state == "stopped" and self.planned:
            missing = [n for n in self.planned if n not in self.measured_counts]
            if missing:
                return (
                    f"Sweep stopped after {len(self.measured_counts)} of {len(self.planned)} "
                    f"counts: recommending from what was measured ({measured} {unit})"
                )
        if self.state == "running":
            return f"Sweep running: recommending from the counts measured so far ({measured})"
        return None


def sweep_heading(points: list[SweepPoint], files: int | None = None) -> str:
    """One line on what was swept: the workload, the devices, where it comes from."""
    first = points[0]
    configs = list(dict.fromkeys(p.config for p in points))
    what = first.model or (
        f"{len(configs)} configurations" if len(configs) > 1 else first.config or "a sweep"
    )
    batch = (
        f"{first.per_replica_batch} per device (weak scaling)"
        if first.scaling == "weak"
        else f"global batch {first.global_batch} (strong scaling)"
    )
    platform = {
        "cpu-logical": "CPU logical devices, NOT GPUs",
        "cpu": "CPUs",
    }.get(first.platform, first.device_name or "GPUs")
    origin = f"; from {files} files" if files and files > 1 else ""
    return f"Scaling of {what}, {batch}, on {platform}{origin}"


class SweepHeader(Static):
    """What was swept, then the sweep's state, in :data:`HEADER_LINES` lines: each
    wrapped rather than cut (a long model or device name must not hide where the
    sweep comes from), the heading in two lines at most, the state always shown."""

    _view: SweepView | None = None

    def on_resize(self) -> None:
        if self._view is not None:
            self.show(self._view)

    def show(self, view: SweepView) -> None:
        self._view = view
        heading = Text(view.heading, style="bold")
        self.tooltip = None
        text = Text()
        state = {"running": "RUNNING", "complete": "COMPLETE", "stopped": "STOPPED"}[view.state]
        text.append(
            state,
            style={"RUNNING": "bold cyan", "COMPLETE": "bold green"}.get(state, "bold yellow"),
        )
        counts = view.planned or view.measured_counts
        text.append("  devices: ")
        for n in counts:
            if n in view.measured_counts:
                text.append(f"{n}✓ ", style="green")
            elif n == view.running_devices:
                text.append(f"{n}… ", style="cyan")
            else:
                text.append(f"{n}· ", style="dim")
        if view.status_line:
            text.append(f" {view.status_line}")
        width = self.content_size.width
        if width <= 0:  # not laid out yet: drawn again on resize
            self.update(Text("\n").join([heading, text]))
            return
        top = self._wrapped(self._fitting(view.heading, width), width, HEADER_LINES - 1)
        bottom = self._wrapped(text, width, HEADER_LINES - len(top))
        self.update(Text("\n").join([*top, *bottom]))

    def _fitting(self, heading: str, width: int) -> Text:
        """The heading as it fits in its lines: whole where it does, else shortened
        (:func:`shorter_headings`) rather than cut mid-sentence; the whole one is
        then the header's tooltip."""
        most = HEADER_LINES - 1
        for candidate in shorter_headings(heading):
            text = Text(candidate, style="bold")
            if len(text.wrap(self.app.console, width)) <= most:
                break
        self.tooltip = heading if candidate != heading else None
        return text

    def _wrapped(self, text: Text, width: int, most: int) -> list[Text]:
        """``text`` wrapped to ``width``, in ``most`` lines at most (the last cut with …)."""
        lines = list(text.wrap(self.app.console, width))
        if len(lines) > most:
            lines = lines[:most]
            last = lines[-1]
            last.rstrip()
            last.append(" …")
            last.truncate(width, overflow="ellipsis")
        for line in lines:
            line.rstrip()
        return lines


HEADER_LINES = 3
"""The scaling view's header: at most this many lines (its CSS max-height)."""

_ASIDE = re.compile(r"\s*\((?:[^()]|\([^()]*\))*\)")
"""A parenthesised aside, one nested level included: ``(No NVIDIA driver found
(libnvidia-ml.so.1 not found))``."""


def shorter_headings(heading: str) -> list[str]:
    """``heading``, then ever shorter forms of it for a narrow terminal: without its
    asides in parentheses (the NVML message of a sweep on CPU devices), then without
    its ``; ``-clauses from the last one on (the device counts, which the state line
    shows, and how the sweep runs), the first clause always kept. What the heading
    says first is what matters most, so nothing important is cut mid-word."""
    forms = [heading]
    plain = _ASIDE.sub("", heading).strip()
    if plain and plain != heading:
        forms.append(plain)
    clauses = forms[-1].split("; ")
    for keep in range(len(clauses) - 1, 0, -1):
        forms.append("; ".join(clauses[:keep]))
    return forms


RUN_REFRESH_HZ = 4.0
"""How often the run in progress is redrawn (its device cards), at most."""
RUN_CHART_INTERVAL_S = 0.5
"""Its charts are rebuilt (off the UI thread) at most this often."""
RUN_DEVICES_SHARE = 0.25
"""Full device cards take at most this share of the screen's height (the scaling
charts need the rest); beyond it they condense to one line each."""


class SweepApp(App[int]):
    """The scaling view of a sweep (see the module docstring)."""

    CSS_PATH = ["run_panels.tcss", "sweep.tcss"]
    TITLE = "gpuscale"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]
    BINDINGS = keys.bindings(keys.SWEEP_KEYS)  # every key: gpuscale/ui/keys.py

    def __init__(
        self,
        view: SweepView,
        *,
        runner: LiveSweep | None = None,
        screenshot_dir: Path | None = None,
    ) -> None:
        super().__init__()
        self.view = view
        self.runner = runner
        self._quitting = False
        self.interrupted_by: str | None = None  # "Ctrl-C" when that key stopped a live sweep
        self.screenshot_dir = screenshot_dir
        self.recommendation: Recommendation | None = None
        self.last_screenshot: Path | None = None
        self._chart_index = 0
        self._run_model: RunModel | None = None
        self._run_drawn = -1
        self._run_charted = -1
        self._run_sizes: dict[str, tuple[int, int]] = {}
        self._run_chart_built = 0.0

    @property
    def live(self) -> bool:
        """A live sweep: the run in progress is shown too."""
        return self.runner is not None

    def _on_notify(self, event) -> None:  # Textual's handler for notify()
        """One toast of a kind, two at most (:func:`make_room_for_toast`)."""
        make_room_for_toast(self, event.notification.title, event.notification.message)
        super()._on_notify(event)

    def compose(self) -> ComposeResult:
        self.header_panel = SweepHeader(id="sweep-header")
        self.device_grid = DeviceGrid(id="devices", max_share=RUN_DEVICES_SHARE)
        self.run_charts = {chart_id: ChartPanel(chart_id) for chart_id in RUN_CHART_IDS}
        self.throughput_panel = ScalingChartPanel(
            THROUGHPUT_PANEL, "the chart: after the first device count"
        )
        self.phases_panel = ScalingChartPanel(
            PHASES_PANEL, "the bars: after the first device count"
        )
        self.advice_panel = RecommendationPanel()
        self.run_column = Vertical(id="run-charts", classes="chart-column")
        self.scaling_column = Vertical(id="scaling-charts", classes="chart-column")
        yield self.header_panel
        yield self.device_grid
        with Horizontal(id="sweep-body"):
            with Horizontal(id="sweep-charts"):
                with self.run_column:
                    yield from self.run_charts.values()
                with self.scaling_column:
                    yield self.throughput_panel
                    yield self.phases_panel
            yield self.advice_panel
        yield StableFooter()

    def on_mount(self) -> None:
        self.screen.set_class(self.live, "-live")
        if not self.live:  # a replay: no run in progress to show
            self.device_grid.display = False
            self.run_column.display = False
            self.advice_panel.focus()  # not the hidden device cards: ↓ and pgdn scroll it
        for chart_id, panel in self.run_charts.items():
            panel.update(Text(RUN_WAITING[chart_id], style="dim"))
        self.show_sweep(self.view)
        self._show_chart(0)
        for warning in dict.fromkeys(self.view.warnings):
            self.notify(markup_literal(warning), severity="warning", timeout=10)
        if self.runner is not None:
            self.set_interval(1 / RUN_REFRESH_HZ, self.follow_run, name="run")
            self._run_sweep()

    # -- the run in progress (a live sweep) ----------------------------------------
    def follow_run(self, *, now: bool = False) -> None:
        """Draw the run in progress from the runner's model: the device cards when
        it changed, the charts (built in a thread) at most every
        :data:`RUN_CHART_INTERVAL_S`; ``now``: the charts at once, here (tests)."""
        runner = self.runner
        model = runner.model if runner is not None else None
        if model is None:
            return
        if model is not self._run_model:  # the next device count started
            self._run_model = model
            self._run_drawn = self._run_charted = -1
            self._run_sizes = {}
            n = runner.model_devices
            who = plural(n, "device") if n else "this run"
            for chart_id, panel in self.run_charts.items():
                panel.border_title = f"{CHART_TITLES[chart_id]} · run on {who}"
                panel.update(Text(RUN_WAITING[chart_id], style="dim"))
            self.device_grid.border_title = f"Devices · run on {who}"
        version = model.version
        if version != self._run_drawn:
            snap = model.snapshot(logs_after=2**62)
            self._run_drawn = snap.version
            self.device_grid.show(snap)
        sizes = self._run_chart_sizes()
        if version == self._run_charted and sizes == self._run_sizes:
            return
        if now:
            self._run_sizes = sizes
            charts = render_charts(model.snapshot(2**62), sizes, model.summary()[1])
            self.on_charts_ready(ChartsReady(charts))
        elif time.monotonic() - self._run_chart_built >= RUN_CHART_INTERVAL_S:
            self._run_chart_built = time.monotonic()
            self._run_sizes = sizes
            self._build_run_charts(model, sizes)

    def _run_chart_sizes(self) -> dict[str, tuple[int, int]]:
        return {
            chart_id: (panel.content_size.width, panel.content_size.height)
            for chart_id, panel in self.run_charts.items()
            if panel.display and panel.content_size.width > 0 and panel.content_size.height > 0
        }

    @work(thread=True, exclusive=True, group="run-charts", exit_on_error=False)
    def _build_run_charts(self, model: RunModel, sizes: dict[str, tuple[int, int]]) -> None:
        charts = render_charts(model.snapshot(logs_after=2**62), sizes, model.summary()[1])
        if model is self._run_model:  # else the next count started meanwhile
            self.post_message(ChartsReady(charts))

    def on_charts_ready(self, message: ChartsReady) -> None:
        charts = message.charts
        self._run_charted = charts.version
        current = self._run_chart_sizes()
        for chart_id, text in charts.texts.items():
            if current.get(chart_id) == charts.sizes[chart_id]:
                self.run_charts[chart_id].update(text)  # else drawn for a size now gone

    @work(thread=True, group="sweep", exit_on_error=False)
    def _run_sweep(self) -> None:
        """The live sweep, in a thread; the screen is updated from its callbacks."""
        runner = self.runner
        assert runner is not None
        try:
            final = runner.run(
                on_status=lambda view: self.call_from_thread(self.update_status, view),
                on_count=lambda view: self.call_from_thread(self.show_sweep, view),
            )
        except Exception as exc:  # noqa: BLE001 - shown, and the sweep ends as stopped
            runner.failure = f"the sweep failed: {exc}"
            final = SweepView(**{**self.view.__dict__, "state": "stopped"})
            self.call_from_thread(self.show_sweep, final)
        if self._quitting:
            self.call_from_thread(self.exit, 0)

    def show_sweep(self, view: SweepView) -> None:
        """Show ``view`` (a live sweep calls this after every device count)."""
        self.view = view
        self.recommendation = view.recommendation()
        chart = build_scaling_chart(self.recommendation) if self.recommendation else None
        self.header_panel.show(view)
        before = self._chart_order()
        self.throughput_panel.set_chart(chart)
        self.phases_panel.set_chart(chart)
        if self._chart_order() != before:
            # the bars, or the throughput chart of one count, left or joined the charts c shows
            self._show_chart(self._chart_index)
        self.advice_panel.show(self.recommendation, view.state_line())

    def update_status(self, view: SweepView) -> None:
        """Only the header (the run in progress)."""
        self.view = view
        self.header_panel.show(view)

    def _chart_order(self) -> list[Widget]:
        """The charts ``c`` steps through on a short screen: a live sweep's run
        first, then the scaling charts; not the bars where there are none (their
        one line stays under the throughput chart), nor the throughput of one
        measured count where there are bars (its few lines, shown above the bars on
        a tall screen; the recommendation says what to measure next)."""
        order: list[Widget] = list(self.run_charts.values()) if self.live else []
        if not self.throughput_panel.has_class("-one-count"):
            order.append(self.throughput_panel)
        if not self.phases_panel.has_class("-unsplit"):
            order.append(self.phases_panel)
        if not order:  # one count without a breakdown: its lines are all there is
            order.append(self.throughput_panel)
        return order

    def _show_chart(self, index: int) -> None:
        order = self._chart_order()
        self._chart_index = index % len(order)
        shown = order[self._chart_index]
        for panel in (*self.run_charts.values(), self.throughput_panel, self.phases_panel):
            panel.set_class(panel is shown, "-shown")
        for column in (self.run_column, self.scaling_column):
            column.set_class(shown.parent is column, "-holds-shown")

    def action_next_chart(self) -> None:
        """The next chart: on a short screen it replaces the one shown; on a tall
        one, where all are shown, it takes the focus."""
        self._show_chart(self._chart_index + 1)
        shown = self._chart_order()[self._chart_index]
        if not self.screen.has_class("-short"):
            shown.focus()
        self.notify(f"Chart: {shown.border_title}", timeout=2)

    def action_help(self) -> None:
        self.push_screen(HelpScreen(sweep=True))

    def action_toggle_advice(self) -> None:
        """The recommendation full screen (focused: the keys scroll it), or back."""
        if self.screen.maximized is self.advice_panel:
            self.screen.minimize()
        else:
            self.advice_panel.focus()
            self.screen.maximize(self.advice_panel, container=False)

    def action_restore_advice(self) -> None:
        if self.screen.maximized is not None:
            self.screen.minimize()

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.theme != "textual-light" else "textual-dark"

    def action_screenshot(self) -> None:
        from gpuscale.recording.store import screenshots_dir

        folder = self.screenshot_dir or screenshots_dir()  # as the run dashboard's
        name = f"gpuscale-sweep-{datetime.now():%Y%m%d-%H%M%S}.svg"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = Path(self.save_screenshot(name, path=str(folder)))
        except OSError as exc:
            self.notify(f"screenshot not saved: {exc.strerror}", severity="error")
            return
        self.last_screenshot = path
        self.notify(f"screenshot saved to {path}")

    def action_interrupt(self) -> None:
        """Ctrl-C: as ``q``; a live sweep still running then counts as interrupted
        (the report is still printed, exit 130); a sweep from recordings, or one
        already over, just quits. After ``q``, while the stop it began is under
        way, it changes nothing: the user quit (exit 0) and is hurrying the stop,
        which goes no faster for it, and the report is the same."""
        if (
            self.runner is not None
            and self.runner_active
            and not self._quitting
            and self.interrupted_by is None
        ):
            self.interrupted_by = "Ctrl-C"
        self.action_quit_run()

    def action_quit_run(self) -> None:
        """Quit; a live sweep's run in progress is stopped cleanly first (its
        recording ends with its end event) and the counts measured are kept."""
        if self.runner is None or not self.runner_active:
            self.exit(0)
            return
        if self._quitting:
            return
        self._quitting = True
        self.notify("Stopping the run in progress and finalizing its recording…", timeout=10)
        self._stop_runner()

    def on_unmount(self) -> None:
        """However the app ends, no run of the sweep is left going (its thread
        would keep the process alive): stopped, its recording ended."""
        if self.runner is not None:
            self.runner.stop()

    @work(thread=True, group="quit", exit_on_error=False)
    def _stop_runner(self) -> None:
        """By hand (``q``, Ctrl-C): a script in progress gets Ctrl-C first."""
        assert self.runner is not None
        interrupt = getattr(self.runner, "interrupt", None)
        (interrupt if callable(interrupt) else self.runner.stop)()

    async def action_quit(self) -> None:
        """ctrl+q (and the palette's quit) also stop a live sweep cleanly."""
        self.action_quit_run()

    @property
    def runner_active(self) -> bool:
        return any(w.group == "sweep" and not w.is_finished for w in self.workers)

    @property
    def stopped_early(self) -> bool:
        """The sweep ended before every planned count was measured."""
        return self.view.state == "stopped"
