"""The terminal output of `gpuscale recommend`: one table per configuration, then
the recommendation (rich, no Textual)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text as _RichText

from gpuscale.analysis.recommend import Recommendation
from gpuscale.analysis.sweep import Sweep
from gpuscale.commands.recommend_chart import print_chart
from gpuscale.formatting import (
    format_duration_s,
    format_fraction_pct,
    format_number,
    format_rate_bytes_s,
    markup_literal,
    visible,
)


def with_range(
    value: float | None, low: float | None, high: float | None, spec: str, suffix: str = ""
) -> str:
    """``1,104 (905\u20131,150)``: a value and, when it has one, its range."""
    text = format_number(value, spec, suffix)
    if value is None or low is None or high is None:
        return text
    return f"{text} ({format(low, spec)}\u2013{format(high, spec)}{suffix})"


def pct_with_range(value: float | None, low: float | None, high: float | None) -> str:
    text = format_fraction_pct(value)
    if value is None or low is None or high is None:
        return text
    return f"{text} ({format_fraction_pct(low)}\u2013{format_fraction_pct(high)})"


ROWS_SHOWN = 12
"""Rows shown at each end of a long table (a sweep of thousands of counts)."""


def _rows_shown(rows: list, chosen: int | None) -> set[int]:
    if len(rows) <= 2 * ROWS_SHOWN + 1:
        return set(range(len(rows)))
    keep = set(range(ROWS_SHOWN)) | set(range(len(rows) - ROWS_SHOWN, len(rows)))
    keep |= {i for i, r in enumerate(rows) if r.devices == chosen}
    return keep


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
    console = console or Console()
    if heading:
        console.print(Text(heading, style="bold"))
    for source in dict.fromkeys(sweep.sources):
        console.print(Text(f"from {source}", style="dim"))
    chosen_key = (rec.config, rec.devices)
    for model in rec.models:
        rows = [r for r in rec.table if r.config == model.config]
        scaling = (
            f"weak scaling, {model.per_replica_batch} samples per device"
            if model.scaling == "weak"
            else f"strong scaling, global batch {model.global_batch}"
        )
        table = Table(
            title=markup_literal(f"{model.config} ({scaling}; exchange: {model.exchange})"),
            title_justify="left",
        )
        costs = {c.devices: c for c in rec.costs if c.config == model.config}
        names = ["N", "step time", "samples/s", "speedup", "efficiency", "exposed comm", ""]
        if costs:
            names.insert(6, "cost/M samples")
        for name in names:
            table.add_column(name, justify="left" if name == "" else "right")
        keep = _rows_shown(rows, rec.devices if model.config == rec.config else None)
        for i, r in enumerate(rows):
            if i not in keep:
                if i - 1 in keep:
                    table.add_row(
                        "...",
                        "",
                        f"{next((j for j in range(i, len(rows)) if j in keep), len(rows)) - i} rows",
                        "",
                        "",
                        "",
                        "not shown (--json has them)",
                    )
                continue
            mark = "predicted" if r.predicted else "measured"
            limit = rec.device_limit
            if not r.predicted and limit is not None and r.devices > limit:
                mark = "measured, above limit"
            if (r.config, r.devices) == chosen_key:
                mark += "  <- recommended"
            comm = format_fraction_pct(r.comm_share)
            if r.comm_share is not None and (r.predicted or r.allreduce_s is None):
                comm += " (model)"
            style = "dim italic" if r.predicted else ""
            if (r.config, r.devices) == chosen_key:
                style = "bold green"
            cells = [
                str(r.devices),
                format_duration_s(r.step_time_s),
                with_range(r.throughput, r.throughput_low, r.throughput_high, ",.0f"),
                with_range(r.speedup, r.speedup_low, r.speedup_high, ".2f", "x"),
                pct_with_range(r.efficiency, r.efficiency_low, r.efficiency_high),
                comm,
                mark,
            ]
            if costs:
                c = costs.get(r.devices)
                cells.insert(6, f"{c.per_million_samples:,.2f} ({c.relative:.2f}x)" if c else "")
            table.add_row(
                *cells,
                style=style,
            )
        console.print(table)
        coverages = {r.coverage for r in rows if r.predicted and r.coverage is not None}
        if coverages:
            console.print(
                Text(
                    f"  predicted: value (low\u2013high), a {format_fraction_pct(max(coverages))} "
                    "range calibrated on published scaling tables (README: How good are the "
                    "predictions?)",
                    style="dim",
                )
            )
        fit = (
            "unchecked: it passes through every measured point"
            if model.fit_error is None
            else f"within {format_fraction_pct(model.fit_error, 1)} of the measured points"
        )
        bandwidth = (
            f", effective bandwidth {format_rate_bytes_s(model.bandwidth_bytes_s)}"
            if model.bandwidth_bytes_s
            else ""
        )
        if model.predicts:
            console.print(
                Text(
                    f"  model from {model.basis}{bandwidth}; fit {fit}",
                    style="dim",
                )
            )
    if chart:
        print_chart(rec, console)
    verdict = "SINGLE device" if rec.verdict == "single" else f"MULTI: {rec.devices} devices"
    if len(rec.models) > 1:
        verdict += f" with '{rec.config}'"
    if rec.predicted:
        verdict += " (predicted)"
    if rec.verdict == "none":
        verdict = (
            f"NONE yet: measured at {rec.devices} device{'s' if rec.devices != 1 else ''} only"
        )
    console.print()
    console.print(
        Text(
            f"Recommendation: {verdict}",
            style="bold green" if not rec.predicted and rec.verdict != "none" else "bold yellow",
        )
    )
    if rec.speedup is not None and rec.devices > 1 and rec.verdict != "none":
        console.print(Text(f"Expected speedup {rec.speedup:.2f}x over {rec.baseline}."))
    if rec.measure_next:
        console.print(Text(rec.measure_next[0].upper() + rec.measure_next[1:] + ".", style="bold"))
    console.print(
        Text(
            f"Rule: add devices while each doubling keeps a marginal efficiency of at least "
            f"{format_fraction_pct(rec.min_efficiency)} (--min-efficiency).",
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
