"""Charts over time, drawn with plotext (via textual-plotext's ``Plot``).

Plotext takes 10-20 ms to draw a plot, too slow for the UI thread at 10 frames
a second, so the charts are built in a worker thread from a snapshot and handed
to :class:`ChartPanel` as finished text (see ``GpuscaleApp``).
"""

from __future__ import annotations

import itertools

from rich.text import Text
from textual.widgets import Static
from textual_plotext.plot import Plot

from gpuscale.analysis.metrics import PARTS_TOLERANCE
from gpuscale.analysis.phase_report import parts_note, phase_items
from gpuscale.analysis.summary import (
    APPLY_WITH_INPUT,
    NO_STEP_TIMES_IN_RUN,
    RunSummary,
    without_step_times,
)
from gpuscale.events.schema import PhaseEvent
from gpuscale.formatting import format_duration_s, plural
from gpuscale.plots.terminal import legend_text
from gpuscale.ui.messages import ChartTexts
from gpuscale.ui.model import Snapshot

STEP_CHART = "chart-steps"
BREAKDOWN_CHART = "chart-breakdown"
UTIL_CHART = "chart-util"
CHART_TITLES = {
    STEP_CHART: "Step time (ms)",
    BREAKDOWN_CHART: "Phases (ms)",
    UTIL_CHART: "Utilization (%)",
}
PHASE_COLORS = ("green", "red", "blue", "orange")
LINE_COLORS = ("cyan", "orange", "green", "magenta", "blue", "red", "yellow", "gray")


def _new_plot(width: int, height: int) -> Plot:
    plot = Plot()
    plot.theme("clear")
    plot.plotsize(max(width, 10), max(height, 4))
    return plot


def _empty(width: int, message: str) -> Text:
    return Text(message, style="dim")


def _no_utilization(snap: Snapshot, width: int, samples: int) -> Text:
    """What the Utilization chart says with nothing to draw: while the run goes on,
    that the samples are coming; once it is over, how few fell within it (a fit of a
    second or two between two samples), not a wait for samples that never come."""
    if snap.end is None:
        return _empty(width, "utilization appears after the first samples")
    if not samples:
        return _empty(width, "no utilization samples within the run")
    return _empty(
        width, f"{plural(samples, 'sample')} within the run: too few to draw utilization over time"
    )


def binned(xs: list[float], ys: list[float], max_points: int) -> tuple[list[float], list[float]]:
    """At most ``max_points`` points: consecutive groups of equal size averaged
    (x and y), so a long run costs no more to draw than the panel can show."""
    if len(xs) <= max_points:
        return xs, ys
    group = -(-len(xs) // max_points)
    out_x, out_y = [], []
    for start in range(0, len(xs), group):
        chunk_x, chunk_y = xs[start : start + group], ys[start : start + group]
        out_x.append(round(sum(chunk_x) / len(chunk_x)))  # whole steps on the axis
        out_y.append(sum(chunk_y) / len(chunk_y))
    return out_x, out_y


def whole_ticks(low: float, high: float, width: int) -> list[int]:
    """Round whole-number ticks (1, 2, 5 x 10^k apart) between ``low`` and ``high``,
    at least two where the span has two whole numbers, about one per 12 columns:
    step numbers and seconds read as whole numbers, where plotext's own ticks
    would be ``4.0 9.2 14.5``."""
    import math

    wanted = max(2, width // 12)
    first, last = math.ceil(low), math.floor(high)
    if last <= first:
        return [round(low)]
    chosen: list[int] = [first, last]
    for exp in range(0, len(str(last - first)) + 1):
        for mantissa in (1, 2, 5):
            step = mantissa * 10**exp
            ticks = list(range(math.ceil(low / step) * step, last + 1, step))
            if len(ticks) < 2:
                return chosen  # the last step that still gave two
            chosen = ticks
            if len(ticks) <= wanted:
                return chosen
    return chosen


def even_ticks(high: float, wanted: int) -> list[float]:
    """Ticks from 0 to at least ``high``, evenly spaced by 1, 2 or 5 x 10^k, about
    ``wanted`` of them (plotext's own y ticks for a bar chart can skip one:
    ``286.8 239.0 191.2 95.6``)."""
    import math

    if high <= 0:
        return [0.0, 1.0]
    raw = high / max(wanted - 1, 1)
    exp = math.floor(math.log10(raw))
    step = next(m * 10**exp for m in (1, 2, 5, 10) if m * 10**exp >= raw)
    return [n * step for n in range(math.ceil(high / step - 1e-9) + 1)]


def round_ticks(low: float, high: float, rows: int) -> list[float]:
    """Round ticks (1, 2 or 5 x 10^k apart) from at or below ``low`` to at or above
    ``high``, about one per two of the axis's ``rows`` (two to six): ``1000 2000
    3000 4000`` where plotext's own are ``1704.7 2672.3 3783.3``. A flat series
    (``low == high``) gets the round values either side of it."""
    import math

    wanted = max(2, min(6, (rows + 1) // 2))
    if high <= low:
        spread = abs(low) * 0.1 or 1.0
        low, high = low - spread, high + spread
    raw = (high - low) / (wanted - 1)
    exp = math.floor(math.log10(raw))
    for step in (m * 10.0**e for e in range(exp, exp + 3) for m in (1, 2, 5)):
        if step < raw:
            continue
        first, last = math.floor(low / step + 1e-9), math.ceil(high / step - 1e-9)
        if last - first + 1 <= wanted:
            return [round(n * step, 12) for n in range(first, last + 1)]
    return [low, high]  # not reached: some step of the three decades fits


def tick_label(value: float) -> str:
    """``120`` rather than ``120.0``; ``0.5`` where the ticks are fractions; ``1,500``
    with a thousands separator."""
    if abs(value - round(value)) < 1e-9:
        return f"{value:,.0f}"
    return f"{value:g}"


MIN_BAR_SLOTS = 8
"""The breakdown chart has room for at least this many bars: one probe is one
narrow bar, not a block filling the panel."""


def _whole_xticks(plot: Plot, xs: list[float], width: int) -> None:
    if xs:
        ticks = whole_ticks(min(xs), max(xs), width)
        plot.xticks(ticks, [str(t) for t in ticks])


def build_step_chart(
    snap: Snapshot, width: int, height: int, summary: RunSummary | None = None
) -> Text:
    """Step time against the step number (the last steps kept by the model,
    warm-up steps left out once there are others, and labelled as warm-up while
    there are no others; averaged in groups when there are more than two per
    column). Throughput is not drawn in the same area (a second y axis on a
    narrow panel is unreadable): the recommendation panel has it."""
    if len(snap.steps_t) < 2:
        if not snap.steps_t and without_step_times(summary):
            return _empty(width, NO_STEP_TIMES_IN_RUN)
        return _empty(width, "step times appear here after the first steps")
    plot = _new_plot(width, height)
    keep = [i for i, warm in enumerate(snap.steps_warmup) if not warm]
    warmup_only = len(keep) < 2
    if warmup_only:  # only warm-up so far: show it rather than nothing, and say so
        keep = list(range(len(snap.steps_t)))
    steps = [float(snap.steps_t[i]) for i in keep]
    max_points = max(2 * (width - 16), 8)
    x, y = binned(steps, [snap.step_times_s[i] * 1000 for i in keep], max_points)
    plot.plot(x, y, color="cyan", marker="braille")
    _whole_xticks(plot, x, width)
    yticks = round_ticks(min(y), max(y), height - PLOT_FRAME_ROWS)
    plot.ylim(yticks[0], yticks[-1])
    plot.yticks(yticks, [tick_label(t) for t in yticks])
    plot.xlabel("step (warm-up, not measured)" if warmup_only else "step")
    plot.ylabel("ms")
    return Text.from_ansi(plot.build(), no_wrap=True)


PHASE_NAMES = ("compute", "all-reduce", "apply", "input")
"""The breakdown chart's phases, in stacking order (colours: :data:`PHASE_COLORS`)."""
PHASE_LABELS = {
    "compute": "compute",
    "exposed all-reduce": "all-reduce",
    "apply": "apply",
    "apply + input": "apply",
    "input wait": "input",
}
"""The summary's phase labels (:func:`gpuscale.analysis.phase_report.phase_items`) as
the chart names them."""
UNRESOLVED_COLOR = "gray"
"""A phase the summary says is not resolved: drawn, but in no phase's colour."""


def unresolved_phases(summary: RunSummary | None) -> set[str]:
    """The chart's phases the summary's text calls "not resolved" (all of them where
    the probes' phases do not add up to the median step): the chart says so too."""
    if summary is None or not summary.phase_steps:
        return set()
    return {
        PHASE_LABELS[item.label]
        for item in phase_items(summary)
        if "not resolved" in item.value and item.label in PHASE_LABELS
    }


def probe_total_s(phase: PhaseEvent) -> float:
    """A probe's phases added up: compute + exposed all-reduce + apply + input wait."""
    return phase.compute_s + phase.allreduce_s + phase.apply_s + phase.input_s


def longer_than_step(phase: PhaseEvent, step_s: float | None) -> bool:
    """Whether a probe's phases add up to more than the median step ``step_s``
    beyond the tolerance the summary allows the parts
    (:data:`gpuscale.analysis.metrics.PARTS_TOLERANCE`): such a probe is not a split
    of the step, and the chart never draws a bar longer than the step."""
    return step_s is not None and probe_total_s(phase) > step_s * (1 + PARTS_TOLERANCE)


def build_breakdown_chart(
    snap: Snapshot, width: int, height: int, summary: RunSummary | None = None
) -> Text:
    """A stacked bar per probed step: compute, exposed all-reduce, apply, input; the
    legend on a line under the chart, never over the bars. With the run's
    ``summary`` the chart agrees with its text: a probe whose phases add up to more
    than the median step is not drawn (the axis says how many), and a phase the
    text calls not resolved is drawn grey, its legend saying so."""
    phases = snap.phases[-max(4, (width - 10) // 2) :]
    if not phases and without_step_times(summary):
        return _empty(width, NO_STEP_TIMES_IN_RUN)
    if not phases:
        return _empty(
            width, "the phase breakdown appears after the first probe (after the warm-up)"
        )
    step_s = summary.step_time_s if summary is not None else None
    drawn = [p for p in phases if not longer_than_step(p, step_s)]
    left_out = len(phases) - len(drawn)
    if not drawn:
        note = parts_note(summary) if summary is not None else None
        if note is not None:  # the summary's own reason, in its words (every view says it)
            return _empty(width, f"{note}: no bar drawn")
        who = "the probe adds" if left_out == 1 else f"each of the {left_out} probes here adds"
        longer = f"{who} up to more than the median step ({format_duration_s(step_s or 0.0)})"
        if summary is not None and not unresolved_phases(summary):
            # older probes than these split the step: the summary's phases stand
            return _empty(
                width,
                f"no bar drawn: {longer}; the summary's phases are the medians of all "
                f"{summary.phase_steps} probes",
            )
        return _empty(width, f"phases not resolved: {longer}: no bar drawn (see the summary)")
    unresolved = unresolved_phases(summary)
    colors = [
        UNRESOLVED_COLOR if name in unresolved else color
        for name, color in zip(PHASE_NAMES, PHASE_COLORS, strict=True)
    ]
    # one device exchanges nothing: what its probes timed as an exposed all-reduce is
    # noise (the summary counts it as 0: RunSummary.lone_exchange_s), no bar of it
    lone = summary is not None and summary.devices <= 1 and summary.lone_exchange_s is not None
    legend = None
    if height >= 8:
        # the Keras callback's probe cannot see the input wait: no bar, said so
        unmeasured = summary is not None and summary.input_s is None
        if unresolved >= set(PHASE_NAMES) - {"input"}:  # nothing of the split is known
            entries = [("█", UNRESOLVED_COLOR, "phases not resolved (see the summary)")]
            if "input" not in unresolved and not unmeasured:  # timed apart: still its own
                entries.append(("█", PHASE_COLORS[-1], "input"))
        else:
            entries = [
                ("█", color, f"{name}: not resolved" if name in unresolved else name)
                for name, color in zip(PHASE_NAMES, colors, strict=True)
            ]
            if unmeasured and summary is not None and summary.input_in_apply:
                # fit's wait for the batch is in the step, so in apply: as the text says
                entries[2] = (
                    entries[2][0],
                    entries[2][1],
                    entries[2][2].replace("apply", APPLY_WITH_INPUT),
                )
                del entries[-1]
            elif unmeasured:
                entries[-1] = ("█", UNRESOLVED_COLOR, "input: not measured")
            if lone:
                entries[1] = ("█", UNRESOLVED_COLOR, "all-reduce: none (1 device), noise not drawn")
        legend = legend_text(entries, width)
    plot = _new_plot(width, height - (len(legend.split()) if legend is not None else 0))
    series = [
        [p.compute_s * 1000 for p in drawn],
        [0.0 if lone else p.allreduce_s * 1000 for p in drawn],
        [p.apply_s * 1000 for p in drawn],
        [p.input_s * 1000 for p in drawn],
    ]
    plot.stacked_bar(
        [str(p.step) for p in drawn],
        series,
        color=colors,
        width=0.6 if len(drawn) < MIN_BAR_SLOTS else 0.8,
    )
    # Explicit ticks: plotext's own choice for string labels varies between runs.
    every = max(1, -(-len(drawn) * 5 // max(width - 8, 1)))
    plot.xticks(list(range(1, len(drawn) + 1, every)), [str(p.step) for p in drawn][::every])
    plot.xlim(0.4, max(len(drawn), MIN_BAR_SLOTS) + 0.6)  # a few probes: narrow bars, left
    totals = [sum(parts) for parts in zip(*series, strict=True)]
    yticks = even_ticks(max(totals), max(2, min(6, (height - 4) // 2)))
    plot.ylim(0, yticks[-1])
    plot.yticks(yticks, [tick_label(t) for t in yticks])
    label = "probed step"
    if len(drawn) == 1:  # "so far" only while more may come: not on a run that ended
        label += " (one probe)" if snap.end is not None else " (one probe so far)"
    if left_out:  # the longest form that fits (plotext drops a label wider than the plot)
        forms = (
            f"probed step; {left_out} longer than the median step: not drawn",
            f"probed step; {left_out} > median step: not drawn",
            f"{left_out} > median step: not drawn",
        )
        label = next((f for f in forms if len(f) <= width - 8), forms[-1])
    plot.xlabel(label)
    text = Text.from_ansi(plot.build().rstrip("\n"), no_wrap=True)
    if legend is not None:
        text.append("\n")
        text.append_text(legend)
    return text


def seconds_since(origin_t: float | None, ts) -> list[float]:
    """Event times as seconds since the run's origin (the first time given, when
    the run's origin is not known yet)."""
    ts = list(ts)
    if not ts:
        return []
    origin = origin_t if origin_t is not None else ts[0]
    return [t - origin for t in ts]


def since_start(origin_t: float | None, ts, values) -> tuple[list[float], list[float]]:
    """``(seconds since the run's origin, values)`` for the samples taken from the
    origin on: a script's samples before its run began (Python starting, TensorFlow
    loading, before its callback's start replaced gpuscale's provisional one) would
    sit at negative seconds on an axis labelled "since start"."""
    xs = seconds_since(origin_t, ts)
    kept = [(x, v) for x, v in zip(xs, values, strict=True) if x >= 0]
    return [x for x, _ in kept], [v for _, v in kept]


PLOT_FRAME_ROWS = 4
"""Rows of a plotext chart that are not its plot area: the frame's top and bottom,
the x tick labels and the x axis label."""


def percent_ticks(rows: int) -> list[int]:
    """Round percentages for a 0-100 axis of ``rows`` rows, one a row at most (two on
    a row would show one of them at random): 0, 25, 50, 75, 100 where they fit, else
    0, 50, 100, else 0, 100 (plotext's own are ``83.3 66.7 33.3 16.7``)."""
    if rows >= 5:
        return [0, 25, 50, 75, 100]
    if rows >= 3:
        return [0, 50, 100]
    return [0, 100]


BUSY_COLOR, SM_COLOR, TENSOR_COLOR = "cyan", "green", "magenta"
"""The activity chart's lines: NVML's utilization (busy), GPM's SM and tensor-core
activity (working)."""


def mean_over_time(
    series: list[tuple[list[float], list[float]]],
) -> tuple[list[float], list[float]]:
    """Several GPUs' ``(seconds, values)`` as one series, their mean at each sampling:
    samples within half a sampling period (the median gap between one GPU's samples)
    of the first of a group are one sampling (one sampler stamps its GPUs alike;
    several workers' samplers do not). Only from the latest of the GPUs' first samples
    on, where every GPU that still reports is in the mean."""
    # from the latest first sample on: each GPU keeps its last samples, and a GPU lost
    # early keeps older ones, whose "mean" would be that GPU alone
    gaps = sorted(b - a for xs, _ in series for a, b in itertools.pairwise(xs) if b > a)
    half = gaps[len(gaps) // 2] / 2 if gaps else 0.25
    since = max((xs[0] for xs, _ in series if xs), default=0.0) - half
    points = sorted(p for xs, ys in series for p in zip(xs, ys, strict=True) if p[0] > since)
    if not points:
        return [], []
    groups: list[list[tuple[float, float]]] = []
    for point in points:
        if groups and point[0] - groups[-1][0][0] < half:
            groups[-1].append(point)
        else:
            groups.append([point])
    xs = [sum(x for x, _ in g) / len(g) for g in groups]
    return xs, [sum(y for _, y in g) / len(g) for g in groups]


def activity_legend(width: int, gpus: int, tensor: bool, max_lines: int) -> Text:
    """The busy-and-working chart's legend on at most ``max_lines`` lines: ``⠶ busy
    ⠶ SM (GPM)  ⠶ tensor (GPM)``, shorter where that does not fit, and for several GPUs
    that the lines are their mean (``mean of 8 GPUs``), on the same line or the next."""
    long = [("⠶", BUSY_COLOR, "busy"), ("⠶", SM_COLOR, "SM (GPM)")]
    short = [("⠶", BUSY_COLOR, "busy"), ("⠶", SM_COLOR, "SM" if tensor else "SM (GPM)")]
    if tensor:
        long.append(("⠶", TENSOR_COLOR, "tensor (GPM)"))
        short.append(("⠶", TENSOR_COLOR, "tensor (GPM)"))
    note = f"mean of {gpus} GPUs" if gpus > 1 else None

    def line(entries, after: str = "") -> Text:
        text = legend_text(entries, 10**6)
        if after:
            text.append(after, style="dim")
        return text

    if note is None:
        forms = [[line(long)], [line(short)]]
    else:
        forms = [[line(long, f"  {note}")], [line(short, f", {note}")]]
        if max_lines >= 2:
            forms += [[line(long), line([], note)], [line(short), line([], note)]]
    for form in forms:
        if all(part.cell_len <= width for part in form):
            return Text("\n").join(form)
    last = forms[1][0] if note is None else line(short, f", {note}")
    last.no_wrap, last.overflow = True, "ellipsis"
    last.truncate(width, overflow="ellipsis")
    return last


def _percent_over_time(
    plot: Plot, times: list[float], width: int, plot_height: int, legend: Text | None
) -> Text:
    """A chart of percentages (0-100) against the seconds since the start, the lines
    already drawn on ``plot``: its axes, then ``legend`` under it, never over the lines."""
    plot.ylim(0, 100)
    yticks = percent_ticks(plot_height - PLOT_FRAME_ROWS)
    plot.yticks(yticks, [str(t) for t in yticks])
    _whole_xticks(plot, times, width)
    plot.xlabel("s since start")
    plot.ylabel("%")
    text = Text.from_ansi(plot.build().rstrip("\n"), no_wrap=True)
    if legend is not None:
        text.append("\n")
        text.append_text(legend)
    return text


Series = tuple[list[float], list[float]]


def activity_lines(snap: Snapshot, gpus: list) -> tuple[Series, Series, Series]:
    """``(busy, SM, tensor)``, each ``(seconds since the start, %)``: the GPU's own
    samples, or for several GPUs their mean at each sampling (:func:`mean_over_time`);
    the SM and tensor lines empty where no GPU reads GPM."""
    busy, sm, tensor = [], [], []
    for device in gpus:
        busy.append(since_start(snap.origin_t, device.util_history_t, device.util_history_pct))
        sm.append(since_start(snap.origin_t, device.gpm_history_t, device.sm_history_pct))
        read = [
            (t, v)
            for t, v in zip(device.gpm_history_t, device.tensor_history_pct, strict=True)
            if v is not None
        ]
        tensor.append(since_start(snap.origin_t, [t for t, _ in read], [v for _, v in read]))
    if len(gpus) == 1:
        return busy[0], sm[0], tensor[0]
    return mean_over_time(busy), mean_over_time(sm), mean_over_time(tensor)


def build_activity_chart(snap: Snapshot, gpus: list, width: int, height: int) -> Text:
    """Busy and working over time: NVML's utilization (any kernel running, copies and
    NCCL's included) beside GPM's SM and tensor-core activity, so a copy reads 100%
    busy with the tensor cores idle. One GPU: its lines; several: their mean (eight
    GPUs' three lines each would be a tangle; each card has its own)."""
    lines = activity_lines(snap, gpus)
    if not lines[0][0] and not lines[1][0]:
        return _no_utilization(snap, width, 0)
    has_tensor = bool(lines[2][0])
    legend = None
    if height >= 8:
        legend = activity_legend(width, len(gpus), has_tensor, 2 if height >= 12 else 1)
    legend_lines = len(legend.split()) if legend is not None else 0
    plot = _new_plot(width, height - legend_lines)
    times: list[float] = []
    for (xs, ys), color in zip(lines, (BUSY_COLOR, SM_COLOR, TENSOR_COLOR), strict=True):
        if xs:  # busy first: where working is as high, its line shows over it
            plot.plot(xs, ys, color=color, marker="braille")
            times += xs
    return _percent_over_time(plot, times, width, height - legend_lines, legend)


def build_util_chart(snap: Snapshot, width: int, height: int) -> Text:
    """Utilization of every GPU over its recent samples (host CPU when no GPU),
    against the seconds since the run's start (live and replay alike: the
    samples' own times). Where the GPUs read GPM (Hopper and newer), busy beside
    working instead: :func:`build_activity_chart`."""
    with_gpm = [d for d in snap.devices if d.kind == "gpu" and d.sm_history_pct]
    if with_gpm:
        gpus = [
            d for d in snap.devices if d.kind == "gpu" and (d.util_history_pct or d.sm_history_pct)
        ]
        return build_activity_chart(snap, gpus, width, height)
    legend_lines = 1 if height >= 8 else 0
    plot = _new_plot(width, height - legend_lines)
    plotted = False
    names: list[tuple[str, str, str]] = []
    gpus = [d for d in snap.devices if d.kind == "gpu" and d.util_history_pct]
    times: list[float] = []
    for n, device in enumerate(gpus):
        color = LINE_COLORS[n % len(LINE_COLORS)]
        xs, ys = since_start(snap.origin_t, device.util_history_t, device.util_history_pct)
        if not xs:
            continue
        plot.plot(xs, ys, color=color, marker="braille")
        names.append(("⠶", color, f"GPU{device.index}"))
        times += xs
        plotted = True
    host_samples = 0
    if not gpus:
        xs, ys = since_start(snap.origin_t, snap.host_cpu_history_t, snap.host_cpu_history_pct)
        host_samples = len(xs)
        if len(xs) >= 2:
            plot.plot(xs, ys, color="cyan", marker="braille")
            names.append(("⠶", "cyan", "host CPU"))
            times += xs
            plotted = True
    if not plotted:
        return _no_utilization(snap, width, host_samples)
    legend = util_legend(names, width) if legend_lines else None
    return _percent_over_time(plot, times, width, height - legend_lines, legend)


def util_legend(names: list[tuple[str, str, str]], width: int) -> Text:
    """One line naming every line drawn: ``⠶ GPU0  ⠶ GPU1 …`` where that fits, else
    ``GPU ⠶0 ⠶1 …`` (eight GPUs in 28 columns); cut at ``width`` only when even that
    does not fit."""
    legend = legend_text(names, width)
    if len(legend.split()) == 1 or not all(label.startswith("GPU") for *_, label in names):
        return legend.split()[0]
    compact = Text("GPU", no_wrap=True, overflow="ellipsis")
    for symbol, color, label in names:
        entry = legend_text([(symbol, color, label.removeprefix("GPU"))], width)  # "⠶ 0"
        compact.append(" ")
        compact.append_text(entry[: len(symbol)])
        compact.append_text(entry[len(symbol) + 1 :])
    compact.truncate(width, overflow="ellipsis")
    return compact


BUILDERS = {
    STEP_CHART: build_step_chart,
    BREAKDOWN_CHART: build_breakdown_chart,
    UTIL_CHART: build_util_chart,
}


def render_charts(
    snap: Snapshot, sizes: dict[str, tuple[int, int]], summary: RunSummary | None = None
) -> ChartTexts:
    """Every chart of ``sizes`` drawn from ``snap`` at its (width, height), the phase
    breakdown agreeing with the run's ``summary`` (see :func:`build_breakdown_chart`):
    call it off the UI thread, and show the result with :class:`ChartPanel`."""
    with_summary = (STEP_CHART, BREAKDOWN_CHART)  # what they say when no step will come
    texts = {
        chart_id: (
            BUILDERS[chart_id](snap, width, height, summary)
            if chart_id in with_summary
            else BUILDERS[chart_id](snap, width, height)
        )
        for chart_id, (width, height) in sizes.items()
    }
    return ChartTexts(snap.version, texts, dict(sizes))


class ChartPanel(Static, can_focus=True):
    """Shows a chart built elsewhere (see the module docstring)."""

    def __init__(self, chart_id: str) -> None:
        super().__init__(id=chart_id, classes="chart")
        self.border_title = CHART_TITLES[chart_id]
