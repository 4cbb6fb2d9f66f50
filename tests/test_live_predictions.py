"""A run in progress predicts no other device count before it has what the
prediction rests on (the trial of 2026-11-26: at step 5 of a 2-device run the panel
said "4: 1.00x (0.96–1.02) … (low–high: 80% range)"): one rule,
:func:`gpuscale.analysis.confidence.live_predictions`, for the panel and
:func:`gpuscale.analysis.recommend.recommend_from_run`."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from gpuscale.analysis.confidence import ENOUGH_STEPS, live_predictions
from gpuscale.analysis.recommend import recommend_from_run
from gpuscale.analysis.summary import RunAccumulator, summarize
from gpuscale.events.schema import EndEvent, PhaseEvent, StepEvent
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


def _probes_off(config: dict, steps: int = 30):
    """The CPU run with its probes turned off by ``config``: no phase events."""
    events = [e for e in cpu_run_events(steps) if not isinstance(e, PhaseEvent)]
    events[0] = msgspec.structs.replace(events[0], config=config)
    return events


@pytest.mark.parametrize(
    "config",
    [
        {"phase_every": 0, "probe_budget": 0.02},  # --phase-every 0
        {"phase_every": None, "probe_budget": 0.0},  # --probe-budget 0
        {"every": None, "probe_budget": 0.02, "phases": False},  # ScalingMonitor(phases=False)
    ],
)
def test_a_run_with_probes_off_waits_for_no_probe(config):
    events = _probes_off(config)
    s = summarize(events)
    assert s.probes_off
    live = live_predictions(s)
    assert live.level == "step-times" and "probes turned off" in live.reason
    rec = recommend_from_run(events[0], s)
    assert any(r.predicted for r in rec.table)  # from the step times, as before probes
    text = advice_content(s, rec).plain
    assert "probes so far" not in text and "not measured yet" not in text
    assert "rest on the step times alone" in text and "predicted" in text


def test_a_probing_run_with_no_probe_yet_still_waits():
    events = _probes_off({"phase_every": None, "probe_budget": 0.02})
    s = summarize(events)
    assert not s.probes_off and live_predictions(s).level == "wait"


def test_a_finished_run_says_what_it_lacked_not_what_it_waits_for():
    _, few = _at_step(5)
    _, unsplit = _at_step(100)
    _, guessed = _at_step(200)
    for s in (few, unsplit, guessed):
        live, over = live_predictions(s), live_predictions(s, final=True)
        assert live.level == over.level
        assert "so far" in live.reason or "not yet" in live.reason
        assert "so far" not in over.reason and "not yet" not in over.reason
    assert "fewer than 20 counted steps (3)" in live_predictions(few, final=True).reason
    events = _probes_off({"probe_budget": 0.02}, steps=25)
    ended = summarize([*events, EndEvent(t=25.0, status="completed", steps=25)])
    assert ended.status != "running"
    assert live_predictions(ended).reason == (
        "no predictions: the exposed all-reduce was not measured (0 of 3 probes)"
    )
    lines = advice_content(unsplit, None, final=True).plain.splitlines()
    assert "No predictions: the probes' phases did not split the step" in lines
    assert not any(line.startswith("Predictions once") for line in lines)


def test_the_guess_says_a_small_target_with_its_decimals():
    _, s = _at_step(200)
    s = msgspec.structs.replace(s, share_target=0.004)  # --precision 0.004
    reason = live_predictions(s).reason
    assert "target \u00b10.4)" in reason and "\u00b10)" not in reason
