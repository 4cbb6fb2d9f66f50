"""The recommendation panel shows strings from data escaped: control characters
visible, markup as typed."""

from __future__ import annotations

import msgspec
from recording_samples import sample_events

from gpuscale.analysis.confidence import RunConfidence
from gpuscale.analysis.summary import summarize
from gpuscale.ui.widgets import advice
from gpuscale.ui.widgets.advice import advice_content, predict_from_run

HOSTILE = "model '\x1b]0;PWNED\x07\x1b[2J[/bold][link=http://x]m'"


def test_sentences_that_quote_names_are_escaped(monkeypatch):
    events = sample_events(steps=30, gpus=2)  # enough steps for predictions
    summary = summarize(events)
    rec = predict_from_run(events[0], summary)
    assert rec is not None
    rec = msgspec.structs.replace(rec, platform_note=HOSTILE)
    monkeypatch.setattr(
        advice, "run_confidence", lambda s: RunConfidence(level="low", reason=HOSTILE)
    )
    text = advice_content(summary, rec).plain
    assert "\x1b" not in text and "\x07" not in text
    assert text.count("\\x1b]0;PWNED\\x07\\x1b[2J[/bold][link=http://x]m") == 2


async def test_replay_of_several_files_shows_the_readers_warnings_escaped(tmp_path):
    import shutil

    from sweep_fixtures import SAMPLES

    from gpuscale.analysis.sweep import load_inputs
    from gpuscale.ui.sweep_app import SweepApp, SweepView

    killed = tmp_path / "[bold]\x1b[2J.ndjson"
    shutil.copy(SAMPLES / "mnist-cnn_2xcpu_killed.ndjson", killed)
    sweep = load_inputs([SAMPLES / "mnist-cnn_1xcpu.ndjson", killed])
    assert len(sweep.warnings) == 1
    app = SweepApp(SweepView(points=sweep.points, warnings=sweep.warnings))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        (note,) = app._notifications
        assert note.severity == "warning" and "no end event" in note.message
        assert "\x1b" not in note.message and "\\[bold]" in note.message


def test_one_probe_is_said_to_be_too_few_for_ranges():
    from gpuscale.analysis.summary import RunSummary

    s = RunSummary(
        devices=2,
        steps_total=100,
        steps_counted=95,
        step_time_s=0.03,
        phase_steps=1,
        compute_s=0.028,
        allreduce_s=0.001,
        apply_s=0.001,
        input_s=0.0,
    )
    text = advice_content(s).plain
    assert "1 probe, too few for ranges; parts of the median step 30.0 ms" in text
    s.phase_steps = 12
    assert "too few for ranges" not in advice_content(s).plain
