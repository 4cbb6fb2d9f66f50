"""One run, one bus bandwidth (the trial of 2026-11-26, ``tests/fixtures/trial``):
the dashboard's busbw is the all-reduce timed alone, as the run's summary gives it,
never a rate from the exposed all-reduce (overlap hides part of the exchange, so
that one reads high); recommend's fitted figure says it is the exposed exchange's
effective rate and gives the all-reduce alone beside it."""

from __future__ import annotations

from pathlib import Path

from gpuscale.analysis.recommend import recommend
from gpuscale.analysis.summary import summarize
from gpuscale.analysis.sweep import load_inputs
from gpuscale.formatting import format_rate_bytes_s
from gpuscale.recording.reader import iter_events
from gpuscale.ui.widgets.advice import advice_content

TRIAL = Path(__file__).parent / "fixtures" / "trial"
TWO = TRIAL / "20261126-144001_train.py_2xcpu.ndjson.gz"
ONE = TRIAL / "20261126-144308_train.py_1xcpu.ndjson.gz"


def test_rates_print_to_significant_figures_when_asked():
    assert format_rate_bytes_s(392_858_276, significant=3) == "393 MB/s"
    assert format_rate_bytes_s(1.117e9, significant=3) == "1.12 GB/s"
    assert format_rate_bytes_s(999.6e6, significant=3) == "1.00 GB/s"
    assert format_rate_bytes_s(392_858_276) == "392.9 MB/s"  # the default is unchanged


def test_the_dashboards_busbw_is_the_all_reduce_timed_alone():
    # the trial: "busbw 921.4 MB/s (1.1 MB/step)" from the exposed 1.2 ms beside the
    # summary's "all-reduce alone: 3.2 ms for 1.1 MB"
    s = summarize(iter_events(TWO))
    assert s.busbw_bytes_s and round(s.busbw_bytes_s / 1e6, 1) == 921.4  # exposed: not shown
    text = advice_content(s).plain
    busbw = next(line for line in text.splitlines() if "busbw" in line)
    assert "921" not in busbw
    assert format_rate_bytes_s(s.busbw_total_bytes_s, significant=3) == "359 MB/s"
    assert "359 MB/s (all-reduce alone, 1.1 MB/step)" in busbw


def test_recommend_says_what_its_fitted_bandwidth_is_beside_the_all_reduce_alone():
    # the trial: "effective bandwidth 1.8 GB/s" with no word of what it was or why it
    # was five times the 359 MB/s of the all-reduce alone
    from gpuscale.analysis.explain import bandwidth_text

    sweep = load_inputs([ONE, TWO])
    rec = recommend(sweep.points)
    (model,) = rec.models
    text = bandwidth_text(model, [r for r in rec.table if r.config == model.config])
    assert text is not None
    assert text.startswith("exposed exchange \u2248 921 MB/s effective at 2 devices")
    assert "busbw, payload x 2(N-1)/N" in text  # the convention, named
    assert "the all-reduce alone measured 359 MB/s" in text  # the dashboard's figure
    assert "overlap with the backward pass" in text  # why the two differ
    assert "1.8 GB/s" not in text


def test_recommend_prints_the_bandwidth_line(capsys):
    from gpuscale.commands.recommend_render import render

    sweep = load_inputs([ONE, TWO])
    render(recommend(sweep.points), sweep, chart=False)
    out = capsys.readouterr().out
    assert "effective bandwidth" not in out
    assert "exposed exchange \u2248 921 MB/s effective" in " ".join(out.split())
