"""A sparkline of percentages drawn against 0-100.

Textual's :class:`~textual.widgets.Sparkline` scales each line to its own least
and most values, so cards side by side do not compare: a GPU steady at 95% drew
as flat as an idle one (``▁▁▁▁``), and an idle GPU's 0-2% of noise as full-height
spikes. This one draws every value against the same 0-100, as the cards' gauges
do, so on an 8-GPU box the idle or slow GPU's history looks it.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.widgets import Sparkline

BARS = "▁▂▃▄▅▆▇█"


def percent_bars(data: Sequence[float], width: int) -> list[float]:
    """``data`` in ``width`` columns, each the most of its share of the values
    (a value spread over several columns where there are fewer values than
    columns), clamped to 0-100."""
    n = len(data)
    if n == 0 or width < 1:
        return []
    columns = []
    for column in range(width):
        start = column * n // width
        end = max((column + 1) * n // width, start + 1)
        columns.append(min(100.0, max(0.0, max(data[start:end]))))
    return columns


class PercentBars:
    """The rich renderable: one row of bars, coloured from ``low`` (0%) to ``high`` (100%)."""

    def __init__(self, data: Sequence[float], width: int | None, low: Color, high: Color):
        self.data = list(data)
        self.width = width
        self.low = low
        self.high = high

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = self.width or options.max_width
        columns = percent_bars(self.data, width)
        if not columns:
            yield Segment(BARS[0] * width, Style.from_color(self.low.rich_color))
            return
        for pct in columns:
            ratio = pct / 100
            colour = self.low.blend(self.high, ratio).rich_color
            yield Segment(BARS[int(ratio * (len(BARS) - 1))], Style.from_color(colour))


class PercentSparkline(Sparkline):
    """A :class:`~textual.widgets.Sparkline` (its ``data``, its colours) whose values
    are percentages drawn against 0-100 (module docstring); one row high."""

    def render(self) -> PercentBars:
        _, base = self.background_colors
        low = base + (
            self.get_component_styles("sparkline--min-color").color
            if self.min_color is None
            else self.min_color
        )
        high = base + (
            self.get_component_styles("sparkline--max-color").color
            if self.max_color is None
            else self.max_color
        )
        return PercentBars(self.data or [], self.size.width, low, high)
