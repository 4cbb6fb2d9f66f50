"""A run in progress predicts no other device count before it has what the
prediction rests on (the trial of 2026-11-26: at step 5 of a 2-device run the panel
said "4: 1.00x (0.96–1.02) … (low–high: 80% range)"): one rule,
:func:`gpuscale.analysis.confidence.live_predictions`, for the panel and
:func:`gpuscale.analysis.recommend.recommend_from_run`."""

from __future__ import annotations

from pathlib import Path

from gpuscale.analysis.confidence import ENOUGH_STEPS, live_predictions
from gpuscale.analysis.recommend import recommend_from_run
from gpuscale.analysis.summary import RunAccumulator, summarize
from gpuscale.events.schema import StepEvent
from gpuscale.recording.reader import iter_events
from gpuscale.ui.widgets.advice import advice_content
from tests.test_analysis_confidence import cpu_run_events

TWO = Path(__file__).parent / "fixtures" / "trial" / "20261126-144001_train.py_2xcpu.ndjson.gz"


def _at_step(steps: int):
    """The trial's run as the dashboard saw it after ``steps`` steps."""
    events = list(iter_events(TWO))
    acc = RunAccumulator()
    for e in events:
        acc.add(e)
        if isinstance(e, StepEvent) and e.step + 1 >= steps:
            break
    return events[0], acc.summary()


def test_no_calibrated_range_at_step_5():
    start, s = _at_step(5)
    assert live_predictions(s).level == "wait"
    rec = recommend_from_run(start, s)
    assert rec is not None and not any(r.predicted for r in rec.table)
    text = advice_content(s, rec).plain
    assert "80% range" not in text and "1.00x" not in text
    assert f"Predictions after {ENOUGH_STEPS} counted steps" in text


def test_phases_that_do_not_split_the_step_give_no_prediction():
    # step 100 of the trial: the probes' parts did not add up to the step, so the
    # model had nothing to fit the exchange from and gave 1.00x with an 80% range
    start, s = _at_step(100)
    assert s.steps_counted >= ENOUGH_STEPS and not s.phases_split_step
    assert live_predictions(s).level == "wait"
    text = advice_content(s, recommend_from_run(start, s)).plain
    assert "80% range" not in text and "1.00x" not in text
    assert "phases split the step" in text


def test_a_share_known_worse_than_its_target_is_a_guess_spanning_it():
    start, s = _at_step(200)
    assert s.comm_share_err > s.share_target
    live = live_predictions(s)
    assert live.level == "guess" and "known to \u00b13.4 points" in live.reason
    rec = recommend_from_run(start, s)
    predicted = [r for r in rec.table if r.predicted]
    assert predicted and all(r.coverage is None and r.throughput_safe is None for r in predicted)
    assert all(r.speedup_low < r.speedup < r.speedup_high for r in predicted)
    assert "a guess, not a calibrated range" in advice_content(s, rec).plain


def test_a_run_with_enough_of_everything_keeps_its_calibrated_range():
    events = cpu_run_events()  # 28 counted steps, 5 probes, a steady share
    s = summarize(events)
    assert live_predictions(s).level == "calibrated"
    text = advice_content(s, recommend_from_run(events[0], s)).plain
    assert "80% range" in text
