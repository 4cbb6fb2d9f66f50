"""The compact scaling chart that ``gpuscale recommend`` prints under its tables,
and the ``--plot FILE`` it writes (the drawing itself is in :mod:`gpuscale.plots`)."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console

from gpuscale.analysis.recommend import Recommendation

CHART_MIN_COLUMNS = 60
"""Narrower terminals get no chart (its axes would not fit); ``--no-chart`` skips it."""
CHART_MAX_COLUMNS = 100
CHART_HEIGHT = 30


def print_chart(rec: Recommendation, console: Console) -> None:
    """The scaling chart, when the console is wide enough; a pipe gets it without colour."""
    if console.width < CHART_MIN_COLUMNS or not rec.table:
        return
    from gpuscale.plots.scaling import build_scaling_chart
    from gpuscale.plots.terminal import scaling_text

    console.print()
    console.print(
        scaling_text(build_scaling_chart(rec), min(console.width, CHART_MAX_COLUMNS), CHART_HEIGHT),
        crop=False,
        soft_wrap=True,
    )


def write_plot_file(rec: Recommendation, path: str) -> Path:
    """``--plot FILE``: the chart as SVG or PNG; says where it went (on stderr, one line)."""
    from gpuscale.plots.figure import write_plot
    from gpuscale.plots.scaling import build_scaling_chart

    chart = build_scaling_chart(rec)
    written = write_plot(chart, path)
    if chart.one_count:  # the file has no curve: said, so nobody looks for one
        print(
            f"scaling chart written to {written}: one count measured, so no scaling "
            "curve (the file says so)",
            file=sys.stderr,
        )
    else:
        print(f"scaling chart written to {written}", file=sys.stderr)
    return written
