"""The note on the probes' phases that do not split the median step is one function's
(:func:`gpuscale.analysis.phase_report.parts_note`), said by ``run``'s and ``replay``'s
printed summary wherever the dashboard says it (its summary and its phase chart),
including where the phases add up to the step only within their wide noise but compute
alone fills it (what the trial's final summary dropped)."""

from __future__ import annotations

import msgspec
import pytest
from recording_samples import script_start, write_run

from gpuscale.analysis.phase_report import parts_note
from gpuscale.analysis.summary import summarize
from gpuscale.cli import main
from gpuscale.events.schema import EndEvent, PhaseEvent, StepEvent

T0 = 1_800_000_000.0


PROBES_MS = [(5.6, 1.0, 0.5), (6.2, 1.1, 1.7), (6.4, 2.5, 3.0), (7.5, 0.5, 1.0), (9.0, 3.0, 2.5)]
"""(compute, exposed all-reduce, apply) of 5 noisy callback probes against 6.1 ms
steps: medians 6.4 + 1.1 + 1.7 = 9.2 ms, within their noise of the step, but compute
alone fills it."""


def _compute_fills() -> list:
    events: list = [script_start()]
    t = T0
    for i in range(60):
        t += 0.0061
        events.append(StepEvent(t=t, step=i, step_time_s=0.0061, samples=64, warmup=i < 2))
        if i >= 10 and i % 10 == 0:
            compute, exposed, apply = PROBES_MS[i // 10 - 1]
            events.append(
                PhaseEvent(
                    t=t,
                    step=i,
                    step_time_s=0.0061,
                    compute_s=compute / 1000,
                    allreduce_s=exposed / 1000,
                    apply_s=apply / 1000,
                    method="callback-probe",
                )
            )
    return events


def test_compute_filling_the_step_is_explained_with_the_numbers():
    s = summarize(_compute_fills())
    assert s.phase_consistent is True and s.compute_fills_step  # what the trial's end had
    note = parts_note(s)
    assert note is not None
    assert note.startswith(
        "the probes' phases add up to 9.2 ms (compute 6.4, exposed all-reduce 1.1, "
        "apply + input 1.7 ms) against the median step 6.1 ms (within their noise), and "
        "compute alone fills that step: the exposed all-reduce and apply + input are not "
        "resolved"
    ), note


def test_the_printed_summary_says_the_note_the_dashboard_says(tmp_path, capsys):
    from gpuscale.ui.model import RunModel
    from gpuscale.ui.widgets.advice import advice_content
    from gpuscale.ui.widgets.charts import build_breakdown_chart

    events = _compute_fills()
    events.append(EndEvent(t=events[-1].t + 0.01, status="completed", steps=60))
    model = RunModel()
    model.absorb(events)
    summary = model.summary()[1]
    note = parts_note(summary)
    assert note is not None
    assert note in advice_content(summary).plain  # the dashboard's summary
    chart = " ".join(build_breakdown_chart(model.snapshot(), 60, 16, summary).plain.split())
    assert note.split(":")[0] in chart and "no bar drawn" in chart  # its phase chart
    assert main(["replay", str(write_run(tmp_path / "run.ndjson", events)), "--end"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert note in printed  # and the final printed summary
    assert "compute ≈ the whole step" in printed


@pytest.mark.parametrize(
    "change",
    [
        {},  # compute fills the step
        {"phase_consistent": False},  # the parts miss the step
        {"compute_s": 0.004, "phase_parts_s": 0.0072},  # they split it: no note anywhere
    ],
)
def test_printed_and_dashboard_notes_agree(change):
    from gpuscale.commands.run import phase_lines
    from gpuscale.ui.widgets.advice import advice_content

    s = msgspec.structs.replace(summarize(_compute_fills()), **change)
    note = parts_note(s)
    printed = "\n".join(phase_lines(msgspec.to_builtins(s), s.devices))
    shown = advice_content(s).plain
    assert (note is not None) == (bool(change) is False or "phase_consistent" in change)
    if note is not None:
        assert note in printed and note in shown
    else:
        assert "add up to" not in printed and "add up to" not in shown


def test_a_part_at_or_below_zero_is_never_said_as_a_bare_zero():
    """A trial: ``the probes' phases add up to 96.6 ms (compute 94.0, exposed all-reduce
    0.0, apply 2.6, input 0.0 ms)``: a median at or below 0 (counted as 0 in the sum)
    read as a measured 0.0; the views say "never 0.0"."""
    from gpuscale.analysis.summary import RunSummary

    s = RunSummary(devices=2, step_time_s=0.0631)
    s.compute_s, s.allreduce_s, s.apply_s, s.input_s = 0.0940, 0.0, 0.0026, 0.0
    s.phase_parts_s, s.phase_consistent, s.probes = 0.0966, False, 5
    note = parts_note(s)
    assert note is not None and "(compute 94.0, exposed all-reduce < 0.1, apply 2.6, " in note
    assert "input < 0.1 ms)" in note and " 0.0" not in note
