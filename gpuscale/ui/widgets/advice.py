"""The recommendation panel: what the measured numbers say so far, and how sure.

Every number and every judgement (confidence level, what is worth a warning)
comes from ``gpuscale.analysis`` (the same code as ``gpuscale recommend``); this
module only words and styles it.
"""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from gpuscale.analysis.confidence import comm_share_is_notable, run_confidence
from gpuscale.analysis.recommend import Recommendation
from gpuscale.analysis.recommend import recommend_from_run as predict_from_run
from gpuscale.analysis.summary import RunSummary
from gpuscale.formatting import (
    format_bytes,
    format_fraction_pct,
    format_ms,
    format_number,
    format_rate_bytes_s,
)

__all__ = ["AdvicePanel", "advice_content", "predict_from_run"]


def _row(label: str, value: str | Content, style: str = "") -> Content:
    value = value if isinstance(value, Content) else Content.styled(value, style)
    return Content.assemble((f"{label:<13}", "bold"), value)


def _predictions(rec: Recommendation) -> list[Content]:
    measured = [row for row in rec.table if not row.predicted]
    predicted = [row for row in rec.table if row.predicted and row.speedup]
    if not measured or not predicted:
        return []
    base = measured[0].devices
    parts = [
        f"{row.devices}: {row.speedup:.2f}x"
        + (
            f" ({row.speedup_low:.2f}–{row.speedup_high:.2f})"
            if row.speedup_low is not None and row.speedup_high is not None
            else ""
        )
        for row in predicted
    ]
    coverage = next((row.coverage for row in predicted if row.coverage), None)
    ranged = f" (low–high: {format_fraction_pct(coverage)} range)" if coverage else ""
    lines = [
        _row("predicted", " · ".join(parts)),
        Content.styled(
            f"N: speedup over this run's {base} device{'s' if base > 1 else ''}{ranged}, "
            "from this run alone",
            "$text-muted",
        ),
    ]
    if rec.platform_note:
        lines.append(Content.styled(rec.platform_note, "$text-warning"))
    return lines


def advice_content(summary: RunSummary | None, rec: Recommendation | None = None) -> Content:
    """The panel's text for a summary (``None``: nothing measured yet): one fact
    a line, short enough for a 36-column panel."""
    if summary is None or summary.steps_total == 0:
        return Content.styled("Waiting for the first steps…", "$text-muted")
    s = summary
    lines = [
        _row("step time", f"{format_ms(s.step_time_s)} median"),
        _row("throughput", f"{format_number(s.throughput_samples_s, ',.0f')} samples/s"),
    ]
    if s.phase_steps:
        comm_style = "$text-warning" if comm_share_is_notable(s.comm_share) else ""
        ratio = (
            format_number(s.compute_comm_ratio, ".1f")
            if s.compute_comm_ratio
            else "no comm exposed"
        )
        lines += [
            _row("compute", format_ms(s.compute_s), "green"),
            _row(
                "all-reduce",
                f"{format_ms(s.allreduce_s)} ({format_fraction_pct(s.comm_share)}) exposed",
                comm_style,
            ),
            _row("apply", format_ms(s.apply_s)),
            _row("input wait", f"{format_ms(s.input_s)} ({format_fraction_pct(s.input_share)})"),
            _row("compute:comm", ratio),
        ]
        if s.busbw_bytes_s:
            lines.append(
                _row(
                    "busbw",
                    f"{format_rate_bytes_s(s.busbw_bytes_s)} ({format_bytes(s.payload_bytes)}/step)",
                )
            )
    else:
        lines.append(Content.styled("phase breakdown: not measured yet", "$text-muted"))
    if s.devices == 1:
        lines.append(
            Content.styled(
                "1 device: nothing to all-reduce; `gpuscale recommend` sweeps counts", "$text-muted"
            )
        )
    if rec is not None:
        lines += _predictions(rec)
    trust = run_confidence(s)
    style = {"low": "$text-warning", "none": "$text-muted"}.get(trust.level, "$text-success")
    lines.append(_row("confidence", trust.level, f"bold {style}"))
    lines.append(Content.styled(trust.reason, "$text-muted"))
    return Content("\n").join(lines)


class AdvicePanel(VerticalScroll, can_focus=True):
    """Scrollable so nothing is lost on a small terminal."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.body = Static(
            Content.styled("Waiting for the first steps…", "$text-muted"), id="advice-body"
        )

    def compose(self):
        yield self.body

    def show(
        self, summary: RunSummary | None, recommendation: Recommendation | None, final: bool
    ) -> None:
        self.border_title = "Final summary" if final else "Recommendation (so far)"
        self.body.update(advice_content(summary, recommendation))
