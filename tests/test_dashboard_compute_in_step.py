"""The dashboard's summary never shows a compute pass longer than the step it is
measured against as a fact (the new-user trial: 263.0 ms beside 247.1 ms steps):
"≈ the whole step" where the parts add up to it within their noise, else "not resolved"."""

from __future__ import annotations

from gpuscale.analysis.summary import RunSummary
from gpuscale.ui.widgets.advice import advice_content


def test_compute_above_the_probed_step_is_never_a_fact():
    s = RunSummary(
        devices=2,
        steps_total=100,
        steps_counted=95,
        step_time_s=0.25,
        phase_steps=1,
        compute_s=0.263,
        allreduce_s=0.0,
        apply_s=0.0,
        input_s=0.0,
        phase_consistent=False,
    )
    text = advice_content(s).plain
    assert "263.0" not in text
    # its parts do not add up to the step: no figure (trial 11-28: not "≈ the whole
    # step" beside the note that says they are not the step)
    assert "\u2248 the whole step" not in text
    assert "compute      not resolved" in text and "do not add up to the median step" in text
    s.phase_consistent = None  # parts within their noise of the step: about the whole step
    assert (
        "\u2248 the whole step (1 probe; exposed exchange not resolved)" in advice_content(s).plain
    )
    s.compute_s, s.phase_consistent = 0.2, True  # parts that add up are shown
    assert "200.0 ms" in advice_content(s).plain
