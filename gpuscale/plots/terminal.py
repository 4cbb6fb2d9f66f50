"""The scaling chart as terminal text (plotext), for ``gpuscale recommend`` and the
dashboard's scaling view.

Two charts, each with its axes named and its legend on a line of its own under it
(a legend never sits on the data):

- throughput against devices, both axes logarithmic (the ideal line is straight,
  dashed, as in ``--plot``'s file); ``●`` measured, ``○`` predicted with ``│`` its
  range, ``◆`` the recommended count;
- one stacked bar per device count: compute, exposed all-reduce, apply, input wait
  (one line instead when the input has no phase breakdown at all).
"""

from __future__ import annotations

import math
import textwrap

from plotext._figure import _figure_class as _Figure  # one figure per chart: no global state
from rich.text import Text

from gpuscale.plots.scaling import (
    ScalingChart,
    linear_ticks,
    log_ticks,
    short_number,
)

SERIES_COLORS = ("cyan", "magenta", "yellow", "blue", "red", "green")
PHASE_COLORS = ("green", "red", "blue", "orange")
UNSPLIT_COLOR = "gray"
IDEAL_COLOR = "gray"
RECOMMENDED_COLOR = "green"
MIN_WIDTH = 40
"""Narrower than this, no chart is drawn (its numbers would be clipped)."""
MIN_PLOT_ROWS = 5
"""The throughput plot's rows, kept where the height allows by leaving out the axes'
titles (the scaling view's panel title says what they are): fewer, at 80x24, and the
measured line lay flat along a row."""
FRAME_ROWS = 3
"""Rows of a plotext chart besides its plot: the frame's top and bottom, the x ticks."""


_RICH_NAMES = {"gray": "bright_black", "orange": "dark_orange"}


def _style(color: str) -> str:
    """The rich style for a plotext colour name (they differ for a few)."""
    return _RICH_NAMES.get(color, color)


def _figure(width: int, height: int) -> _Figure:
    fig = _Figure()
    fig.theme("clear")
    fig.plotsize(width, height)
    return fig


def _x(devices: int) -> float:
    return math.log2(devices)


def _y(value: float) -> float:
    return math.log10(value)


def throughput_chart(chart: ScalingChart, width: int, height: int) -> Text:
    """Throughput against devices, with its legend under it (wrapped to ``width``)."""
    legend = legend_text(_throughput_legend(chart), width)
    fig_height = max(height - len(legend.split()), 6)
    fig = _figure(width, fig_height)
    titled = fig_height - FRAME_ROWS - 1 >= MIN_PLOT_ROWS  # the axes' titles take a row
    values = [p.throughput for s in chart.series for p in s.points]
    values += [v for s in chart.series for p in s.points for v in (p.low, p.high) if v]
    values += [v for _, v in chart.ideal]
    low, high = min(values), max(values)
    if chart.ideal:
        _dashed(fig, [(_x(n), _y(v)) for n, v in chart.ideal], width)
    for n, series in enumerate(chart.series):
        color = SERIES_COLORS[n % len(SERIES_COLORS)]
        fig.plot(
            [_x(p.devices) for p in series.points],
            [_y(p.throughput) for p in series.points],
            color=color,
        )
        for p in series.predicted:
            if p.has_range:
                fig.plot([_x(p.devices)] * 2, [_y(p.low), _y(p.high)], color=color, marker="│")
        if series.measured:
            fig.scatter(
                [_x(p.devices) for p in series.measured],
                [_y(p.throughput) for p in series.measured],
                color=color,
                marker="●",
            )
        if series.predicted:
            fig.scatter(
                [_x(p.devices) for p in series.predicted],
                [_y(p.throughput) for p in series.predicted],
                color=color,
                marker="○",
            )
    chosen = chart.recommended
    if chart.decided:
        fig.scatter(
            [_x(chosen.devices)], [_y(chosen.throughput)], color=RECOMMENDED_COLOR, marker="◆"
        )
    fig.xticks([_x(n) for n in chart.counts], [str(n) for n in chart.counts])
    ticks = log_ticks(low, high, widen=True)
    fig.ylim(_y(min(ticks[0], low)), _y(max(ticks[-1], high)))
    fig.yticks([_y(t) for t in ticks], [short_number(t) for t in ticks])
    span = _x(chart.counts[-1]) - _x(chart.counts[0]) or 1.0
    fig.xlim(_x(chart.counts[0]) - span * 0.04, _x(chart.counts[-1]) + span * 0.04)
    if titled:
        fig.xlabel("devices (log2)")
        fig.ylabel("samples/s (log)")
    text = Text.from_ansi(fig.build().rstrip("\n"), no_wrap=True)
    text.append("\n")
    text.append_text(legend)
    return text


IDEAL_DASH_COLUMNS = 8
"""The ideal line is drawn as one dash (about half of it inked) per this many columns."""


def _dashed(fig: _Figure, points: list[tuple[float, float]], width: int) -> None:
    """The straight line through ``points`` (first to last: the ideal line is straight
    on log axes) as dashes, so that it reads as the ideal and not as measured data,
    also without colour: every other piece of it, about :data:`IDEAL_DASH_COLUMNS`
    columns a piece and its gap."""
    (x0, y0), (x1, y1) = points[0], points[-1]
    pieces = max(3, width // IDEAL_DASH_COLUMNS)
    for i in range(pieces):
        a, b = i / pieces, (i + 0.5) / pieces
        fig.plot(
            [x0 + (x1 - x0) * a, x0 + (x1 - x0) * b],
            [y0 + (y1 - y0) * a, y0 + (y1 - y0) * b],
            color=IDEAL_COLOR,
        )


def _throughput_legend(chart: ScalingChart) -> list[tuple[str, str, str]]:
    items = []
    for n, series in enumerate(chart.series):
        name = series.config if chart.several_configs else "measured"
        items.append(("●", SERIES_COLORS[n % len(SERIES_COLORS)], name))
    if any(s.predicted for s in chart.series):
        label = "predicted"
        if chart.has_ranges:
            cover = f" {chart.coverage:.0%}" if chart.coverage is not None else ""
            label += f" │{cover} range"
        items.append(("○", "", label))
    items.append(("╌╌", IDEAL_COLOR, "ideal"))
    if chart.decided:
        where = f" ({chart.recommended_config})" if chart.several_configs else ""
        items.append(("◆", RECOMMENDED_COLOR, f"recommended: {chart.recommended.devices}{where}"))
    return items


def legend_text(items: list[tuple[str, str, str]], width: int) -> Text:
    """Legend entries (symbol, colour, label) on as many lines as ``width`` needs."""
    legend = Text(no_wrap=True, overflow="ellipsis")
    used = 0
    for symbol, color, label in items:
        entry = len(symbol) + 1 + len(label)
        if used and used + 2 + entry > width:
            legend.append("\n")
            used = 0
        elif used:
            legend.append("  ")
            used += 2
        legend.append(symbol + " ", style=_style(color) if color else "")
        legend.append(label)
        used += entry
    return legend


MIN_BAR_SLOTS = 3
"""The fewest bar widths the phase chart's x axis holds."""
ZERO_SEGMENT = -1e-9
"""An empty segment of a stacked bar, as plotext is given it (see :func:`phase_chart`)."""


def phase_chart(chart: ScalingChart, width: int, height: int) -> Text:
    """One stacked bar per device count (milliseconds per step), legend under it."""
    bars = chart.bars
    if not bars:
        return Text("no step times for the recommended configuration", style="dim")
    if not chart.has_split:
        return Text(chart.split_note, style="dim")
    unsplit = [0.0 if b.phases_s else b.step_time_s * 1000 for b in bars]
    items = []
    if any(b.phases_s for b in bars):
        names = zip(chart.phase_names, PHASE_COLORS, strict=True)
        items += [("█", color, name) for name, color in names if name]
    if any(unsplit):
        items.append(("█", UNSPLIT_COLOR, "not split"))
    legend = legend_text(items, width)
    fig_height = max(height - len(legend.split()), 6)
    fig = _figure(width, fig_height)
    series = [[(b.phases_s[i] if b.phases_s else 0.0) * 1000 for b in bars] for i in range(4)]
    colors = list(PHASE_COLORS)
    if any(unsplit):
        series.append(unsplit)
        colors.append(UNSPLIT_COLOR)
    labels = [f"{b.devices}*" if b.predicted else str(b.devices) for b in bars]
    # plotext draws a segment of height 0 as a row of blanks on the 0 line, over the
    # segments above it: a bar whose first phases are 0 (a predicted count, all "not
    # split") would float above the axis. A hair below 0 draws nothing there.
    series = [[value or ZERO_SEGMENT for value in values] for values in series]
    fig.stacked_bar(labels, series, color=colors, width=0.6)
    fig.xticks(list(range(1, len(bars) + 1)), labels)  # plotext's own choice varies
    # At least MIN_BAR_SLOTS slots, the bars centred: one or two counts are narrow
    # bars, not one bar across the whole width.
    pad = max(0, MIN_BAR_SLOTS - len(bars)) / 2
    fig.xlim(0.4 - pad, len(bars) + 0.6 + pad)
    # No more ticks than rows for them (frame, x labels and title take 4): where two
    # share a row, plotext's choice of the label shown is not reproducible.
    rows = fig_height - 4
    ticks = linear_ticks(max(b.step_time_s for b in bars) * 1000, count=max(1, min(4, rows - 1)))
    fig.yticks(ticks, [f"{t:g}" for t in ticks])
    fig.ylim(0, ticks[-1])
    fig.xlabel("devices" + (" (* predicted)" if any(b.predicted for b in bars) else ""))
    fig.ylabel("ms per step")
    text = Text.from_ansi(fig.build().rstrip("\n"), no_wrap=True)
    text.append("\n")
    text.append_text(legend)
    return text


def _throughput_part(chart: ScalingChart, width: int, height: int) -> Text:
    """The throughput chart, or, for one measured count and nothing predicted, what
    a chart of one dot would not say (:attr:`ScalingChart.one_count_note`), wrapped
    on spaces at the chart's width."""
    if chart.one_count:
        note = textwrap.fill(chart.one_count_note, max(width, 20), break_long_words=False)
        return Text(note, style="dim")
    return throughput_chart(chart, width, height)


def scaling_text(chart: ScalingChart, width: int, height: int = 30) -> Text:
    """Both charts one under the other, titled: what ``gpuscale recommend`` prints;
    without any phase breakdown, the throughput chart and one line saying so."""
    if not chart.has_split:
        text = Text(chart.title, style="bold", no_wrap=True)
        text.append("\n")
        text.append_text(_throughput_part(chart, width, max(height * 3 // 5, 8)))
        text.append("\n")
        # wrapped on spaces at the chart's width: printed with soft_wrap, a longer
        # line would be cut by the terminal inside a word ("step tim" / "es only")
        note = f"Where the step time goes: {chart.split_note}"
        text.append(textwrap.fill(note, max(width, 20), break_long_words=False), style="dim")
        return text
    top = max(height * 3 // 5, 8)
    bottom = max(height - top - 2, 7)
    text = Text(chart.title, style="bold", no_wrap=True)
    text.append("\n")
    text.append_text(_throughput_part(chart, width, top))
    text.append("\n")
    # wrapped on spaces like the note above: a configuration's long label left its
    # closing bracket alone on the next line at 80 columns
    title = f"Where the step time goes ({chart.recommended_config or 'per device count'})"
    text.append(textwrap.fill(title, max(width, 20), break_long_words=False), style="bold")
    text.append("\n")
    text.append_text(phase_chart(chart, width, bottom))
    return text
