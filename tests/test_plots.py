"""The scaling chart: what it shows (gpuscale.plots.scaling), the terminal text
(plotext) and the SVG/PNG file (matplotlib), and `recommend --no-chart / --plot`."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import msgspec
import pytest

from gpuscale.analysis.recommend import recommend
from gpuscale.analysis.sweep import load_inputs
from gpuscale.cli import main
from gpuscale.plots.figure import write_plot
from gpuscale.plots.scaling import (
    PhaseBar,
    build_scaling_chart,
    linear_ticks,
    log_ticks,
    short_number,
)
from gpuscale.plots.terminal import phase_chart, scaling_text, throughput_chart

SAMPLES = Path(__file__).resolve().parent.parent / "sample_runs"
CPU_RUNS = [SAMPLES / "mnist-cnn_1xcpu.ndjson", SAMPLES / "mnist-cnn_2xcpu.ndjson"]


def _rec(*files: Path, max_devices: int | None = None):
    sweep = load_inputs([str(f) for f in files])
    return recommend(
        sweep.points,
        min_efficiency=0.6,
        max_devices=max_devices,
        available_devices=None if max_devices else sweep.available_devices,
    )


def _with_ranges(rec):
    """The recommendation with a +-10% range (80% coverage) on every predicted point,
    as the prediction ranges will set them."""
    table = [
        msgspec.structs.replace(
            p,
            throughput_low=p.throughput * 0.9,
            throughput_high=p.throughput * 1.1,
            coverage=0.8,
        )
        if p.predicted
        else p
        for p in rec.table
    ]
    return msgspec.structs.replace(rec, table=table)


def test_chart_content_of_seed002():
    chart = build_scaling_chart(_rec(SAMPLES / "seed002_mnist.json"))
    assert [s.config for s in chart.series] == ["gather on gpu:0", "nccl"]
    assert chart.counts == [1, 2, 4, 8]
    assert (chart.recommended_config, chart.recommended.devices) == ("nccl", 8)
    # ideal: the fastest configuration at 1 device, times N
    base = chart.ideal[0][1]
    assert [round(v / base, 6) for _, v in chart.ideal] == [1, 2, 4, 8]
    assert [b.devices for b in chart.bars] == [1, 2, 4, 8]
    assert all(b.phases_s is None for b in chart.bars)  # a typed-in table: steps not split
    assert not chart.has_ranges


def test_chart_of_cpu_runs_has_phases_where_measured_and_predictions_marked():
    chart = build_scaling_chart(_rec(*CPU_RUNS))
    measured = [b for b in chart.bars if not b.predicted]
    assert [b.devices for b in measured] == [1, 2] and all(b.phases_s for b in measured)
    assert all(b.phases_s is None for b in chart.bars if b.predicted)
    assert chart.platform_note


def test_ranges_are_carried_when_predictions_have_them():
    chart = build_scaling_chart(_with_ranges(_rec(*CPU_RUNS)))
    predicted = [p for s in chart.series for p in s.predicted]
    assert predicted and all(p.has_range and p.low < p.throughput < p.high for p in predicted)
    assert chart.coverage == 0.8
    legend = scaling_text(chart, 90).plain
    assert "○ predicted │ 80% range" in legend


def test_ticks_and_numbers():
    assert log_ticks(7000, 60000) == [10000, 20000, 50000]
    assert log_ticks(101, 180) == [101, 180]  # no round value between: the ends
    # or, for the terminal chart (its axis then reaches them), even round ticks that
    # hug the data, not the decades either side
    assert log_ticks(101, 180, widen=True) == [100, 120, 140, 160, 180]
    assert log_ticks(86.2, 182, widen=True) == [50, 100, 150, 200]
    assert log_ticks(7000, 60000, widen=True) == [10000, 20000, 50000]
    assert linear_ticks(138.6) == [0, 50, 100, 150]
    assert [short_number(v) for v in (37481, 1500000, 950, 0.5)] == ["37k", "1.5M", "950", "0.5"]


def test_throughput_ticks_hug_data_around_a_thousand():
    """Throughput around 1k: ticks a few hundred apart round it, not an axis from
    500 to 2k or 5k (the round values of the decades either side)."""
    for low, high in ((900, 1300), (1050, 1450), (980, 1020), (1100, 1900)):
        ticks = log_ticks(low, high, widen=True)
        assert 3 <= len(ticks) <= 5, ticks
        assert ticks[0] <= low and ticks[-1] >= high
        assert ticks[-1] - ticks[0] <= 2 * (high - low) + 100, ticks
        gaps = {round(b - a, 9) for a, b in zip(ticks, ticks[1:], strict=False)}
        assert len(gaps) == 1  # evenly spaced
    assert log_ticks(900, 1300, widen=True) == [900, 1000, 1100, 1200, 1300]


def test_terminal_chart_names_its_axes_and_puts_the_legend_under_the_plot():
    text = scaling_text(build_scaling_chart(_rec(SAMPLES / "seed002_mnist.json")), 90).plain
    lines = text.splitlines()
    for label in ("samples/s (log)", "devices (log2)", "ideal", "recommended: 8"):
        assert label in text
    # a typed-in table has no phase breakdown: one line, no bars of whole steps
    assert "Where the step time goes: no phase breakdown in this input: step times only" in text
    assert "ms per step" not in text and "not split" not in text
    legend = next(i for i, line in enumerate(lines) if "╌╌ ideal" in line)
    assert "devices (log2)" in lines[legend - 1]  # right under the x axis title, not inside
    assert max(len(line) for line in lines) <= 90


def test_phase_bars_where_some_counts_are_split_keep_the_not_split_entry(tmp_path):
    """Measured counts split, predicted ones not: the bars stay, with the legend entry."""
    chart = build_scaling_chart(_rec(*CPU_RUNS))
    assert chart.has_split and any(b.phases_s is None for b in chart.bars)
    text = scaling_text(chart, 90).plain
    assert "ms per step" in text and "█ not split" in text and "no phase breakdown" not in text
    out = write_plot(chart, tmp_path / "cpu.svg").read_text()
    assert "ms per step" in out and "step, not split" in out and "no phase breakdown" not in out


def test_every_bar_stands_on_the_zero_line():
    """A bar whose first segments are 0 (a predicted count: all "not split") reaches
    the 0 row, as a split one does: none floats above the axis."""
    chart = build_scaling_chart(_rec(*CPU_RUNS))
    bars = [
        PhaseBar(2, 0.150, (0.120, 0.0, 0.010, 0.020), predicted=False),
        PhaseBar(4, 0.140, None, predicted=True),
        PhaseBar(8, 0.200, None, predicted=True),
    ]
    text = phase_chart(replace(chart, bars=bars), 80, 12).plain
    ticked = [line for line in text.splitlines() if "┤" in line]
    assert ticked[-1].strip().startswith("0┤")
    zero, above = (line.split("┤", 1)[1] for line in ticked[-1:-3:-1])
    filled_above = {i for i, ch in enumerate(above) if ch == "█"}
    filled_zero = {i for i, ch in enumerate(zero) if ch == "█"}
    assert filled_above and filled_above <= filled_zero, f"{above}\n{zero}"


def test_one_count_is_one_narrow_bar_not_the_whole_width():
    """A single measured count (and nothing predicted) is a bar a third of the
    plot wide at most, centred, not one block across the chart."""
    chart = build_scaling_chart(_rec(SAMPLES / "mnist-cnn_1xcpu.ndjson"))
    assert len(chart.bars) == 1
    text = scaling_text(chart, 90).plain
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Where the step time goes"))
    rows = [line for line in lines[start:] if "┤" in line and "█" in line]
    assert rows
    for row in rows:
        plot = row.split("┤", 1)[1].rstrip("│")
        filled = plot.count("█")
        assert 0 < filled <= len(plot) // 3 + 1, row
        left = len(plot) - len(plot.lstrip())
        right = len(plot) - len(plot.rstrip())
        assert abs(left - right) <= 2, row  # centred


def test_recommend_prints_the_chart_under_the_tables_and_no_chart_skips_it(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["recommend", "--from", str(SAMPLES / "seed002_mnist.json")]) == 0
    out = capsys.readouterr().out
    assert out.index("Throughput vs devices") < out.index("Recommendation:")
    assert out.index("└───┴") < out.index("Throughput vs devices")  # under the tables
    assert "\x1b[" not in out  # not a terminal: no colour codes
    assert main(["recommend", "--from", str(SAMPLES / "seed002_mnist.json"), "--no-chart"]) == 0
    assert "Throughput vs devices" not in capsys.readouterr().out


def test_narrow_terminal_gets_no_chart(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "50")
    assert main(["recommend", "--from", str(SAMPLES / "seed002_mnist.json")]) == 0
    assert "Throughput vs devices" not in capsys.readouterr().out


def test_plot_svg_has_axis_titles_and_one_marker_per_device_count(tmp_path, capsys):
    out = tmp_path / "scaling.svg"
    args = ["recommend", "--from", str(SAMPLES / "seed002_mnist.json"), "--plot", str(out)]
    assert main(args) == 0
    assert f"scaling chart written to {out}" in capsys.readouterr().err
    svg = out.read_text()
    for title in (
        "devices (log2 scale)",
        "throughput, samples/s (log scale)",
        "ideal (linear scaling)",
        "recommended: 8 devices, nccl",
        "no phase breakdown in this input: step times only",
    ):
        assert title in svg
    assert "ms per step" not in svg and "not split" not in svg  # no bars of whole steps
    for series in ("nccl", "gather-on-gpu-0"):
        markers = re.findall(rf'<g id="point-{series}-(\d+)"', svg)
        assert sorted(map(int, markers)) == [1, 2, 4, 8]
    assert svg.count('<g id="recommended"') == 1


def test_plot_svg_draws_prediction_ranges(tmp_path):
    from gpuscale.plots.figure import write_plot

    chart = build_scaling_chart(_with_ranges(_rec(*CPU_RUNS)))
    svg = write_plot(chart, tmp_path / "ranges.svg").read_text()
    assert sorted(set(map(int, re.findall(r'<g id="range-[^"]*-(\d+)"', svg)))) == [4, 8]
    assert "predicted (80% range)" in svg


def test_plot_png_is_a_png(tmp_path):
    out = tmp_path / "scaling.PNG"
    assert main(["recommend", "--from", *map(str, CPU_RUNS), "--plot", str(out), "--json"]) == 0
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


@pytest.mark.parametrize(
    ("name", "expected"),
    [("chart.pdf", "must end in .svg or .png"), ("nodir/chart.svg", "cannot write it")],
)
def test_bad_plot_file_is_one_error_line(tmp_path, capsys, name, expected):
    args = [
        "recommend",
        "--from",
        str(SAMPLES / "seed002_mnist.json"),
        "--plot",
        str(tmp_path / name),
    ]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gpuscale: error: --plot") and expected in err[0]


def test_missing_matplotlib_names_the_extra(tmp_path):
    code = (
        "import sys; sys.modules['matplotlib'] = None\n"
        "from gpuscale.cli import main\n"
        f"raise SystemExit(main(['recommend', '--no-chart', '--from', {str(SAMPLES / 'seed002_mnist.json')!r},"
        f" '--plot', {str(tmp_path / 'x.svg')!r}]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "gpuscale: error: --plot needs matplotlib, which is not installed: "
        "pip install 'gpuscale[plot]'"
    )


def test_plots_package_imports_neither_textual_nor_matplotlib_until_asked():
    code = (
        "import sys\n"
        "import gpuscale.plots.scaling, gpuscale.plots.terminal, gpuscale.plots.figure\n"
        "bad = [m for m in ('textual', 'matplotlib', 'tensorflow') if m in sys.modules]\n"
        "raise SystemExit(', '.join(bad) or None)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_throughput_axis_has_round_ticks_over_a_narrow_range():
    """Two counts whose samples/s lie within a factor of about two (no two round
    values between them): the axis reaches out to round values (``500 1k``, never the
    data's own ``876`` or ``86.2``)."""
    from gpuscale.plots.terminal import throughput_chart

    text = throughput_chart(build_scaling_chart(_rec(*CPU_RUNS, max_devices=2)), 60, 14).plain
    labels = [line.split("┤")[0].strip() for line in text.splitlines() if "┤" in line]
    assert len(labels) >= 2, text
    for label in labels:
        digits = label.rstrip("kM").replace(".", "").strip("0")
        assert digits in ("1", "2", "5", "15", "25"), (label, text)


def test_probed_counts_whose_phases_did_not_resolve_say_so_not_step_times_only():
    """Two script recordings with probes whose phases did not add up: the chart
    said "no phase breakdown in this input: step times only"; they were probed."""
    from gpuscale.analysis.sweep import SweepPoint, normalize
    from gpuscale.plots.scaling import build_scaling_chart

    common = {"scaling": "strong", "global_batch": 64, "model": "train.py"}
    points = [
        normalize(SweepPoint(devices=1, step_time_s=0.004, probes=9, **common)),
        normalize(SweepPoint(devices=2, step_time_s=0.003, probes=12, **common)),
    ]
    chart = build_scaling_chart(recommend(points))
    assert not chart.has_split
    text = scaling_text(chart, 80).plain
    # wrapped on spaces at 80 columns (a terminal cut it mid-word: "step tim" / "es only")
    note = (
        "Where the step time goes: phases measured but not resolved (9 probes at 1 device, "
        "12 at 2 devices): step times only"
    )
    assert note in text.replace("\n", " ")
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "no phase breakdown" not in text
    unprobed = [msgspec.structs.replace(p, probes=None) for p in points]
    assert (
        "no phase breakdown in this input"
        in scaling_text(build_scaling_chart(recommend(unprobed)), 80).plain
    )


def test_the_plots_note_of_many_probed_counts_stays_inside_the_figure(tmp_path, monkeypatch):
    """Four probed counts whose phases did not resolve: the note, said per count, ran
    off the PNG's right edge ("..., 15 at 8 device")."""
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    from gpuscale.analysis.sweep import SweepPoint, normalize

    common = {"scaling": "strong", "global_batch": 64, "model": "train.py"}
    points = [
        normalize(SweepPoint(devices=n, step_time_s=0.004 * n**0.3, probes=p, **common))
        for n, p in ((1, 9), (2, 12), (4, 7), (8, 15))
    ]
    chart = build_scaling_chart(recommend(points))
    assert not chart.has_split and "15 at 8 devices" in chart.split_note
    boxes = []
    savefig = Figure.savefig

    def measuring(fig, *args, **kwargs):
        fig.draw_without_rendering()
        renderer = fig.canvas.get_renderer()
        (note,) = [t for t in fig.texts if t.get_gid() == "no-split-note"]
        boxes.append((note.get_text(), note.get_window_extent(renderer), fig.bbox))
        return savefig(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", measuring)
    write_plot(chart, tmp_path / "p.png")
    ((text, box, figure),) = boxes
    assert "15 at 8 devices" in text.replace("\n", " ")
    assert figure.x0 <= box.x0 and box.x1 <= figure.x1, (box, figure)
    assert figure.y0 <= box.y0, (box, figure)


def test_a_long_phase_chart_title_wraps_on_a_space_not_before_its_bracket():
    # at 80 columns "Where the step time goes (..., CPU devices" left ")" alone
    trial = Path(__file__).parent / "fixtures" / "trial"
    sweep = load_inputs(
        [
            str(trial / "20261126-123458_mnist-cnn-w32_1xcpu.ndjson.gz"),
            str(trial / "20261126-123505_mnist-cnn-w32_2xcpu.ndjson.gz"),
        ]
    )
    lines = scaling_text(build_scaling_chart(recommend(sweep.points)), 80).plain.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Where the step time goes"))
    assert len(lines[start]) <= 80 and lines[start + 1] == "devices)", lines[start : start + 2]


def _sweep_file(tmp_path, points, name="sweep.json"):
    """A typed-in sweep of one configuration: ``points`` as (devices, samples/s)."""
    doc = {
        "format": "gpuscale-sweep",
        "version": 1,
        "title": "t",
        "available_devices": max(n for n, _ in points),
        "defaults": {"model": "m", "scaling": "strong", "global_batch": 64, "platform": "gpu"},
        "points": [{"config": "a", "devices": n, "throughput": v} for n, v in points],
    }
    path = tmp_path / name
    path.write_text(msgspec.json.encode(doc).decode())
    return path


def _labels_as_saved(monkeypatch):
    """Every axis's tick labels (text and box) of each figure as it is saved."""
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    saved: list[list[list]] = []
    savefig = Figure.savefig

    def measuring(fig, *args, **kwargs):
        fig.draw_without_rendering()
        renderer = fig.canvas.get_renderer()
        saved.append(
            [
                [
                    (label.get_text(), label.get_window_extent(renderer))
                    for label in axis.get_majorticklabels()
                    if label.get_visible() and label.get_text()
                ]
                for ax in fig.axes
                for axis in (ax.xaxis, ax.yaxis)
            ]
        )
        return savefig(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", measuring)
    return saved


@pytest.mark.parametrize(
    "points",
    [
        [(1, 101), (2, 180)],  # a trial's: 202 (the ideal) was drawn on 200
        [(1, 990), (2, 1900)],  # 990 on 1k
        [(1, 1010), (2, 1300)],  # 2.02k on 2k
        [(1, 480), (2, 900), (4, 1500)],
        [(n, 1000 * n**0.8) for n in range(1, 17)],  # every count measured, 15 by 16
        [(1, 0.21), (2, 0.35)],
    ],
    ids=["101-180", "990-1900", "1010-1300", "480-1500", "1-to-16", "fractions"],
)
def test_no_two_tick_labels_of_the_plot_overlap(tmp_path, monkeypatch, points):
    saved = _labels_as_saved(monkeypatch)
    write_plot(build_scaling_chart(_rec(_sweep_file(tmp_path, points))), tmp_path / "p.png")
    _assert_apart(saved)


def test_no_two_tick_labels_overlap_under_many_predicted_bars(tmp_path, monkeypatch):
    """Predicted counts up to 1024: their bars' labels ("1024 (pred.)") crowd the axis."""
    saved = _labels_as_saved(monkeypatch)
    write_plot(build_scaling_chart(_rec(*CPU_RUNS, max_devices=1024)), tmp_path / "p.svg")
    _assert_apart(saved)
    (figure,) = saved
    bars = figure[2]  # the bottom panel's x axis: still the first and the last count
    assert bars[0][0] == "1" and bars[-1][0].startswith("1024")


def test_a_crowded_log_axis_keeps_its_decades(tmp_path, monkeypatch):
    """Predicted up to 1024 devices (a trial's CPU sweep), the throughput axis spans
    20 to 1.7M: thinning its labels from the bottom kept 500, 5k and 50k and left 1k,
    10k and 100k out."""
    saved = _labels_as_saved(monkeypatch)
    chart = build_scaling_chart(_rec(*CPU_RUNS, max_devices=1024))
    (series,) = chart.series
    falling = [
        replace(p, throughput=1700 * p.devices**-0.65, low=None, high=None) for p in series.points
    ]
    chart = replace(
        chart,
        series=[replace(series, points=falling)],
        ideal=[(n, 1700.0 * n) for n in chart.counts],
        recommended=falling[0],
    )
    write_plot(chart, tmp_path / "p.png")
    _assert_apart(saved)
    (figure,) = saved
    throughput = [text for text, _ in figure[1]]
    assert {"100", "1k", "10k", "100k", "1M"} <= set(throughput), throughput
    assert len(throughput) > 5, throughput  # and labels between them where they fit


def test_the_sample_plots_label_their_ticks_apart(tmp_path, monkeypatch):
    saved = _labels_as_saved(monkeypatch)
    for sample in sorted(SAMPLES.glob("*.json")):
        write_plot(build_scaling_chart(_rec(sample)), tmp_path / f"{sample.stem}.png")
    write_plot(build_scaling_chart(_rec(*CPU_RUNS)), tmp_path / "cpu.png")
    assert len(saved) == len(list(SAMPLES.glob("*.json"))) + 1
    _assert_apart(saved)


def _assert_apart(saved) -> None:
    assert saved, "no figure was saved"
    for figure in saved:
        for labels in figure:
            for (a, box_a), (b, box_b) in itertools.combinations(labels, 2):
                assert not box_a.overlaps(box_b), f"tick labels {a!r} and {b!r} overlap"
        throughput = figure[1]  # the top panel's y axis: labelled at least twice
        assert len(throughput) >= 2, figure


def _columns_in(text, style: str) -> set[int]:
    """The columns of ``text``'s lines that have a cell drawn in ``style`` (a colour)."""
    starts, offset = [], 0
    for line in text.plain.split("\n"):
        starts.append(offset)
        offset += len(line) + 1
    columns = set()
    for span in text.spans:
        if style not in str(span.style):
            continue
        for at in range(span.start, span.end):
            if text.plain[at] in " \n":
                continue
            row = max(i for i, start in enumerate(starts) if start <= at)
            columns.add(at - starts[row])
    return columns


def test_the_ideal_line_is_dashed_as_its_legend_and_the_readme_say():
    """The README and --plot's file draw the ideal line dashed; the terminal drew it
    solid, a line like the measured one, under a legend of '── ideal'."""
    from gpuscale.plots.scaling import ChartPoint, ChartSeries, ScalingChart

    flat = [ChartPoint(n, 1000.0, False) for n in (1, 2, 4, 8)]  # far under the ideal
    chart = ScalingChart(
        series=[ChartSeries("a", flat)],
        ideal=[(n, 1000.0 * n) for n in (1, 2, 4, 8)],
        recommended=flat[0],
        recommended_config="a",
        bars=[],
        scaling="strong",
        counts=[1, 2, 4, 8],
    )
    text = throughput_chart(chart, 80, 20)
    assert "╌╌ ideal" in text.plain and "── ideal" not in text.plain
    plot = text[: text.plain.index("samples/s (log)")]  # the legend's own symbol left out
    ideal = _columns_in(plot, "color(8)")  # plotext's grey
    assert len(ideal) > 20
    gaps = [c for c in range(min(ideal), max(ideal)) if c not in ideal and c > min(ideal) + 8]
    assert len(gaps) >= 10, sorted(ideal)  # pieces with gaps between, across the chart
