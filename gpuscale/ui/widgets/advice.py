"""The recommendation panel: what the measured numbers say so far, and how sure.

Every number and every judgement (confidence level, what is worth a warning)
comes from ``gpuscale.analysis`` (the same code as ``gpuscale recommend``); this
module only words and styles it. Every string goes through :func:`_text`, which
shows control characters escaped (:func:`gpuscale.formatting.visible`): the
analysis's sentences may quote model and configuration names from a recording,
and ``Content`` takes text as it is (no markup is parsed, nothing is stripped).
"""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from gpuscale.analysis.confidence import live_predictions, run_confidence
from gpuscale.analysis.gpu_activity import (
    busy_not_working,
    gpu_activity_text,
    held_down_text,
    imbalance_text,
)
from gpuscale.analysis.phase_report import (
    input_in_apply_note,
    parts_note,
    phase_items,
    phases_heading,
    precision_text,
    probes_text,
    throughput_text,
    wall_clock_text,
)
from gpuscale.analysis.recommend import Recommendation
from gpuscale.analysis.recommend import recommend_from_run as predict_from_run
from gpuscale.analysis.summary import NO_STEP_TIMES_IN_RUN, RunSummary, without_step_times
from gpuscale.analysis.sweep import SweepPoint
from gpuscale.formatting import (
    format_bytes,
    format_fraction_pct,
    format_ms,
    format_number,
    format_rate_bytes_s,
    visible,
)

__all__ = ["AdvicePanel", "advice_content", "advice_compact", "advice_parts", "predict_from_run"]


def _text(text: str, style: str = "") -> Content:
    """``text`` (possibly from data) as content: control characters escaped."""
    return Content.styled(visible(text), style)


def _row(label: str, value: str | Content, style: str = "") -> Content:
    """``label`` in bold, padded to :data:`LABEL_WIDTH` (a longer one: a space),
    then ``value``."""
    value = value if isinstance(value, Content) else _text(value, style)
    return Content.assemble((visible(label.ljust(LABEL_WIDTH - 1)) + " ", "bold"), value)


TOO_WIDE = 3.0
"""A predicted speedup whose range spans more than this factor (high over low)
is shown as its range alone, ``unknown``: a central figure inside 0.04–3.27x
tells a user nothing they could act on."""


def _predicted_speedup(row: SweepPoint) -> str:
    """``4: 1.78x (1.52–1.93)``, or ``4: unknown (0.04–3.27x)`` where the range is
    wider than :data:`TOO_WIDE`."""
    low, high = row.speedup_low, row.speedup_high
    if low is None or high is None:
        return f"{row.devices}: {row.speedup:.2f}x"
    if high > TOO_WIDE * max(low, 1e-9):
        return f"{row.devices}: unknown ({low:.2f}–{high:.2f}x)"
    return f"{row.devices}: {row.speedup:.2f}x ({low:.2f}–{high:.2f})"


def _predictions(rec: Recommendation) -> list[Content]:
    measured = [row for row in rec.table if not row.predicted]
    predicted = [row for row in rec.table if row.predicted and row.speedup]
    if not measured or not predicted:
        return []
    base = measured[0].devices
    parts = [_predicted_speedup(row) for row in predicted]
    coverage = next((row.coverage for row in predicted if row.coverage), None)
    guessed = any(r.coverage is None and r.speedup_low is not None for r in predicted)
    ranged = (
        f" (low–high: {format_fraction_pct(coverage)} range)"
        if coverage and not guessed
        else " (low–high: a guess, not a calibrated range)"
        if guessed
        else ""
    )
    lines = [
        _row("predicted", " · ".join(parts)),
        _text(
            f"N: speedup over this run's {base} device{'s' if base > 1 else ''}{ranged}, "
            "from this run alone",
            "$text-muted",
        ),
    ]
    if rec.platform_note:
        lines.append(_text(rec.platform_note, "$text-warning"))
    return lines


def advice_content(
    summary: RunSummary | None,
    rec: Recommendation | None = None,
    waiting: str | None = None,
    *,
    final: bool = False,
) -> Content:
    """The panel's text for a summary (``None``: nothing measured yet): one fact
    a line, short enough for a 36-column panel (``waiting``, ``final``:
    :func:`advice_parts`)."""
    facts, notes = advice_parts(summary, rec, waiting, final=final)
    return Content("\n").join(facts + notes)


LABEL_WIDTH = 13
"""Columns of a fact's label in the one-fact-a-line form (``_row``)."""

NO_STEP_TIMES = (
    "No step times: the script does not use gpuscale's callback. Add it to model.fit: "
    "from gpuscale.keras import ScalingMonitor, then callbacks=[ScalingMonitor()]"
)
"""Said in the summary pane of a script run without gpuscale's callback. The code
is in words of at most 28 columns (``callbacks=[ScalingMonitor()]``), so the pane
(30 columns at 80x24) wraps between them, never inside one."""
SEPARATOR = " · "


LABELLED = ("predicted ", "confidence ")
"""Sentences that start with a padded label (``_row``)."""


def _unpadded(row: Content) -> Content:
    """``label        value`` -> ``label value`` (the label is the row's first,
    bold span: :func:`_row`)."""
    end = row.spans[0].end if row.spans else LABEL_WIDTH
    return Content.assemble(row[:end].rstrip(), " ", row[end:])


def advice_compact(
    summary: RunSummary | None,
    rec: Recommendation | None,
    width: int,
    waiting: str | None = None,
    *,
    final: bool = False,
) -> Content:
    """The panel's text for a row ``width`` columns wide: the short facts (step time,
    phases, ...) one after another, ``label value · label value``, a line broken
    only between two facts (a fact wider than the row wraps, nothing is clipped);
    then the sentences (predictions, the confidence and why) a line each."""
    facts, notes = advice_parts(summary, rec, waiting, final=final)
    notes = [_unpadded(note) if note.plain.startswith(LABELLED) else note for note in notes]
    if len(notes) >= 2 and notes[-2].plain.startswith("confidence "):
        # the level and why on one line (it wraps where it must)
        notes = [*notes[:-2], Content.assemble(notes[-2], ": ", notes[-1])]
    lines: list[Content] = []
    line: Content | None = None
    for fact in facts:
        short = _unpadded(fact)
        if line is None:
            line = short
        elif line.cell_length + len(SEPARATOR) + short.cell_length <= width:
            line = Content.assemble(line, (SEPARATOR, "$text-muted"), short)
        else:
            lines.append(line)
            line = short
    if line is not None:
        lines.append(line)
    return Content("\n").join(lines + notes)


def busbw_text(s: RunSummary) -> str | None:
    """The bus bandwidth of the all-reduce timed alone (``busbw_total_bytes_s``, the
    figure the run's summary gives), never one from the exposed all-reduce: overlap
    with the backward pass hides part of the exchange, so a rate from the exposed
    time reads high. ``None`` where the all-reduce was not timed alone."""
    if not s.busbw_total_bytes_s:
        return None
    rate = format_rate_bytes_s(s.busbw_total_bytes_s, significant=3)
    return f"{rate} (all-reduce alone, {format_bytes(s.payload_bytes)}/step)"


def advice_parts(
    summary: RunSummary | None,
    rec: Recommendation | None = None,
    waiting: str | None = None,
    *,
    final: bool = False,
) -> tuple[list[Content], list[Content]]:
    """The panel's lines in two parts: the short facts (``label value``, a grid can
    set them side by side) and the rest (warnings, predictions, the confidence and
    why), in reading order. ``waiting``: what is true before the first step, said in
    place of "Waiting for the first steps…" (telemetry before the run's own start:
    :func:`gpuscale.analysis.script_runs.before_own_start`); ``final``: the run is
    over (what the predictions lacked, not what they wait for)."""
    gpus: list[Content] = []
    warnings: list[Content] = []
    if summary is not None:
        activity = gpu_activity_text(summary)
        if activity:
            gpus.append(_row("GPUs", activity))
        for warning in (  # as run's text summary says them, under its GPUs line
            held_down_text(summary),
            imbalance_text(summary),
            busy_not_working(summary),
        ):
            if warning:
                warnings.append(_text(warning, "$text-warning"))
    if summary is None or summary.steps_total == 0:
        if summary is not None and summary.no_step_times:
            return gpus, [_text(NO_STEP_TIMES, "$text-warning"), *warnings]
        if without_step_times(summary):  # ended before its first step: none will come
            return gpus, [Content.styled(NO_STEP_TIMES_IN_RUN, "$text-muted"), *warnings]
        said = waiting[:1].upper() + waiting[1:] if waiting else "Waiting for the first steps…"
        return gpus, [Content.styled(said, "$text-muted"), *warnings]
    s = summary
    notes: list[Content] = [*warnings]
    lines = [
        _row("step time", f"{format_ms(s.step_time_s)} median"),
        _row("throughput", throughput_text(s, step=False)),  # the step: the row above
        *gpus,
    ]
    wall = wall_clock_text(s, causes=False)
    if wall:  # the rate the run got differs from the median step's: it, and why
        lines.insert(2, _row("wall clock", wall, "$text-warning"))
    if s.phase_steps:
        ratio = (
            format_number(s.compute_comm_ratio, ".1f")
            if s.compute_comm_ratio
            else "no comm exposed"
        )
        lines.append(_row("phases", phases_heading(s)))
        items = phase_items(s)
        for item in items:  # the words of `gpuscale run`'s summary
            style = "$text-warning" if item.notable else "green" if item.label == "compute" else ""
            lines.append(_row(item.label, item.value, style))
        # the ratio comes from the exposed all-reduce: not from noise
        exchange = next(item.value for item in items if item.label == "exposed all-reduce")
        if s.devices > 1 and "not resolved" not in exchange:
            lines.append(_row("compute:comm", ratio))
        busbw = busbw_text(s)
        if busbw:
            lines.append(_row("busbw", busbw))
        lines.append(_row("probes", probes_text(s)))
        apart = parts_note(s)
        if apart:
            notes.append(_text(apart, "$text-warning"))
        waits = input_in_apply_note(s)
        if waits:
            notes.append(_text(waits, "$text-warning"))
    elif not s.probes_off:  # probes off: the predictions' note says so
        notes.append(_text("phase breakdown: not measured yet", "$text-muted"))
    if s.devices == 1:
        notes.append(
            Content.styled(
                "1 device: nothing to all-reduce; `gpuscale recommend` sweeps counts", "$text-muted"
            )
        )
    precision = precision_text(s)
    if precision is not None:
        text, reached = precision
        notes.append(_text(text, "" if reached else "$text-warning"))
    live = live_predictions(s, final=final)
    said = _text(live.reason[:1].upper() + live.reason[1:], "$text-muted")
    if live.level == "wait" and s.step_time_s:  # no 1.00x with a narrow range yet
        notes.append(said)
    elif live.level in ("step-times", "as-recorded"):  # what they rest on, then them
        notes.append(said)
        if rec is not None:
            notes += _predictions(rec)
    elif rec is not None:
        notes += _predictions(rec)
    trust = run_confidence(s)
    style = {"low": "$text-warning", "none": "$text-muted"}.get(trust.level, "$text-success")
    notes.append(_row("confidence", trust.level, f"bold {style}"))
    notes.append(_text(trust.reason, "$text-muted"))
    return lines, notes


ROW_MIN_FACT = 40
"""A panel narrower than two of these shows one fact a line."""


class AdvicePanel(VerticalScroll, can_focus=True):
    """Scrollable so nothing is lost on a small terminal. As wide as the screen (a
    row under the charts) it sets the facts side by side (:func:`advice_compact`);
    as a narrow column, one a line (:func:`advice_content`)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.body = Static(
            Content.styled("Waiting for the first steps…", "$text-muted"), id="advice-body"
        )
        self._shown: tuple[RunSummary | None, Recommendation | None, str | None, bool] | None = None

    def on_resize(self) -> None:
        if self._shown is not None:
            self.body.update(self._grid(*self._shown))

    def _grid(
        self,
        summary: RunSummary | None,
        rec: Recommendation | None,
        waiting: str | None,
        final: bool = False,
    ) -> Content:
        # A row (wider than a column of facts): the compact form. Two columns are
        # kept for a vertical scrollbar, should the text not fit, and one for the
        # text's own right margin (app.tcss).
        width = self.content_size.width - 3
        if width < 2 * ROW_MIN_FACT:
            return advice_content(summary, rec, waiting, final=final)
        return advice_compact(summary, rec, width, waiting, final=final)

    def compose(self):
        yield self.body

    def show(
        self,
        summary: RunSummary | None,
        recommendation: Recommendation | None,
        final: bool,
        *,
        interrupted: bool = False,
        failure: str | None = None,
        waiting: str | None = None,
        elsewhere: str | None = None,
    ) -> None:
        """``final``: the run is over (``interrupted``: without an end event);
        ``failure``: why it failed, shown in place of "waiting" when it failed
        before any step was reported (a script without gpuscale's callback reports
        none, however long it trained: the failure's own line says which); ``waiting``: what is true before the first step
        (:func:`advice_parts`); ``elsewhere``: where the run's steps are shown instead
        (a worker that forwards them to its chief: none come here)."""
        if interrupted:
            self.border_title = "Summary (run interrupted)"
        else:
            self.border_title = "Final summary" if final else "Recommendation (so far)"
        self._shown = None
        if failure is not None and (summary is None or summary.steps_total == 0):
            self.body.update(
                Content.assemble(
                    ("The run failed before any step was reported:", "bold $text-error"),
                    "\n",
                    visible(failure, keep_newlines=True),
                    ("\n(e shows the error again, q quits)", "$text-muted"),
                )
            )
            return
        if elsewhere is not None and (summary is None or summary.steps_total == 0):
            self.body.update(Content.styled(elsewhere, "$text-muted"))
            return
        self._shown = (summary, recommendation, waiting, final)
        self.body.update(self._grid(summary, recommendation, waiting, final))
