"""The recommendation panel: what the measured numbers say so far, and how sure.

Every number comes from ``gpuscale.analysis`` (the same code as ``gpuscale
recommend``); this module only words it.
"""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from gpuscale.analysis.recommend import NOISY_SPREAD, Recommendation
from gpuscale.analysis.summary import RunSummary
from gpuscale.events.schema import StartEvent
from gpuscale.ui import formatting as fmt

ENOUGH_STEPS = 20
"""Fewer counted steps than this and the medians are called preliminary."""


def predict_from_run(start: StartEvent | None, summary: RunSummary) -> Recommendation | None:
    """What ``gpuscale recommend`` says from this run alone (its predictions for
    other device counts rest on this one count); None until it can say anything."""
    if start is None or not summary.steps_counted:
        return None
    try:
        from gpuscale.analysis.recommend import recommend
        from gpuscale.analysis.sweep import point_from_summary

        return recommend([point_from_summary(summary, start, "live")])
    except Exception:  # not enough evidence yet (e.g. no throughput): say nothing
        return None


def _ms(value_s: float | None) -> str:
    return fmt.NA if value_s is None else f"{value_s * 1000:.1f} ms"


def _pct(share: float | None) -> str:
    return fmt.NA if share is None else f"{share * 100:.0f}%"


def confidence(summary: RunSummary) -> tuple[str, str]:
    """(level, reason): how far to trust the numbers, from the step count, the
    spread of step times and how many steps had their phases measured."""
    if summary.steps_counted == 0:
        return "none", "no measured steps yet"
    reasons = [f"{summary.steps_counted} steps"]
    level = "medium"
    if summary.steps_counted < ENOUGH_STEPS:
        level = "low"
        reasons[0] += f" (< {ENOUGH_STEPS})"
    if summary.spread is not None:
        reasons.append(f"spread {summary.spread * 100:.0f}%")
        if summary.spread > NOISY_SPREAD:
            level = "low"
    reasons.append(f"{summary.phase_steps} phase breakdowns")
    if summary.phase_steps == 0:
        level = "low"
    reasons.append(
        f"measured at {summary.devices} device{'s' if summary.devices != 1 else ''} only"
    )
    return level, ", ".join(reasons)


def _row(label: str, value: str | Content, style: str = "") -> Content:
    value = value if isinstance(value, Content) else Content.styled(value, style)
    return Content.assemble((f"{label:<13}", "bold"), value)


def _predictions(rec: Recommendation) -> list[Content]:
    measured = [row for row in rec.table if not row.predicted]
    predicted = [row for row in rec.table if row.predicted and row.speedup]
    if not measured or not predicted:
        return []
    base = measured[0].devices
    parts = [f"{row.devices}: {row.speedup:.2f}x" for row in predicted]
    return [
        _row("predicted", " · ".join(parts)),
        Content.styled(
            f"N: speedup at N devices vs {base}; from this run alone (unchecked)",
            "$text-muted",
        ),
    ]


def advice_content(summary: RunSummary | None, rec: Recommendation | None = None) -> Content:
    """The panel's text for a summary (``None``: nothing measured yet): one fact
    a line, short enough for a 36-column panel."""
    if summary is None or summary.steps_total == 0:
        return Content.styled("Waiting for the first steps…", "$text-muted")
    s = summary
    lines = [
        _row("step time", f"{_ms(s.step_time_s)} median"),
        _row("throughput", f"{fmt.number(s.throughput_samples_s, ',.0f')} samples/s"),
    ]
    if s.phase_steps:
        comm_style = "$text-warning" if (s.comm_share or 0) > 0.2 else ""
        ratio = (
            fmt.number(s.compute_comm_ratio, ".1f") if s.compute_comm_ratio else "no comm exposed"
        )
        lines += [
            _row("compute", _ms(s.compute_s), "green"),
            _row("all-reduce", f"{_ms(s.allreduce_s)} ({_pct(s.comm_share)}) exposed", comm_style),
            _row("apply", _ms(s.apply_s)),
            _row("input wait", f"{_ms(s.input_s)} ({_pct(s.input_share)})"),
            _row("compute:comm", ratio),
        ]
        if s.busbw_bytes_s:
            lines.append(
                _row("busbw", f"{fmt.rate(s.busbw_bytes_s)} ({fmt.size(s.payload_bytes)}/step)")
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
    level, reason = confidence(s)
    style = {"low": "$text-warning", "none": "$text-muted"}.get(level, "$text-success")
    lines.append(_row("confidence", level, f"bold {style}"))
    lines.append(Content.styled(reason, "$text-muted"))
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
