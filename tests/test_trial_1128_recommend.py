"""What the new-user trial of 2026-11-28 found in ``recommend``, from its own
recordings (``tests/fixtures/trial/20261128-*``)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from gpuscale.analysis.recommend import recommend
from gpuscale.analysis.sweep import load_inputs
from gpuscale.commands.recommend_render import render
from gpuscale.plots.scaling import build_scaling_chart, probes_per_count

TRIAL = Path(__file__).parent / "fixtures" / "trial"
SWEEP_STEPS_20 = [
    str(TRIAL / "20261128-013323_mnist-cnn-w32_1xcpu.ndjson.gz"),
    str(TRIAL / "20261128-013329_mnist-cnn-w32_2xcpu.ndjson.gz"),
]
"""``recommend --steps 20`` on 2 CPU logical devices: 1 device 93.7 ms, 2 devices
54.2 ms (1.73x); one probe at each count, neither splitting its step."""


def _text(paths: list[str]) -> str:
    sweep = load_inputs(paths)
    rec = recommend(sweep.points, available_devices=sweep.available_devices)
    out = io.StringIO()
    render(rec, sweep, console=Console(file=out, width=200, color_system=None), chart=True)
    return " ".join(out.getvalue().split())


def test_probes_are_counted_per_device_count_everywhere():
    # the table said "not resolved (1 probe)" for 2 devices, the line under the chart
    # (and the scaling view, the same note) "not resolved (2 probes)": summed over counts
    sweep = load_inputs(SWEEP_STEPS_20)
    chart = build_scaling_chart(recommend(sweep.points))
    assert not chart.has_split
    assert "(1 probe at each of 1 and 2 devices)" in chart.split_note
    text = _text(SWEEP_STEPS_20)
    assert "not resolved (1 probe)" in text
    assert "(1 probe at each of 1 and 2 devices)" in text and "2 probes" not in text


def test_probes_per_count_words():
    assert probes_per_count([(2, 1)]) == "1 probe at 2 devices"
    assert probes_per_count([(1, 1)]) == "1 probe at 1 device"
    assert probes_per_count([(2, 3), (1, 3), (4, 3)]) == "3 probes at each of 1, 2 and 4 devices"
    assert probes_per_count([(1, 9), (2, 12)]) == "9 probes at 1 device, 12 at 2 devices"
