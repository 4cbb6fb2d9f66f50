"""The scaling view's panels: throughput against devices, where the step time goes
per device count, and the recommendation as text. The drawing is
:mod:`gpuscale.plots.terminal` (the same chart ``gpuscale recommend`` prints); these
widgets only size it to the panel and redraw it when the panel or the sweep changes.
"""

from __future__ import annotations

import textwrap

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from gpuscale.analysis.decide import expected_speedup
from gpuscale.analysis.phase_report import count_precision_text
from gpuscale.analysis.recommend import Recommendation
from gpuscale.formatting import format_fraction_pct
from gpuscale.plots.scaling import ScalingChart, build_scaling_chart
from gpuscale.plots.terminal import MIN_WIDTH, phase_chart, throughput_chart

THROUGHPUT_PANEL = "scaling-throughput"
PHASES_PANEL = "scaling-phases"
TITLES = {
    THROUGHPUT_PANEL: "Throughput vs devices (log axes)",
    PHASES_PANEL: "Step time per device count (ms)",
}


class ScalingChartPanel(Static, can_focus=True):
    """One of the two scaling charts, redrawn at the panel's size."""

    def __init__(self, panel_id: str, waiting: str) -> None:
        super().__init__(id=panel_id, classes="scaling-chart")
        self.border_title = TITLES[panel_id]
        self.chart: ScalingChart | None = None
        self.waiting = waiting
        self._drawn: tuple[int, int, int] | None = None

    def set_chart(self, chart: ScalingChart | None, waiting: str | None = None) -> None:
        self.chart = chart
        # No breakdown anywhere: one line, not a panel of bars (the chart takes the room).
        self.set_class(
            self.id == PHASES_PANEL and chart is not None and not chart.has_split, "-unsplit"
        )
        # One measured count: a few lines, not a chart of one dot.
        self.set_class(
            self.id == THROUGHPUT_PANEL and chart is not None and chart.one_count, "-one-count"
        )
        if waiting is not None:
            self.waiting = waiting
        self._drawn = None
        self.redraw()

    def on_resize(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        width, height = self.content_size.width, self.content_size.height
        key = (width, height, id(self.chart))
        if key == self._drawn or width <= 0 or height <= 0:
            return
        self._drawn = key
        if self.id == THROUGHPUT_PANEL:
            self.border_subtitle = self._split_note_below()
        if self.chart is None:
            self.update(Text(self.waiting, style="dim"))
        elif self.id == PHASES_PANEL and not self.chart.has_split:
            note = self.chart.split_note
            if len(note) > width:  # the probes per count are in the recommendation
                note = self.chart.split_note_short
            self.update(Text(note, style="dim", no_wrap=True, overflow="ellipsis"))
        elif self.id == THROUGHPUT_PANEL and self.chart.one_count:
            # a chart of one dot says nothing: what was measured and what comes next
            note = textwrap.fill(self.chart.one_count_note, width, break_long_words=False)
            self.update(Text(note, style="dim"))
        elif width < MIN_WIDTH or height < 6:
            self.update(Text("too small for the chart: a bigger terminal", style="dim"))
        elif self.id == THROUGHPUT_PANEL:
            self.update(throughput_chart(self.chart, width, height))
        else:
            if self.chart.recommended_config:
                self.border_subtitle = self.chart.recommended_config
            self.update(phase_chart(self.chart, width, height))

    def _split_note_below(self) -> str:
        """On a short screen the line that says there are no bars (its own panel,
        :data:`PHASES_PANEL`, is hidden there: the chart needs its rows) is said on
        the throughput chart's lower border instead, in its short form (Textual cuts a
        border's text: the probes per count are in the recommendation); elsewhere nothing."""
        chart = self.chart
        if chart is None or chart.has_split or not self.screen.has_class("-short"):
            return ""
        return chart.split_note_short


def recommendation_text(rec: Recommendation | None, state: str | None = None) -> Text:
    """The answer in a few lines: verdict, expected speedup (and over what), the state
    of the sweep, the reasons and the confidence."""
    text = Text()
    if state:
        text.append(state + "\n", style="yellow")
    if rec is None:
        text.append("the recommendation appears after the first device count", style="dim")
        return text
    if rec.verdict == "none":  # one count measured: nothing to compare it with yet
        unit = "device" if rec.devices == 1 else "devices"
        verdict = f"NONE yet: measured at {rec.devices} {unit} only"
    elif rec.verdict == "single":
        verdict = "SINGLE device"
    else:
        verdict = f"MULTI: {rec.devices} devices"
    if len(rec.configs) > 1:
        verdict += f" with '{rec.config}'"
    if rec.predicted:
        verdict += " (predicted)"
    text.append(verdict + "\n", style="bold yellow" if rec.predicted else "bold green")
    if rec.verdict == "none" and rec.measure_next:  # said here, not again under Why
        text.append(rec.measure_next[0].upper() + rec.measure_next[1:] + ".\n", style="bold")
    expected = expected_speedup(rec)
    if expected:
        text.append(expected[0].lower() + expected[1:] + "\n")
    if rec.gpus_note:  # which GPUs, by the machine's topology
        text.append(rec.gpus_note + ".\n")
    # rec.platform_note (CPU logical devices, workers on one machine) is a line of
    # rec.confidence, shown under Confidence as recommend prints it: not twice
    asked = [r for r in rec.table if not r.predicted and r.precision_asked is not None]
    if asked:  # --precision: how far each count got (recommend's words)
        targets = {r.precision_asked for r in asked}
        target = (
            f" (\u00b1{format_fraction_pct(asked[0].precision_asked, 1)} asked)"
            if len(targets) == 1
            else ""
        )
        text.append(f"Precision{target}\n", style="bold")
        several = len({r.config for r in asked}) > 1
        for r in asked:
            line = count_precision_text(r, several=several, with_asked=len(targets) > 1)
            text.append(f"- {line}\n", style="" if "not reached" not in line else "yellow")
    text.append("Why\n", style="bold")
    for line in rec.reasons:
        text.append(f"- {line}\n")
    if rec.advice:
        text.append("What to try\n", style="bold")
        for line in rec.advice:
            text.append(f"- {line}\n")
    text.append("Confidence\n", style="bold")
    for line in rec.confidence:
        text.append(f"- {line}\n")
    chart = build_scaling_chart(rec)
    if not chart.has_split and chart.split_note != chart.split_note_short:
        # the charts say it short (one line): the probes per count are said here
        text.append(f"- Where the step time goes: {chart.split_note}.\n")
    text.rstrip()
    return text


class RecommendationPanel(VerticalScroll, can_focus=True):
    """The recommendation from the counts measured so far: focusable and scrollable
    (tab, the arrows, pgup/pgdn), and ``r`` shows it full screen, so a small
    terminal loses none of it."""

    ALLOW_MAXIMIZE = True

    def __init__(self) -> None:
        super().__init__(id="scaling-advice")
        self.border_title = "Recommendation"
        self.body = Static(recommendation_text(None), id="scaling-advice-body")

    def compose(self):
        yield self.body

    def show(self, rec: Recommendation | None, state: str | None = None) -> None:
        self.body.update(recommendation_text(rec, state))
