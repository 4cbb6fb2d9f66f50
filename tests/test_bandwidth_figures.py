"""One run, one bus bandwidth (the trial of 2026-11-26, ``tests/fixtures/trial``):
the dashboard's busbw is the all-reduce timed alone, as the run's summary gives it,
never a rate from the exposed all-reduce (overlap hides part of the exchange, so
that one reads high); recommend's fitted figure says it is the exposed exchange's
effective rate and gives the all-reduce alone beside it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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


def _recommend_out(capsys, tmp_path, doc: dict, *args: str) -> str:
    from gpuscale.cli import main

    f = tmp_path / "sweep.json"
    f.write_text(json.dumps(doc))
    assert main(["recommend", "--from", str(f), "--no-chart", *args]) == 0
    return " ".join(capsys.readouterr().out.split())


def _phased(devices: int, step: float, compute: float, exposed: float, err: float, **kw) -> dict:
    apply = round(step - compute - exposed, 6)
    return {
        "devices": devices,
        "step_time_s": step,
        "compute_s": compute,
        "allreduce_s": exposed,
        "allreduce_err_s": err,
        "apply_s": apply,
        **kw,
    }


STRONG = {"scaling": "strong", "global_batch": 256, "config": "nccl", "payload_bytes": 100_000_000}


def test_no_exchange_figure_where_the_table_says_not_resolved(capsys, tmp_path):
    """Every measured count probed, none resolved (the table's predicted rows say
    "not resolved"): the Why said "Gradient exchange takes 2% of each step at 8
    devices ... estimated by the model" and the footnote "exposed exchange ≈ 75.0
    GB/s effective at 4 devices", both read from noise."""
    from gpuscale.analysis.explain import bandwidth_text

    doc = {
        "defaults": {"scaling": "weak", "per_replica_batch": 128, "config": "nccl"}
        | {"payload_bytes": 100_000_000},
        "points": [
            {"devices": 1, "step_time_s": 0.100},
            _phased(2, 0.115, 0.100, 0.001, 0.003, probes=5),
            _phased(4, 0.125, 0.100, 0.002, 0.004, probes=5),
        ],
    }
    out = _recommend_out(capsys, tmp_path, doc)
    assert "not resolved" in out
    assert "GB/s" not in out and "Gradient exchange takes" not in out
    assert "The exposed gradient exchange is not resolved at any measured count" in out
    assert "what it takes at 8 devices is not known" in out
    f = tmp_path / "sweep.json"
    rec = recommend(load_inputs([f]).points)
    (model,) = rec.models
    assert bandwidth_text(model, rec.table) is None


def test_the_why_and_the_footnote_give_one_bandwidth_for_one_fitted_exchange(capsys, tmp_path):
    """The Why said "over a link the model puts at 21.4 GB/s" (payload over the fitted
    beta) where the footnote said "exposed exchange ≈ 18.7 GB/s effective at 4
    devices (busbw)": one exchange, one figure, and it is not the link's."""
    doc = {
        "defaults": STRONG,
        "points": [
            {"devices": 1, "step_time_s": 0.100},
            _phased(2, 0.056, 0.048, 0.005, 0.001, probes=10),
            _phased(4, 0.036, 0.024, 0.010, 0.002, probes=3),
            _phased(4, 0.040, 0.032, 0.006, 0.001, probes=30),
        ],
    }
    out = _recommend_out(capsys, tmp_path, doc)
    # fitted to the table's 4-device row (the two runs' median step, their 33 probes
    # pooled), as its --json reads back: 18.7 GB/s when the raw runs were fitted
    rate = "exposed exchange \u2248 22.5 GB/s effective at 4 devices"
    assert f"{rate} (busbw, payload x 2(N-1)/N" in out  # the footnote
    why = out[out.index("Gradient exchange takes") :]
    assert f"(100.0 MB per step; {rate}, busbw)" in why
    assert "link" not in why.split(".")[0] and "21.4" not in out


def test_two_runs_timing_the_all_reduce_alone_alike_give_that_busbw_everywhere(capsys, tmp_path):
    """Two runs at 2 devices both timed the all-reduce alone at 20 ms (5.00 GB/s for
    100 MB): the footnote printed 4.92 GB/s (the timing scaled by the ratio of step
    times, as if it were part of the step) while the Why said 5.00 GB/s."""
    from gpuscale.analysis.recommend import combine_runs
    from gpuscale.analysis.sweep import SweepPoint, normalize

    runs = [
        _phased(2, 0.050, 0.038, 0.010, 0.002, probes=3, allreduce_total_s=0.020),
        _phased(2, 0.060, 0.052, 0.006, 0.001, probes=30, allreduce_total_s=0.020),
    ]
    doc = {
        "defaults": STRONG | {"interconnect_bytes_s": 50e9},
        "points": [
            {"devices": 1, "step_time_s": 0.100},
            *runs,
            {"devices": 2, "step_time_s": 0.070},
        ],
    }
    points = [normalize(SweepPoint(**(STRONG | r))) for r in runs]
    alone = combine_runs(points, "nccl", []).allreduce_total_s
    assert alone == pytest.approx(0.020)  # timed alone, not a part of the step: as timed
    out = _recommend_out(capsys, tmp_path, doc, "--max-devices", "2")
    assert "the all-reduce alone measured 5.00 GB/s" in out  # the footnote
    assert "the all-reduce alone ran at a busbw of 5.00 GB/s" in out  # the Why
    assert "4.92" not in out
