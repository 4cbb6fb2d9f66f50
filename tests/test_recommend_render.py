"""The `recommend` table at 80 and 120 columns: columns dropped or merged when
narrow, never a number clipped; no recommended mark when nothing is recommended."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from gpuscale.analysis.recommend import recommend
from gpuscale.analysis.sweep import load_inputs
from gpuscale.commands.recommend_render import render
from gpuscale.formatting import format_range

SAMPLES = Path(__file__).resolve().parent.parent / "sample_runs"

INPUTS = [
    ["mlp_2xcpu.ndjson"],
    ["mnist-cnn_1xcpu.ndjson", "mnist-cnn_2xcpu.ndjson"],
    ["seed000_v100.json"],
    ["seed002_mnist.json"],
    ["seed004_multiworker.json"],
]


def _render(names: list[str], width: int, chart: bool = False, **kw) -> tuple[str, object]:
    sweep = load_inputs([str(SAMPLES / n) for n in names])
    rec = recommend(sweep.points, available_devices=sweep.available_devices, **kw)
    out = io.StringIO()
    render(rec, sweep, console=Console(file=out, width=width, color_system=None), chart=chart)
    return out.getvalue(), rec


def _table_rows(text: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.strip().strip("\u2502").split("\u2502")]
        for line in text.splitlines()
        if line.startswith("\u2502")
    ]


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("names", INPUTS, ids=lambda n: n[0])
@pytest.mark.parametrize("kw", [{}, {"max_devices": 16, "price_per_device_hour": 2.5}])
def test_no_cell_is_clipped_and_every_number_is_whole(names, width, kw):
    text, rec = _render(names, width, **kw)
    rows = _table_rows(text)
    assert rows and not any(cell.endswith("\u2026") for row in rows for cell in row)
    assert "\u2026" not in text
    assert max(len(line) for line in text.splitlines()) <= width
    for point in rec.table:  # each row on one line, its samples/s and range whole
        number = f"{point.throughput:,.0f}"
        assert any(r[0] == str(point.devices) and number in " ".join(r) for r in rows)
        if point.throughput_low is not None:
            span = format_range(point.throughput_low, point.throughput_high, ",.0f")
            assert any(r[0] == str(point.devices) and span in " ".join(r) for r in rows)


def test_wide_terminal_shows_every_range_and_the_step_time():
    text, rec = _render(["mlp_2xcpu.ndjson"], 120)
    assert "step time" in text and "exposed comm" in text
    row = next(r for r in rec.table if r.predicted)
    assert f"{row.speedup:.2f}x ({row.speedup_low:.2f}" in text
    assert "(model)" in text and "predicted" in text


def test_narrow_terminal_keeps_samples_range_and_explains_short_marks():
    text, _ = _render(["mnist-cnn_1xcpu.ndjson", "mnist-cnn_2xcpu.ndjson"], 80)
    assert "range" in text and "794\u2013844" in text
    assert "<- recommended" in text  # the short mark is explained under the table


@pytest.mark.parametrize("width", [80, 120])
def test_no_recommended_mark_when_the_verdict_is_none(width):
    text, rec = _render(["mlp_2xcpu.ndjson"], width)
    assert rec.verdict == "none"
    table = text.split("Recommendation:")[0]
    assert "<-" not in table and "recommended" not in table
    with_chart, _ = _render(["mlp_2xcpu.ndjson"], width, chart=True)
    assert "\u25c6" not in with_chart  # nor on the chart
    assert not re.search(r"recommended: \d", with_chart)
    decided, _ = _render(["mnist-cnn_1xcpu.ndjson", "mnist-cnn_2xcpu.ndjson"], width, chart=True)
    assert "\u25c6 recommended: 1" in decided


@pytest.mark.parametrize("width", [80, 120])
def test_a_measured_exposed_share_carries_its_range_and_probes(width):
    text, rec = _render(["mnist-cnn_1xcpu.ndjson", "mnist-cnn_2xcpu.ndjson"], width)
    two = next(r for r in rec.table if r.devices == 2 and not r.predicted)
    assert two.probes == 10 and two.allreduce_err_s is not None
    row = next(r for r in _table_rows(text) if r[0] == "2")
    cell = "3% ±2 (10 probes)" if width == 120 else "3% ±2 (10)"
    assert cell in row
    if width == 80:
        assert "(n) probes" in text  # the short cell explained under the table


def test_an_exposed_share_within_its_noise_is_not_resolved_never_zero():
    from gpuscale.analysis.sweep import SweepPoint
    from gpuscale.commands.recommend_render import measured_share

    point = SweepPoint(
        devices=2,
        scaling="weak",
        step_time_s=0.1,
        allreduce_s=0.0,
        allreduce_err_s=0.004,
        probes=14,
        comm_share=0.0,
    )
    assert measured_share(point) == "not resolved (14 probes)"
    assert measured_share(point, long=False) == "not resolved (14)"
    few = SweepPoint(
        devices=2, scaling="weak", step_time_s=0.1, allreduce_s=0.02, probes=2, comm_share=0.2
    )
    assert measured_share(few) == "20% (2 probes)"  # too few probes for a range
    published = SweepPoint(devices=2, scaling="weak", step_time_s=0.1, comm_share=0.2)
    assert measured_share(published) == "20%"


@pytest.mark.parametrize("width", [80, 120])
def test_two_recordings_at_one_count_pool_their_probes(width):
    """10 probes and 9 probes at 2 devices are 19 probes together, resolved as
    each is alone (once the first run's half-width was kept over the median of
    the two: "not resolved (10 probes)")."""
    names = ["mnist-cnn_2xcpu.ndjson", "mnist-cnn_2xcpu_killed.ndjson", "mnist-cnn_1xcpu.ndjson"]
    text, rec = _render(names, width)
    two = next(r for r in rec.table if r.devices == 2 and not r.predicted)
    assert two.probes == 19
    alone = [
        next(r for r in _render([n, names[2]], width)[1].table if r.devices == 2) for n in names[:2]
    ]
    low, high = sorted(p.allreduce_s for p in alone)
    assert low < two.allreduce_s < high  # between the two runs', weighted by their probes
    assert two.allreduce_err_s < min(p.allreduce_err_s for p in alone)  # more probes
    row = next(r for r in _table_rows(text) if r[0] == "2")
    assert any(cell.endswith("(19 probes)" if width == 120 else "(19)") for cell in row), row
    assert not any("not resolved" in cell for cell in row)


def test_80_columns_keep_an_unresolved_exposed_share():
    """'not resolved (19)' is long: at 80 columns the table shortens 'efficiency'
    rather than drop the exposed comm column."""
    from gpuscale.analysis.sweep import Sweep, SweepPoint, normalize

    common = {"scaling": "strong", "global_batch": 128, "model": "m", "platform": "cpu-logical"}
    points = [
        SweepPoint(devices=1, step_time_s=0.1, compute_s=0.1, allreduce_s=0.0, **common),
        SweepPoint(
            devices=2,
            step_time_s=0.104,
            compute_s=0.1,
            allreduce_s=0.002,
            allreduce_err_s=0.003,
            probes=19,
            **common,
        ),
    ]
    points = [normalize(p) for p in points]
    sweep = Sweep(points=points, sources=[], notes=[], warnings=[], available_devices=None)
    rec = recommend(points, available_devices=None)
    out = io.StringIO()
    render(rec, sweep, console=Console(file=out, width=80, color_system=None), chart=False)
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "exposed" in text and "not resolved (19)" in text, text
    assert "eff. efficiency" in text


def test_one_device_exposes_no_exchange_whether_probed_or_not():
    """A built-in sweep's 1-device run is probed (0% exposed); a script's is not
    (it said n/a): one device exchanges nothing, so both say 0%, and why."""
    from gpuscale.analysis.sweep import Sweep, SweepPoint, normalize

    common = {"scaling": "strong", "global_batch": 64, "model": "m", "platform": "cpu-logical"}
    two = SweepPoint(
        devices=2,
        step_time_s=0.06,
        compute_s=0.05,
        allreduce_s=0.01,
        allreduce_err_s=0.002,
        probes=12,
        **common,
    )
    for one in (
        SweepPoint(devices=1, step_time_s=0.1, compute_s=0.1, allreduce_s=0.0, probes=5, **common),
        SweepPoint(devices=1, step_time_s=0.1, **common),  # a script's run: no probe
    ):
        points = [normalize(one), normalize(two)]
        rec = recommend(points, available_devices=None)
        sweep = Sweep(points=points, sources=[], notes=[], warnings=[], available_devices=None)
        out = io.StringIO()
        render(rec, sweep, console=Console(file=out, width=120, color_system=None), chart=False)
        text = out.getvalue()
        row = next(r for r in _table_rows(text) if r[0] == "1")
        assert "0%" in row and "n/a" not in row, row
        assert "0% at 1 device: one device has no gradients to exchange" in " ".join(text.split())


def test_the_tables_of_one_answer_share_one_header_layout_at_80_columns():
    """seed 002 at 80 columns: 'step time' was whole in one table and wrapped in
    the next."""
    text, _ = _render(["seed002_mnist.json"], 80)
    headers = [
        line
        for line in text.splitlines()
        if line.startswith("\u2503")  # header rows
    ]
    tables = text.count("\u250f")  # one top-left corner per table
    assert tables == 2
    assert len(headers) % tables == 0
    per_table = len(headers) // tables
    first, second = headers[:per_table], headers[per_table:]
    # the same header words on the same rows in both (cell widths may differ)
    assert [h.split() for h in first] == [h.split() for h in second]


def test_sweep_wide_lines_come_after_every_tables_footnotes():
    """'no predictions past ...' is about all the tables: after the last table's
    footnotes and a blank line, not indented like one of them."""
    text, _ = _render(["seed002_mnist.json"], 80)
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if "predictions past" in line)
    assert lines[at].startswith("No predictions past") and lines[at - 1] == ""
    assert lines[at - 2].endswith("measured points")  # the last table's last footnote
    assert not any(line.startswith("\u2502") for line in lines[at:])  # no table after it


def test_compute_per_step_is_rounded_like_the_other_durations():
    from gpuscale.analysis.sweep import SweepPoint, normalize

    common = {"scaling": "strong", "global_batch": 64, "model": "m", "platform": "cpu-logical"}
    points = [
        normalize(SweepPoint(devices=1, step_time_s=1.2906, **common)),
        normalize(SweepPoint(devices=2, step_time_s=1.2911, **common)),
        normalize(SweepPoint(devices=4, step_time_s=1.2916, **common)),
    ]
    reasons = " ".join(recommend(points).reasons)
    assert "per step for compute, apply and input, all but the exchange" in reasons
    assert "1290.6 ms" not in reasons and "about 1.29 s per step for compute" in reasons


def test_a_combined_rows_exposed_share_says_which_step_it_is_of():
    # trial 9: two runs at 2 devices (6.2 and 8.3 ms), only the second probed: the
    # row showed "12% ±3 (9 probes)" beside their 7.2 ms median, 12% being of 8.3 ms
    from gpuscale.analysis.sweep import Sweep, SweepPoint, normalize

    common = {"scaling": "strong", "global_batch": 64, "config": "c", "platform": "cpu-logical"}
    points = [
        normalize(SweepPoint(devices=1, step_time_s=0.0043, **common)),
        normalize(SweepPoint(devices=2, step_time_s=0.0062, **common)),
        normalize(
            SweepPoint(
                devices=2,
                step_time_s=0.0083,
                compute_s=0.0024,
                allreduce_s=0.001,
                allreduce_err_s=0.0003,
                apply_s=0.0039,
                input_s=0.0,
                probes=9,
                comm_share_err=0.0003 / 0.0083,
                **common,
            )
        ),
    ]
    rec = recommend(points)
    (row,) = [r for r in rec.table if r.devices == 2]
    assert row.share_step_s == pytest.approx(0.0083)
    out = io.StringIO()
    render(rec, Sweep(points=points), console=Console(file=out, width=160, color_system=None))
    text = out.getvalue()
    assert "12% ±4 (9 probes)" in text and "7.2 ms" in text
    assert (
        "exposed comm at 2 devices: 12% of 8.3 ms, the step of the runs that probed it "
        "(9 probes); its 7.2 ms is the median of all its runs"
    ) in text


def test_no_efficiency_range_collapses_to_one_printed_value():
    # seed002 predicted to 1024 devices printed "0% (0%\u20130%)" in the efficiency column
    sweep = load_inputs([str(SAMPLES / "seed002_mnist.json")])
    rec = recommend(sweep.points, max_devices=1024)
    out = io.StringIO()
    render(rec, sweep, console=Console(file=out, width=200, color_system=None), chart=False)
    text = out.getvalue()
    assert not re.search(r"(\d+(?:\.\d+)?%) \(\1\u2013\1\)", text), text
    assert re.search(r"\d\.\d% \(\d\.\d%\u2013\d\.\d%\)", text)
