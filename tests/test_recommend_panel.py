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
