"""One measured device count and nothing predicted: no chart of a single dot (what
was measured and what to measure next instead), and no caveat about predictions
that were not made."""

from __future__ import annotations

from sweep_fixtures import CPU_RUNS, SAMPLES

from gpuscale.analysis.confidence import CPU_LOGICAL_CAVEAT, CPU_LOGICAL_MEASURED_CAVEAT
from gpuscale.analysis.recommend import recommend
from gpuscale.analysis.sweep import load_inputs
from gpuscale.plots.scaling import build_scaling_chart
from gpuscale.plots.terminal import scaling_text


def test_one_cpu_count_says_what_was_measured_not_predictions():
    rec = recommend(load_inputs([SAMPLES / "mnist-cnn_1xcpu.ndjson"]).points)
    assert not any(r.predicted for r in rec.table)
    assert rec.platform_note == CPU_LOGICAL_MEASURED_CAVEAT
    assert not any("predictions are for" in line for line in rec.confidence)
    chart = build_scaling_chart(rec)
    assert chart.one_count
    text = scaling_text(chart, 80).plain
    assert "One count measured: 1 device, 918 samples/s. A scaling curve needs a" in text
    assert "samples/s (log)" not in text and "ms per step" in text  # the bars stay


def test_two_counts_draw_the_chart_and_keep_the_caveat_on_predictions():
    rec = recommend(load_inputs(CPU_RUNS).points)
    assert any(r.predicted for r in rec.table)
    assert rec.platform_note == CPU_LOGICAL_CAVEAT
    chart = build_scaling_chart(rec)
    assert not chart.one_count
    assert "samples/s (log)" in scaling_text(chart, 80).plain
