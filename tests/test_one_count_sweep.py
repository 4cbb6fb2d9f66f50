"""One measured device count and nothing predicted: no chart of a single dot (what
was measured and what to measure next instead), and no caveat about predictions
that were not made."""

from __future__ import annotations

import re

from sweep_fixtures import CPU_RUNS, SAMPLES

from gpuscale.analysis.confidence import CPU_LOGICAL_MEASURED_SCOPE, CPU_LOGICAL_PREDICTED_SCOPE
from gpuscale.analysis.recommend import recommend
from gpuscale.analysis.sweep import load_inputs
from gpuscale.cli import main
from gpuscale.plots.scaling import build_scaling_chart
from gpuscale.plots.terminal import scaling_text


def test_one_cpu_count_says_what_was_measured_not_predictions():
    rec = recommend(load_inputs([SAMPLES / "mnist-cnn_1xcpu.ndjson"]).points)
    assert not any(r.predicted for r in rec.table)
    assert rec.platform_note.endswith(": " + CPU_LOGICAL_MEASURED_SCOPE)
    assert not any("predictions are for" in line for line in rec.confidence)
    chart = build_scaling_chart(rec)
    assert chart.one_count
    text = scaling_text(chart, 80).plain
    assert "One count measured: 1 device, 918 samples/s. A scaling curve needs a" in text
    assert "samples/s (log)" not in text and "ms per step" in text  # the bars stay


def test_two_counts_draw_the_chart_and_keep_the_caveat_on_predictions():
    rec = recommend(load_inputs(CPU_RUNS).points)
    assert any(r.predicted for r in rec.table)
    assert rec.platform_note.endswith(": " + CPU_LOGICAL_PREDICTED_SCOPE)
    chart = build_scaling_chart(rec)
    assert not chart.one_count
    assert "samples/s (log)" in scaling_text(chart, 80).plain


def test_plot_of_one_count_says_so_instead_of_a_single_dot(tmp_path, capsys):
    """--plot, like the terminal chart: one measured count and nothing predicted is
    no scaling curve; the file says what the terminal says (the bars stay), stderr
    says in its one line that the file has no curve, and recommend exits 0 as the
    text does."""
    out = tmp_path / "one.svg"
    one = str(SAMPLES / "mnist-cnn_1xcpu.ndjson")
    assert main(["recommend", "--from", one, "--plot", str(out), "--no-chart"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"scaling chart written to {out}: one count measured, so no scaling curve "
        "(the file says so)"
    ]
    svg = out.read_text()
    assert not re.search(r'<g id="point-', svg) and '<g id="ideal"' not in svg
    assert '<g id="one-count-note"' in svg
    assert "One count measured: 1 device, 918 samples/s." in svg
    assert "ms per step" in svg  # the bars stay
    assert "logical devices, not for GPUs" in svg  # the caveat, as the chart has it


def test_plot_of_one_count_with_predictions_draws_them_with_their_ranges(tmp_path, capsys):
    out = tmp_path / "predicted.svg"
    two = str(SAMPLES / "mlp_2xcpu.ndjson")
    assert main(["recommend", "--from", two, "--plot", str(out), "--no-chart"]) == 0
    assert capsys.readouterr().err.strip() == f"scaling chart written to {out}"
    svg = out.read_text()
    assert sorted(map(int, re.findall(r'<g id="point-[^"]*-(\d+)"', svg))) == [2, 4, 8]
    assert sorted(set(map(int, re.findall(r'<g id="range-[^"]*-(\d+)"', svg)))) == [4, 8]
    assert "one-count-note" not in svg
