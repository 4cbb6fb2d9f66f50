"""The terminal output of `gpuscale recommend`: one table per configuration, then
the recommendation (rich, no Textual)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpuscale.analysis.recommend import Recommendation
from gpuscale.analysis.sweep import Sweep
from gpuscale.commands.recommend_chart import print_chart
from gpuscale.formatting import (
    format_duration_s,
    format_fraction_pct,
    format_number,
    format_rate_bytes_s,
)


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
            title=f"{model.config} ({scaling}; exchange: {model.exchange})",
            title_justify="left",
        )
        for name in ("N", "step time", "samples/s", "speedup", "efficiency", "exposed comm", ""):
            table.add_column(name, justify="left" if name == "" else "right")
        for r in rows:
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
            table.add_row(
                str(r.devices),
                format_duration_s(r.step_time_s),
                format_number(r.throughput, ",.0f"),
                format_number(r.speedup, ".2f", "x"),
                format_fraction_pct(r.efficiency),
                comm,
                mark,
                style=style,
            )
        console.print(table)
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
    console.print()
    console.print(
        Text(
            f"Recommendation: {verdict}", style="bold green" if not rec.predicted else "bold yellow"
        )
    )
    if rec.speedup is not None and rec.devices > 1:
        console.print(Text(f"Expected speedup {rec.speedup:.2f}x over {rec.baseline}."))
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
