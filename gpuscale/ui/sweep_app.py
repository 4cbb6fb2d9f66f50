"""The scaling view: a sweep over device counts on one screen.

``gpuscale replay RUN1 RUN2 ...`` shows the recordings of a sweep here, offline,
without TensorFlow. The screen draws from a :class:`SweepView` (measured points, the
counts planned, the state of the sweep) and recommends from what was measured, with
the same code as ``gpuscale recommend``; :meth:`SweepApp.show_sweep` replaces the
view, so a live sweep can feed it one device count at a time.

Layout: a header (what was swept, which counts are measured, the state); the
throughput chart; the stacked bars of where the step time goes; the recommendation.
Narrower than 120 columns the recommendation goes under the chart and the bars are
shown instead of the throughput chart with ``c``; shorter than 36 rows the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Static

from gpuscale.analysis.recommend import DEFAULT_MIN_EFFICIENCY, Recommendation, recommend
from gpuscale.analysis.sweep import SweepPoint
from gpuscale.errors import GpuscaleError
from gpuscale.plots.scaling import build_scaling_chart
from gpuscale.ui.widgets.scaling import (
    PHASES_PANEL,
    THROUGHPUT_PANEL,
    RecommendationPanel,
    ScalingChartPanel,
)

if TYPE_CHECKING:
    from gpuscale.ui.live_sweep import LiveSweep


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
            )
        except GpuscaleError:
            return None

    def state_line(self) -> str | None:
        """What the recommendation rests on, when the sweep is not complete."""
        measured = ", ".join(map(str, self.measured_counts)) or "none"
        if self.state == "stopped" and self.planned:
            missing = [n for n in self.planned if n not in self.measured_counts]
            if missing:
                unit = "device" if self.measured_counts == [1] else "devices"
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
    origin = f" from {files} files" if files and files > 1 else ""
    return f"Scaling of {what}, {batch}, on {platform}{origin}"


class SweepHeader(Static):
    def show(self, view: SweepView) -> None:
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(view.heading, style="bold")
        text.append("\n")
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
        self.update(text)


class SweepApp(App[int]):
    """The scaling view of a sweep (see the module docstring)."""

    CSS_PATH = "sweep.tcss"
    TITLE = "gpuscale"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]
    BINDINGS = [
        Binding("q", "quit_run", "Quit"),
        Binding("ctrl+c", "quit_run", "Quit", show=False, priority=True),
        Binding("c", "next_chart", "Chart"),
        Binding("s", "screenshot", "SVG"),
        Binding("t", "toggle_theme", "Theme", show=False),
    ]

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
        self.screenshot_dir = screenshot_dir
        self.recommendation: Recommendation | None = None
        self.last_screenshot: Path | None = None
        self.show_phases = False

    def compose(self) -> ComposeResult:
        self.header_panel = SweepHeader(id="sweep-header")
        self.throughput_panel = ScalingChartPanel(
            THROUGHPUT_PANEL, "the chart appears when the first device count is measured"
        )
        self.phases_panel = ScalingChartPanel(
            PHASES_PANEL, "the bars appear when the first device count is measured"
        )
        self.advice_panel = RecommendationPanel()
        yield self.header_panel
        with Horizontal(id="sweep-body"):
            with Vertical(id="sweep-charts"):
                yield self.throughput_panel
                yield self.phases_panel
            yield self.advice_panel
        yield Footer()

    def on_mount(self) -> None:
        self.show_sweep(self.view)
        if self.runner is not None:
            self._run_sweep()

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
        self.throughput_panel.set_chart(chart)
        self.phases_panel.set_chart(chart)
        self.advice_panel.show(self.recommendation, view.state_line())

    def update_status(self, view: SweepView) -> None:
        """Only the header (the run in progress)."""
        self.view = view
        self.header_panel.show(view)

    def action_next_chart(self) -> None:
        self.show_phases = not self.show_phases
        self.screen.set_class(self.show_phases, "-show-phases")  # beside the breakpoint classes

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.theme != "textual-light" else "textual-dark"

    def action_screenshot(self) -> None:
        folder = self.screenshot_dir or Path.cwd()
        name = f"gpuscale-sweep-{datetime.now():%Y%m%d-%H%M%S}.svg"
        try:
            path = Path(self.save_screenshot(name, path=str(folder)))
        except OSError as exc:
            self.notify(f"screenshot not saved: {exc.strerror}", severity="error")
            return
        self.last_screenshot = path
        self.notify(f"screenshot saved to {path}")

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

    @work(thread=True, group="quit", exit_on_error=False)
    def _stop_runner(self) -> None:
        assert self.runner is not None
        self.runner.stop()

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
