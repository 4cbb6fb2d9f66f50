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
from gpuscale.analysis.recommend import recommend, recommend_from_run
from gpuscale.analysis.summary import RunAccumulator, summarize
from gpuscale.analysis.sweep import load_inputs
from gpuscale.events.schema import EndEvent, PhaseEvent, StepEvent
from gpuscale.recording.reader import iter_events, load_run
from gpuscale.ui.app import build_app
from gpuscale.ui.sources import ReplaySource
from gpuscale.ui.widgets.advice import AdvicePanel, advice_content
from tests.test_analysis_confidence import cpu_run_events

TRIAL = Path(__file__).parent / "fixtures" / "trial"
TWO = TRIAL / "20261126-144001_train.py_2xcpu.ndjson.gz"
TWO_PROBES = TRIAL / "20261126-155537_train.py_2xcpu.ndjson.gz"
"""trial10: a Keras script's 2-device run, 398 counted steps, 2 probes whose phases
split the step (exposed all-reduce 19%)."""
UNSPLIT = TRIAL / "20261126-155456_train.py_2xcpu.ndjson.gz"
"""trial10: the same script, 1 probe whose phases do not add up to the step."""


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
        assert live.level in ("wait", "guess")
        assert "so far" in live.reason or "not yet" in live.reason
        # over: nothing more will come, so what recommend --from predicts, and why
        assert over.level in ("step-times", "as-recorded")
        assert "so far" not in over.reason and "not yet" not in over.reason
    assert "only 3 counted steps (fewer than 20)" in live_predictions(few, final=True).reason
    assert "known to \u00b13.4 points (target" in live_predictions(guessed, final=True).reason
    events = _probes_off({"probe_budget": 0.02}, steps=25)
    ended = summarize([*events, EndEvent(t=25.0, status="completed", steps=25)])
    assert ended.status != "running"
    assert live_predictions(ended).reason == (
        "no probe measured the exposed all-reduce; the predictions rest on the step times alone"
    )
    lines = advice_content(unsplit, None, final=True).plain.splitlines()
    assert (
        "The probes' phases did not split the step; the predictions rest on the step "
        "times alone" in lines
    )
    assert not any(line.startswith(("Predictions once", "No predictions")) for line in lines)


def test_the_live_words_say_how_many_probes_not_that_none_was_measured():
    # trial10: "0.5 ms (11.8%)" beside "Predictions once the exposed all-reduce is
    # measured (1 of 3 probes so far)"
    events = list(iter_events(TWO_PROBES))
    acc = RunAccumulator()
    probes = 0
    for e in events:  # up to the second probe: one probe, and steps after it
        probes += isinstance(e, PhaseEvent)
        if probes == 2:
            break
        acc.add(e)
    s = acc.summary()
    assert s.steps_counted >= ENOUGH_STEPS and s.probes_run == 1
    live = live_predictions(s)
    assert live.level == "wait" and live.reason == "predictions after 3 probes (1 so far)"
    text = advice_content(s, recommend_from_run(events[0], s)).plain
    assert "Predictions after 3 probes (1 so far)" in text and "is measured" not in text


@pytest.mark.parametrize("fixture", [TWO_PROBES, UNSPLIT])
def test_a_finished_run_predicts_as_recommend_from_its_recording(fixture):
    """trial10: the dashboard's end panel said "No predictions: the exposed
    all-reduce was not measured (2 of 3 probes)" beside "exposed all-reduce 0.7 ms
    (18.8%)", while `recommend --from` on the same recording gave "19% (2 probes)"
    and predicted 4 and 8 devices. One rule for a finished run."""
    sweep = load_inputs([fixture])
    from_file = recommend(sweep.points)
    run = load_run(fixture)
    s = summarize(run.events)
    assert s.status == "completed"
    live = live_predictions(s)
    assert live.level in ("as-recorded", "step-times")
    rec = recommend_from_run(run.start, s, final=True)

    def predicted(r):
        return [
            (row.devices, row.throughput, row.throughput_low, row.throughput_high, row.coverage)
            for row in r.table
            if row.predicted
        ]

    assert [n for n, *_ in predicted(from_file)] == [4, 8]
    assert predicted(rec) == predicted(from_file)
    text = advice_content(s, rec, final=True).plain
    assert "No predictions" not in text and "4: " in text and "8: " in text
    assert live.reason[:1].upper() + live.reason[1:] in text


async def test_the_replayed_end_panel_shows_the_predictions_of_recommend_from():
    app = build_app(ReplaySource(TWO_PROBES, end=True))
    async with app.run_test(size=(200, 50)) as pilot:
        await app.settle()
        await pilot.pause()
        panel = app.query_one(AdvicePanel)
        text = str(panel.body.render())
        assert panel.border_title == "Final summary"
        assert "No predictions" not in text and "so far" not in text
        assert "The exposed all-reduce rests on 2 probes, too few for its own range" in text
        sweep = load_inputs([TWO_PROBES])
        rows = [r for r in recommend(sweep.points).table if r.predicted]
        for r in rows:  # the same figures (a range over 3-fold: the range alone)
            if r.speedup_high > 3 * r.speedup_low:
                assert f"{r.devices}: unknown ({r.speedup_low:.2f}\u2013" in text
            else:
                assert f"{r.devices}: {r.speedup:.2f}x ({r.speedup_low:.2f}\u2013" in text


def test_the_guess_says_a_small_target_with_its_decimals():
    _, s = _at_step(200)
    s = msgspec.structs.replace(s, share_target=0.004)  # --precision 0.004
    reason = live_predictions(s).reason
    assert "target \u00b10.4)" in reason and "\u00b10)" not in reason
