"""The terminal output of `gpuscale recommend`: one table per configuration, then
the recommendation (rich, no Textual)."""

from __future__ import annotations

from typing import NamedTuple

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text as _RichText

from gpuscale.analysis.decide import MIN_GAIN_PER_DOUBLING, expected_speedup, table_base
from gpuscale.analysis.explain import bandwidth_text
from gpuscale.analysis.phase_report import count_precision_text, precision_meaning
from gpuscale.analysis.predict import borrowed
from gpuscale.analysis.recommend import Recommendation
from gpuscale.analysis.sweep import Sweep, exposed_unresolved, phases_unresolved
from gpuscale.commands.console import layout_width, print_at_width, text_console
from gpuscale.commands.recommend_chart import print_chart
from gpuscale.formatting import (
    format_cost,
    format_duration_s,
    format_fraction_pct,
    format_number,
    format_pct_with_range,
    format_range,
    format_share_halfwidth,
    markup_literal,
    plural,
    visible,
)
from gpuscale.formatting import format_with_range as with_range

EXPOSED_SHARE_MEANS = (
    "exposed comm: the exposed all-reduce over the median step (the share run and replay say)"
)
ONE_DEVICE_SHARE = "; 0% at 1 device: one device has no gradients to exchange"
"""Added to :data:`EXPOSED_SHARE_MEANS` when a measured 1-device row is shown."""
"""Said under a table with a measured exposed share: which whole it is a share of."""


def measured_share(point, long: bool = True) -> str:
    """A measured exposed share with how well it is known: ``12% ±2 (14 probes)``
    (``12% ±2 (14)`` short), ``not resolved (14 probes)`` where the exposed
    all-reduce is within its own noise (never a 0 % that is noise), and the
    share alone where nothing says how it was measured (a published point) or
    nothing is exchanged (one device)."""
    text = format_fraction_pct(point.comm_share)
    probes, err, step = point.probes, point.allreduce_err_s, point.step_time_s
    if not probes or point.devices <= 1:
        return text
    count = (f" ({plural(probes, 'probe')})") if long else f" ({probes})"
    if exposed_unresolved(point):
        # phases that did not add up, or an exchange within its noise (or 0 from
        # fewer than 3 probes): the words of the run's own summary
        return "not resolved" + count
    if err is None or not step:  # fewer than 3 probes: no range
        return text + count
    return f"{text} ±{format_share_halfwidth(err, step)}{count}"


def share_step_lines(rows: list) -> list[str]:
    """Under the table, for each row whose exposed share is of another step than the
    one shown beside it (a count of several runs, probed in some: the share is of
    theirs, :attr:`~gpuscale.analysis.sweep.SweepPoint.share_step_s`), which step
    it is of; nothing where the two print alike."""
    lines = []
    for r in rows:
        own = r.share_step_s
        if (
            own is None
            or r.predicted
            or r.comm_share is None
            or exposed_unresolved(r)
            or format_duration_s(own) == format_duration_s(r.step_time_s)
        ):
            continue
        lines.append(
            f"exposed comm at {plural(r.devices, 'device')}: "
            f"{format_fraction_pct(r.comm_share)} of {format_duration_s(own)}, the step of the "
            f"runs that probed it ({plural(r.probes or 0, 'probe')}); its "
            f"{format_duration_s(r.step_time_s)} is the median of all its runs"
        )
    return lines


def precision_lines(rec: Recommendation, sweep: Sweep) -> list[str]:
    """With ``--precision``: for each measured count, whether its step time and
    exposed share reached it, what they reached (±), in how many counted steps,
    and for a count that ran out of ``--steps`` first, about how many more steps
    would reach it (the words of ``run``'s summary:
    :func:`gpuscale.analysis.phase_report.precision_words`); then how long the
    whole sweep took. Empty when no count was run with ``--precision`` and the
    sweep's time is not known (``--from``)."""
    rows = [r for r in rec.table if not r.predicted and r.precision_asked is not None]
    lines: list[str] = []
    if rows:
        asked = {r.precision_asked for r in rows}
        one = len(asked) == 1
        if one:
            lines.append(
                f"Precision asked: \u00b1{format_fraction_pct(rows[0].precision_asked, 1)}, "
                f"{precision_meaning(rows[0].precision_asked)}; each count run until known "
                "to it, --steps at most:"
            )
        else:
            lines.append("Precision asked (95% ranges), each count run until known to it:")
        several = len({r.config for r in rows}) > 1
        for r in rows:
            lines.append("  " + count_precision_text(r, several=several, with_asked=not one))
    if sweep.wall_s is not None:
        runs = len({(p.config, p.devices) for p in sweep.points})
        lines.append(
            f"The sweep took {format_duration_s(sweep.wall_s)} "
            f"({plural(runs, 'run')}, TensorFlow's start included)."
        )
    return lines


ROWS_SHOWN = 12
"""Rows shown at each end of a long table (a sweep of thousands of counts)."""


def predictions_reach_line(rec: Recommendation, sweep: Sweep) -> str | None:
    """How far the predicted rows go and why: a live sweep knows the machine's
    devices and predicts no further, as does ``--from`` of its recordings (format
    1.4 on, where they say it) or of a sweep file that says it; other recordings
    do not say how many devices their machine had, so ``--from`` predicts up to the
    default limit, and the line says why its table may differ from the live one.
    ``None`` where the sweep predicted nothing."""
    predicted = [r.devices for r in rec.table if r.predicted]
    measured = [r.devices for r in rec.table if not r.predicted]
    if not measured:
        return None
    top = max(measured)
    if sweep.available_devices and rec.device_limit == sweep.available_devices:
        if predicted or top < sweep.available_devices:
            return None  # the machine has more devices than measured: its rows say so
        n = sweep.available_devices
        return (
            f"No predictions past the {plural(n, 'device')} available (this machine's, or "
            "what the recorded sweep or sweep file says), all measured; --max-devices N "
            "predicts further"
        )
    if predicted and rec.device_limit is None and not sweep.available_devices:
        return (
            f"Predicted up to {max(predicted)} devices: the input does not say how many "
            "devices its machine has (--max-devices N stops there; a live sweep stops at the "
            "machine's own)"
        )
    return None


def _rows_shown(rows: list, chosen: int | None) -> set[int]:
    if len(rows) <= 2 * ROWS_SHOWN + 1:
        return set(range(len(rows)))
    keep = set(range(ROWS_SHOWN)) | set(range(len(rows) - ROWS_SHOWN, len(rows)))
    keep |= {i for i, r in enumerate(rows) if r.devices == chosen}
    return keep


class Column(NamedTuple):
    """One column of the table as text: its header and one cell per row."""

    header: str
    cells: list[str]
    justify: str = "right"


class Layout(NamedTuple):
    """How much the table says, from all of it (wide terminals) to the least
    that still answers the question (80 columns and less)."""

    ranges_inline: bool
    """Ranges inside the cells (``1,918 (1,056\u20132,157)``) of samples/s, speedup
    and efficiency; otherwise the samples/s range alone, in its own column."""
    step_time: bool
    long_marks: bool
    """``predicted``, ``measured``, ``23% (model)``; else ``pred.``, ``meas.``,
    ``~23%``, explained under the table."""
    long_recommended: bool
    """``<- recommended`` on the chosen row; else ``<-``, explained under the table."""
    exposed_comm: bool = True
    short_headers: bool = False
    """``eff.`` for ``efficiency`` (explained under the table): what 80 columns give up
    to keep the exposed comm column when its cells are long (``not resolved (19)``)."""


LAYOUTS = (
    Layout(ranges_inline=True, step_time=True, long_marks=True, long_recommended=True),
    Layout(ranges_inline=False, step_time=True, long_marks=True, long_recommended=True),
    Layout(ranges_inline=False, step_time=True, long_marks=True, long_recommended=False),
    Layout(ranges_inline=False, step_time=True, long_marks=False, long_recommended=False),
    Layout(ranges_inline=False, step_time=False, long_marks=True, long_recommended=False),
    Layout(ranges_inline=False, step_time=False, long_marks=False, long_recommended=False),
    Layout(False, step_time=False, long_marks=False, long_recommended=False, short_headers=True),
    Layout(False, step_time=False, long_marks=False, long_recommended=False, exposed_comm=False),
)
"""Tried in order; the first in which every cell of every table fits the terminal
on one line is used. A narrow terminal drops columns and shortens marks; it never
clips a number."""


def table_columns(
    rec: Recommendation, rows: list, costs: dict, layout: Layout
) -> tuple[list[Column], list[str]]:
    """The columns of one configuration's table in ``layout``, and the legend
    lines its short marks need (empty for the long marks)."""
    chosen_key = (rec.config, rec.devices) if rec.verdict != "none" else None
    limit = rec.device_limit
    long = layout.long_marks
    n, step, tput, rng, speed, eff, comm, cost, mark = ([] for _ in range(9))
    legend: dict[str, None] = {}
    unresolved = phases_unresolved(rows)
    for r in rows:
        if r is None:  # rows not shown
            for cells in (n, step, tput, rng, speed, eff, comm, cost, mark):
                cells.append("")
            n[-1] = "..."
            continue
        n.append(str(r.devices))
        step.append(format_duration_s(r.step_time_s))
        if layout.ranges_inline:
            tput.append(with_range(r.throughput, r.throughput_low, r.throughput_high, ",.0f"))
            speed.append(with_range(r.speedup, r.speedup_low, r.speedup_high, ".2f", "x"))
            eff.append(format_pct_with_range(r.efficiency, r.efficiency_low, r.efficiency_high))
        else:
            tput.append(format_number(r.throughput, ",.0f"))
            rng.append(format_range(r.throughput_low, r.throughput_high, ",.0f"))
            speed.append(format_number(r.speedup, ".2f", "x"))
            eff.append(format_fraction_pct(r.efficiency))
        share = format_fraction_pct(r.comm_share)
        if r.devices == 1 and not r.predicted and r.workers <= 1:
            pass  # nothing exchanged, measured or not: 0% (said under the table)
        elif (
            layout.exposed_comm
            and r.comm_share is not None
            and (r.predicted or r.allreduce_s is None)
        ):
            if long:
                share += " (model)"
            else:
                share = "~" + share
                legend["~ exposed comm estimated by the model"] = None
        elif layout.exposed_comm and r.predicted and r.comm_share is None and unresolved:
            share = "not resolved"  # as the measured counts it rests on
        elif layout.exposed_comm and (r.comm_share is not None or (r.probes and r.devices > 1)):
            share = measured_share(r, long)
            if not long and r.probes:
                legend["exposed comm: ± 95% range, (n) probes"] = None
        comm.append(share)
        if costs:
            c = costs.get(r.devices)
            if c is None:
                cost.append("")
            elif long and layout.ranges_inline and c.relative_low is not None:
                cost.append(
                    f"{format_cost(c.per_million_samples)} ({c.relative:.2f}x, {format_range(c.relative_low, c.relative_high, '.2f', 'x')})"
                )
            elif long:
                cost.append(f"{format_cost(c.per_million_samples)} ({c.relative:.2f}x)")
            else:
                cost.append(format_cost(c.per_million_samples))
        if r.predicted:
            text = "predicted" if long else "pred."
        elif limit is not None and r.devices > limit:
            text = "measured, above limit" if long else "above limit"
        else:
            text = "measured" if long else "meas."
        if (r.config, r.devices) == chosen_key:
            text += "  <- recommended" if layout.long_recommended else " <-"
            if not layout.long_recommended:
                legend["<- recommended"] = None
        mark.append(text)
    columns = [Column("N", n)]
    if layout.step_time:
        columns.append(Column("step time", step))
    columns.append(Column("samples/s", tput))
    if not layout.ranges_inline and any(rng):
        columns.append(Column("range", rng))
    columns += [
        Column("speedup", speed),
        Column("eff." if layout.short_headers else "efficiency", eff),
    ]
    if layout.short_headers:
        legend["eff. efficiency"] = None
    if layout.exposed_comm:
        columns.append(Column("exposed comm", comm))
    if costs:
        columns.append(Column("cost/M samples" if long else "cost/M", cost))
    columns.append(Column("", mark, "left"))
    if not long:
        if any(r is not None and r.predicted for r in rows):
            legend["pred. predicted, meas. measured"] = None
        else:
            legend["meas. measured"] = None
    return columns, list(legend)


def _cell_widths(columns: list[Column], wrap_headers: bool) -> list[int]:
    widths = []
    for col in columns:
        header = max(col.header.split(), key=cell_len, default="") if wrap_headers else col.header
        widths.append(max([cell_len(header), *(cell_len(c) for c in col.cells)]))
    return widths


def table_width(widths: list[int]) -> int:
    """Columns wide of a table of these column widths: one space of padding each
    side of a cell and a rule between columns and at the edges."""
    return sum(widths) + 3 * len(widths) + 1


def choose_layout(rec: Recommendation, tables: list[tuple[list, dict]], width: int) -> Layout:
    """The most complete layout in which every cell of every table (``(rows,
    costs)`` each) fits ``width`` on one line, headers wrapped at spaces if need
    be; the most compact one when none does. One layout for all the tables, so
    they read alike."""
    for layout in LAYOUTS:
        if all(
            table_width(_cell_widths(table_columns(rec, rows, costs, layout)[0], True)) <= width
            for rows, costs in tables
        ):
            return layout
    return LAYOUTS[-1]


def fit_columns(
    rec: Recommendation,
    rows: list,
    costs: dict,
    width: int,
    layout: Layout,
    wrap_headers: bool | None = None,
) -> tuple[list[Column], list[int], list[str]]:
    """The columns of one table in ``layout``, their widths (whole headers when
    they fit ``width``, else headers wrapped at spaces; ``wrap_headers`` decides it
    for all the tables at once) and the legend lines."""
    columns, legend = table_columns(rec, rows, costs, layout)
    widths = _cell_widths(columns, False)
    wrap = table_width(widths) > width if wrap_headers is None else wrap_headers
    if wrap:
        widths = _cell_widths(columns, True)
    return columns, widths, legend


def headers_wrap(
    rec: Recommendation, tables: list[tuple[list, dict]], width: int, layout: Layout
) -> bool:
    """Whether the tables' headers are wrapped at spaces: when any one table needs
    it, all of them are, so that the tables read alike (``step time`` on one line
    in one table and on two in the next, the seed-002 trial)."""
    return any(
        table_width(_cell_widths(table_columns(rec, rows, costs, layout)[0], False)) > width
        for rows, costs in tables
    )


def Text(text: str, style: str = "") -> _RichText:  # noqa: N802 - drop-in for rich's Text
    """Rich text of a line that may hold strings from data (model and config names,
    file paths, notes): control characters shown escaped, never sent raw."""
    return _RichText(visible(text), style=style)


def render(
    rec: Recommendation,
    sweep: Sweep,
    *,
    heading: str | None = None,
    console: Console | None = None,
    chart: bool = True,
) -> None:
    console = console or text_console()
    if heading:
        console.print(Text(heading, style="bold"))
    for source in dict.fromkeys(sweep.sources):
        console.print(Text(f"from {source}", style="dim"))
    chosen_key = (rec.config, rec.devices) if rec.verdict != "none" else None
    tables = []
    for model in rec.models:
        rows = [r for r in rec.table if r.config == model.config]
        costs = {c.devices: c for c in rec.costs if c.config == model.config}
        keep = _rows_shown(rows, rec.devices if model.config == rec.config else None)
        shown = [r if i in keep else None for i, r in enumerate(rows) if i in keep or i - 1 in keep]
        tables.append((model, rows, shown, costs, len(rows) - len(keep)))
    shown_tables = [(shown, costs) for _, _, shown, costs, _ in tables]
    width = layout_width(console)  # off a terminal: every column (COLUMNS still wins)
    layout = choose_layout(rec, shown_tables, width)
    wrap = headers_wrap(rec, shown_tables, width, layout)
    for model, rows, shown, costs, hidden in tables:
        scaling = (
            f"weak scaling, {model.per_replica_batch} samples per device"
            if model.scaling == "weak"
            else f"strong scaling, global batch {model.global_batch}"
        )
        base = table_base(rows)
        over = f"; speedup over its own {plural(base, 'device')}" if base else ""
        table = Table(
            title=markup_literal(f"{model.config} ({scaling}; exchange: {model.exchange}{over})"),
            title_justify="left",
        )
        columns, widths, legend = fit_columns(rec, shown, costs, width, layout, wrap)
        fits = table_width(widths) <= width
        for i, (col, w) in enumerate(zip(columns, widths, strict=True)):
            # Too narrow for any layout: rich shares out what there is (numbers fold
            # onto two lines, never end in an ellipsis), the device count kept whole.
            table.add_column(
                col.header,
                justify=col.justify,
                width=w if fits else None,
                min_width=w if i == 0 else None,
                overflow="fold",
            )
        for i, r in enumerate(shown):
            style = ""
            if r is not None and r.predicted:
                style = "dim italic"
            if r is not None and (r.config, r.devices) == chosen_key:
                style = "bold green"
            table.add_row(*(col.cells[i] for col in columns), style=style)
        print_at_width(console, table, width)
        if hidden:
            console.print(Text(f"  ... {hidden:,} rows not shown (--json has them)", style="dim"))
        if legend:
            console.print(Text("  " + "; ".join(legend), style="dim"))
        if any(col.header == "exposed comm" for col in columns) and any(
            r.devices > 1 and not r.predicted and (r.probes or r.comm_share) for r in rows
        ):
            one = any(r.devices == 1 and not r.predicted and r.workers <= 1 for r in rows)
            console.print(
                Text(f"  {EXPOSED_SHARE_MEANS}{ONE_DEVICE_SHARE if one else ''}", style="dim")
            )
            for line in share_step_lines(rows):
                console.print(Text(f"  {line}", style="dim"))
        coverages = {r.coverage for r in rows if r.predicted and r.coverage is not None}
        guesses = {
            r.coverage_basis
            for r in rows
            if r.predicted and r.coverage is None and r.throughput_low is not None
        }
        if coverages or guesses:
            shape = (
                "range: low\u2013high of the predicted samples/s"
                if any(col.header == "range" for col in columns)
                else "predicted: value (low\u2013high)"
            )
            # a guessed range (an exchange the published tables lack) says so, not 80 %
            # CPU logical devices, several machines: no published table has them
            lacking = sorted({b for r in rows if r.predicted and (b := borrowed(r))})
            said = (
                f"{format_fraction_pct(max(coverages))} ranges calibrated on published scaling tables"
                + (f" of GPUs, borrowed (none has {' or '.join(lacking)})" if lacking else "")
                if coverages
                else next(iter(guesses)) or "a guess, not a calibrated range"
            )
            console.print(
                Text(
                    f"  {shape}: {said} (README: How good are the predictions?)",
                    style="dim",
                )
            )
        fit = (
            "unchecked: it passes through every measured point"
            if model.fit_error is None
            else f"within {format_fraction_pct(model.fit_error, 1)} of the measured points"
        )
        rates = bandwidth_text(model, rows)
        bandwidth = f"; {rates}" if rates else ""
        if model.predicts:
            console.print(
                Text(
                    f"  model from {model.basis}{bandwidth}; fit {fit}",
                    style="dim",
                )
            )
    # About every table, so after all of them and their footnotes, apart.
    reach = predictions_reach_line(rec, sweep)
    after = precision_lines(rec, sweep)
    if reach or after:
        console.print()
    if reach:
        console.print(Text(reach, style="dim"))
    for line in after:
        console.print(Text(line, style="yellow" if "not reached" in line else ""))
    if chart:
        print_chart(rec, console)
    verdict = "SINGLE device" if rec.verdict == "single" else f"MULTI: {rec.devices} devices"
    if len(rec.models) > 1:
        verdict += f" with '{rec.config}'"
    if rec.predicted:
        verdict += " (predicted)"
    if rec.verdict == "none":
        verdict = f"NONE yet: measured at {plural(rec.devices, 'device')} only"
    console.print()
    console.print(
        Text(
            f"Recommendation: {verdict}",
            style="bold green" if not rec.predicted and rec.verdict != "none" else "bold yellow",
        )
    )
    expected = expected_speedup(rec)
    if expected:
        console.print(Text(expected + "."))
    if rec.gpus_note:
        console.print(Text(rec.gpus_note + ".", style="bold"))
    if rec.measure_next:
        console.print(Text(rec.measure_next[0].upper() + rec.measure_next[1:] + ".", style="bold"))
    asked = (
        f"--min-efficiency {format_fraction_pct(rec.min_efficiency)}, raised: more devices "
        f"must add at least {format_fraction_pct(MIN_GAIN_PER_DOUBLING)} samples/s per doubling"
        if rec.floor_raised
        else "--min-efficiency"
    )
    console.print(
        Text(
            f"Rule: add devices while each doubling keeps a marginal efficiency of at least "
            f"{format_fraction_pct(rec.floor)} ({asked}).",
            style="dim",
        )
    )
    console.print(Text("Why", style="bold"))
    for line in rec.reasons:
        console.print(Text(f"  - {line}"))
    if rec.advice:
        console.print(Text("What to try", style="bold"))
        for line in rec.advice:
            console.print(Text(f"  - {line}"))
    console.print(Text("Confidence", style="bold"))
    for line in rec.confidence:
        console.print(Text(f"  - {line}"))
    for note in dict.fromkeys(sweep.notes):
        console.print(Text(f"Note from the input: {note}", style="dim"))
