"""The dashboard's recommendation panel renders what gpuscale.analysis decided."""

from __future__ import annotations

from gpuscale.analysis.recommend import recommend_from_run
from gpuscale.analysis.summary import summarize
from gpuscale.ui.widgets.advice import advice_content
from tests.test_analysis_confidence import cpu_run_events


def test_panel_shows_the_cpu_caveat_next_to_predictions_and_the_confidence():
    events = cpu_run_events()
    summary = summarize(events)
    text = advice_content(summary, recommend_from_run(events[0], summary)).plain
    assert "predicted" in text
    predicted_at = text.index("predicted")
    caveat_at = text.index("share this machine's cores")
    assert caveat_at > predicted_at
    assert "confidence   medium" in text and "28 steps" in text


def test_panel_says_when_the_ranges_are_a_guess_of_noisy_steps():
    """Step times spread over 50%: the predicted speedups' ranges are widened and
    no coverage is claimed (gpuscale.analysis.predict.noise_widened); the panel
    says so rather than naming an 80% range."""
    import msgspec

    events = cpu_run_events()
    quiet = summarize(events)
    text = advice_content(quiet, recommend_from_run(events[0], quiet)).plain
    assert "80% range" in text and "a guess" not in text
    noisy_events = [
        msgspec.structs.replace(e, step_time_s=0.05 if e.step % 2 else 0.15)
        if type(e).__name__ == "StepEvent"
        else e
        for e in events
    ]
    noisy = summarize(noisy_events)
    assert noisy.spread > 0.5
    text = advice_content(noisy, recommend_from_run(noisy_events[0], noisy)).plain
    assert "a guess, not a calibrated range" in text and "80% range" not in text


def test_a_predicted_speedup_with_a_range_wider_than_threefold_shows_its_range_alone():
    """Trial 2: `predicted 4: 0.88x (0.04–3.27)` from one probe: a central figure in
    an 80-fold range tells nothing; it reads `4: unknown (0.04–3.27x)`."""
    from gpuscale.analysis.sweep import SweepPoint
    from gpuscale.ui.widgets.advice import _predicted_speedup

    def row(low: float, high: float) -> SweepPoint:
        return SweepPoint(
            devices=4,
            step_time_s=0.1,
            scaling="strong",
            predicted=True,
            speedup=0.88,
            speedup_low=low,
            speedup_high=high,
        )

    assert _predicted_speedup(row(0.04, 3.27)) == "4: unknown (0.04–3.27x)"
    assert _predicted_speedup(row(0.74, 1.02)) == "4: 0.88x (0.74–1.02)"
