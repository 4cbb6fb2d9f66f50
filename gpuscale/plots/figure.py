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

No two tick labels of an axis overlap: the throughput axis has round ticks that
frame the data (as the terminal chart's: never a data value next to a round one,
``200`` on ``202``), and where an axis's labels still would (many device counts,
``128`` and ``256`` under their bars) some are left out (:func:`_keep_labels_apart`).
"""

from __future__ import annotations

import math
import re
import textwrap
from pathlib import Path

from gpuscale.errors import GpuscaleError
from gpuscale.plots.scaling import ScalingChart, log_ticks, short_number

FORMATS = {".svg": "svg", ".png": "png"}
EXTRA_HINT = "pip install 'gpuscale[plot]'"
PHASE_COLORS = ("#2ca02c", "#d62728", "#1f77b4", "#ff7f0e")
UNSPLIT_COLOR = "#9e9e9e"
NOTE_WRAP_CHARS = 100
"""The note in place of the phase bars wraps at this many characters (inside the
figure's 7.5 inches at its 8 points)."""


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
                textwrap.fill(
                    f"Where the step time goes: {chart.split_note}", NOTE_WRAP_CHARS
                ),  # a note of many probed counts ran off the figure's right edge
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
            _keep_labels_apart(fig)
            try:
                fig.savefig(path, format=fmt, dpi=150, metadata=_metadata(fmt))
            except OSError as exc:
                raise GpuscaleError(f"--plot {path}: cannot write it ({exc.strerror})") from None
        finally:
            plt.close(fig)
    return path


LABEL_GAP_PT = 2.0
"""The least room between two tick labels of an axis, in points."""


def _keep_labels_apart(fig) -> None:
    """Lay ``fig`` out and, on every axis whose major tick labels would overlap
    (or come closer than :data:`LABEL_GAP_PT`), leave out the labels that come too
    close to one kept before them (from the axis's start; its last label is kept,
    in place of those too close before it; on a log axis its decades first, the others
    where they fit between them), so none is drawn on another. The ticks stay."""
    fig.draw_without_rendering()  # constrained layout: where each label lands
    renderer = fig.canvas.get_renderer()
    gap = LABEL_GAP_PT * fig.dpi / 72
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            vertical = axis is ax.yaxis
            low, high = sorted(axis.get_view_interval())
            shown = sorted(
                (
                    (tick.get_loc(), tick.label1.get_window_extent(renderer))
                    for tick in axis.get_major_ticks()
                    if tick.label1.get_visible()
                    and tick.label1.get_text()
                    and low <= tick.get_loc() <= high
                ),
                key=lambda item: item[1].y0 if vertical else item[1].x0,
            )
            decade = _is_decade if axis.get_scale() == "log" else None
            kept = _apart(shown, gap, vertical, prefer=decade)
            if len(kept) < len(shown):
                _label_only(axis, {loc for loc, _ in kept})


def _is_decade(value: float) -> bool:
    """A power of ten (``1k``, ``10k``): a log axis's labels to keep first."""
    return value > 0 and abs(math.log10(value) - round(math.log10(value))) < 1e-9


def _apart(shown: list, gap: float, vertical: bool, prefer=None) -> list:
    """Of ``shown`` (``(value, box)`` in order along the axis), those whose labels
    keep ``gap`` (pixels) between them: from the first on, then the last in place of
    the kept ones too close before it. With ``prefer`` (a log axis: its decades) and
    two or more labels it prefers, those are chosen so first, then every other label
    that keeps its distance from them (a log axis lost ``1k``, ``10k`` and ``100k``
    to ``500``, ``5k`` and ``50k`` kept before them)."""

    def clear(a, b) -> bool:
        return (b.y0 - a.y1 if vertical else b.x0 - a.x1) >= gap

    preferred = [item for item in shown if prefer is not None and prefer(item[0])]
    if len(preferred) < 2:
        return _first_and_last_apart(shown, clear)
    kept = _first_and_last_apart(preferred, clear)
    for item in shown:
        if item in kept:
            continue
        before = [k for k in kept if shown.index(k) < shown.index(item)]
        after = [k for k in kept if shown.index(k) > shown.index(item)]
        if all(clear(k[1], item[1]) for k in before) and all(clear(item[1], k[1]) for k in after):
            kept.append(item)
    return sorted(kept, key=shown.index)


def _first_and_last_apart(shown: list, clear) -> list:
    if len(shown) < 2:
        return shown
    kept = [shown[0]]
    for item in shown[1:]:
        if clear(kept[-1][1], item[1]):
            kept.append(item)
    last = shown[-1]
    if kept[-1] is not last:
        while len(kept) > 1 and not clear(kept[-1][1], last[1]):
            kept.pop()
        if clear(kept[-1][1], last[1]):
            kept.append(last)
    return kept


def _label_only(axis, keep: set) -> None:
    """``axis``'s major tick labels as before at the values in ``keep``, none elsewhere."""
    from matplotlib.ticker import Formatter

    own = axis.get_major_formatter()

    class Some(Formatter):
        def set_locs(self, locs):
            own.set_locs(locs)
            super().set_locs(locs)

        def __call__(self, x, pos=None):
            return own(x, pos) if x in keep else ""

        def get_offset(self):
            return own.get_offset()

    axis.set_major_formatter(Some())


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
    # round ticks that frame the data, as the terminal chart's (never the data's own
    # ends beside a round value: 200 drawn on 202), and the axis reaching them
    ticks = log_ticks(min(values), max(values), widen=True)
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    low, high = min(ticks[0], *values), max(ticks[-1], *values)
    pad = (high / low) ** 0.05 if high > low else 1.1  # matplotlib's own margin
    ax.set_ylim(low / pad, high * pad)
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
    labels = [f"{b.devices}" + ("\n(pred.)" if b.predicted else "") for b in bars]
    xs = list(range(len(bars)))
    bottom = [0.0] * len(bars)
    split = any(b.phases_s for b in bars)
    names = chart.phase_names  # PHASES, apply + input where fit's wait is in apply
    for i, (name, color) in enumerate(zip(names, PHASE_COLORS, strict=False) if split else ()):
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
