"""The scaling chart as a file to share (``gpuscale recommend --plot FILE``): SVG or
PNG by the file's extension, drawn with matplotlib (the optional ``plot`` extra).

Two panels: throughput against devices on log2/log axes (the ideal line is
straight), measured points filled, predicted points hollow with their range as
an error bar, the recommended count ringed (one measured count and nothing
predicted: no single dot, but the line the terminal says, ``One count measured:
...``); under it one stacked bar per device
count of the recommended configuration (compute, exposed all-reduce, apply, input
wait), or, when no count has a phase breakdown, one line saying so instead. Every marker of a device count carries an SVG id ``point-<series>-<N>`` so a
reader (or a test) can find it; text stays text in the SVG.
"""

from __future__ import annotations

import re
from pathlib import Path

from gpuscale.errors import GpuscaleError
from gpuscale.plots.scaling import PHASES, ScalingChart, log_ticks, short_number

FORMATS = {".svg": "svg", ".png": "png"}
EXTRA_HINT = "pip install 'gpuscale[plot]'"
PHASE_COLORS = ("#2ca02c", "#d62728", "#1f77b4", "#ff7f0e")
UNSPLIT_COLOR = "#9e9e9e"


def plot_format(path: str | Path) -> str:
    """``svg`` or ``png`` from the file name, or a :class:`GpuscaleError`."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise GpuscaleError(
            f"--plot {path}: the file name must end in .svg or .png (the format is taken from it)"
        )
    return FORMATS[suffix]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "series"


def write_plot(chart: ScalingChart, path: str | Path, *, title: str | None = None) -> Path:
    """Draw ``chart`` into ``path`` (SVG or PNG by extension) and return the path."""
    fmt = plot_format(path)
    try:
        import matplotlib
    except ImportError:
        raise GpuscaleError(
            f"--plot needs matplotlib, which is not installed: {EXTRA_HINT}"
        ) from None
    matplotlib.use("Agg", force=True)  # no display needed, and no GUI toolkit imported
    from matplotlib import pyplot as plt
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    path = Path(path)
    with matplotlib.rc_context(
        {"svg.fonttype": "none", "svg.hashsalt": "gpuscale", "font.size": 9}
    ):  # text stays text; ids do not change between runs
        one = chart.one_count  # a few lines of text in place of the throughput chart
        if chart.has_split:
            fig, (top, bottom) = plt.subplots(
                2,
                1,
                figsize=(7.5, 5.0 if one else 7.0),
                height_ratios=(1, 3) if one else (3, 2),
                layout="constrained",
            )
            axes = (top, bottom)
        else:  # bars of whole steps would tell nothing: one line says why there are none
            fig, top = plt.subplots(1, 1, figsize=(7.5, 2.0 if one else 4.6), layout="constrained")
            axes = (top,)
            fig.supxlabel(
                f"Where the step time goes: {chart.split_note}",
                fontsize=8,
                color="0.35",
                x=0.02,
                ha="left",
                gid="no-split-note",
            )
        try:
            if chart.one_count:  # a single dot is no curve: what was measured, what next
                _draw_one_count(top, chart)
            else:
                _draw_throughput(top, chart)
            if chart.has_split:
                _draw_phases(bottom, chart)
            for ax in axes:
                ax.xaxis.set_minor_locator(NullLocator())
                ax.xaxis.set_minor_formatter(NullFormatter())
            top.xaxis.set_major_locator(FixedLocator(chart.counts))
            fig.suptitle(title or chart.title, fontsize=11)
            try:
                fig.savefig(path, format=fmt, dpi=150, metadata=_metadata(fmt))
            except OSError as exc:
                raise GpuscaleError(f"--plot {path}: cannot write it ({exc.strerror})") from None
        finally:
            plt.close(fig)
    return path


def _metadata(fmt: str) -> dict:
    # No creation date: the same sweep gives the same file.
    return {"Date": None} if fmt == "svg" else {}


def _draw_throughput(ax, chart: ScalingChart) -> None:
    from matplotlib.ticker import FixedLocator, FuncFormatter

    colors = [f"C{n}" for n in range(len(chart.series))]
    if chart.ideal:
        ax.plot(
            [n for n, _ in chart.ideal],
            [v for _, v in chart.ideal],
            linestyle="--",
            color="0.55",
            label="ideal (linear scaling)",
            gid="ideal",
        )
    for series, color in zip(chart.series, colors, strict=False):
        name = series.config if chart.several_configs else "throughput"
        ax.plot(
            [p.devices for p in series.points],
            [p.throughput for p in series.points],
            color=color,
            linewidth=1.2,
            label=name,
        )
        for p in series.points:
            gid = f"point-{_slug(series.config)}-{p.devices}"
            if p.predicted and p.has_range:
                ax.errorbar(
                    [p.devices],
                    [p.throughput],
                    yerr=[[p.throughput - p.low], [p.high - p.throughput]],
                    fmt="none",
                    ecolor=color,
                    capsize=3,
                    gid=f"range-{_slug(series.config)}-{p.devices}",
                )
            ax.plot(
                [p.devices],
                [p.throughput],
                linestyle="none",
                marker="o",
                markersize=6,
                markerfacecolor="white" if p.predicted else color,
                markeredgecolor=color,
                gid=gid,
            )
    chosen = chart.recommended
    if chart.decided:
        where = f", {chart.recommended_config}" if chart.several_configs else ""
        ax.plot(
            [chosen.devices],
            [chosen.throughput],
            linestyle="none",
            marker="o",
            markersize=14,
            markerfacecolor="none",
            markeredgecolor="green",
            markeredgewidth=2,
            label=f"recommended: {chosen.devices} device{'s' if chosen.devices > 1 else ''}{where}",
            gid="recommended",
        )
    if any(s.predicted for s in chart.series):
        cover = f"{chart.coverage:.0%} " if chart.coverage is not None else ""
        ax.plot(
            [],
            [],
            linestyle="none",
            marker="o",
            markerfacecolor="white",
            markeredgecolor="0.3",
            label="predicted" + (f" ({cover}range)" if chart.has_ranges else ""),
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    values = [p.throughput for s in chart.series for p in s.points]
    values += [v for s in chart.series for p in s.points for v in (p.low, p.high) if v]
    values += [v for _, v in chart.ideal]
    ax.yaxis.set_major_locator(FixedLocator(log_ticks(min(values), max(values))))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: short_number(v)))
    ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("devices (log2 scale)")
    ax.set_ylabel("throughput, samples/s (log scale)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    if chart.platform_note:
        import textwrap

        note = textwrap.fill(chart.platform_note, 100)
        ax.set_title(note, fontsize=7, color="0.35", loc="left")


def _draw_one_count(ax, chart: ScalingChart) -> None:
    """In place of a throughput chart of one dot (:attr:`ScalingChart.one_count`):
    the words the terminal and the scaling view say, and the platform's caveat."""
    import textwrap

    ax.set_axis_off()
    ax.text(
        0.0,
        0.5,
        textwrap.fill(chart.one_count_note, 80),
        transform=ax.transAxes,
        ha="left",
        va="center",
        fontsize=10,
        gid="one-count-note",
    )
    if chart.platform_note:
        ax.set_title(textwrap.fill(chart.platform_note, 100), fontsize=7, color="0.35", loc="left")


def _draw_phases(ax, chart: ScalingChart) -> None:
    bars = chart.bars
    labels = [f"{b.devices}" + (" (pred.)" if b.predicted else "") for b in bars]
    xs = list(range(len(bars)))
    bottom = [0.0] * len(bars)
    split = any(b.phases_s for b in bars)
    for i, (name, color) in enumerate(zip(PHASES, PHASE_COLORS, strict=False) if split else ()):
        heights = [(b.phases_s[i] * 1000 if b.phases_s else 0.0) for b in bars]
        ax.bar(xs, heights, bottom=bottom, color=color, label=name, width=0.6)
        bottom = [a + h for a, h in zip(bottom, heights, strict=False)]
    unsplit = [0.0 if b.phases_s else b.step_time_s * 1000 for b in bars]
    if any(unsplit):
        ax.bar(
            xs,
            unsplit,
            bottom=bottom,
            color=UNSPLIT_COLOR,
            width=0.6,
            label="step, not split"
            + (" (hatched: predicted)" if any(b.predicted for b in bars) else ""),
            hatch=["//" if b.predicted else "" for b in bars],
        )
    ax.set_xticks(xs, labels)
    ax.set_xlabel("devices")
    ax.set_ylabel("ms per step")
    ax.set_title(f"Where the step time goes ({chart.recommended_config})", fontsize=9, loc="left")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
