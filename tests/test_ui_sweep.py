"""The scaling view (gpuscale.ui.sweep_app): snapshots of a measured 1-2-4-8 sweep,
a sweep stopped after two counts and a CPU-logical sweep; keys; `replay` of
several recordings."""

from __future__ import annotations

import sys

import pytest
from sweep_fixtures import (
    CPU_RUNS,
    SAMPLES,
    cpu_sweep,
    gpu_sweep,
    one_count_sweep,
    published_sweep,
    stopped_sweep,
)
from textual.widgets import Static

from gpuscale.cli import main
from gpuscale.ui.sweep_app import SweepApp
from gpuscale.ui.widgets.screens import HelpScreen


async def settle(pilot) -> None:
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    pilot.app.clear_notifications()
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_measured_sweep_1_2_4_8(snap_compare, size):
    assert snap_compare(SweepApp(gpu_sweep()), terminal_size=size, run_before=settle)


def test_sweep_stopped_after_two_counts(snap_compare):
    assert snap_compare(SweepApp(stopped_sweep()), terminal_size=(120, 40), run_before=settle)


def test_cpu_logical_sweep(snap_compare):
    assert snap_compare(SweepApp(cpu_sweep()), terminal_size=(80, 24), run_before=settle)


def test_sweep_of_one_measured_count(snap_compare):
    assert snap_compare(SweepApp(one_count_sweep()), terminal_size=(120, 40), run_before=settle)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
async def test_one_measured_count_says_so_instead_of_a_chart_of_one_dot(size):
    """No throughput chart of a single dot, and no caveat on predictions where
    nothing is predicted; a short screen shows the bars (the recommendation says what
    to measure next)."""
    app = SweepApp(one_count_sweep())
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        advice = str(app.advice_panel.body.render())
        assert "predictions" not in advice and "nothing predicted" in advice
        assert "Measure 2 devices next" in advice
        if size[1] < 36:
            assert app.phases_panel.display and not app.throughput_panel.display
            return
        said = " ".join(str(app.throughput_panel.render()).split())
        assert said == (
            "One count measured: 1 device, 918 samples/s. A scaling curve needs a "
            "second: measure 2 devices next."
        )
        assert app.throughput_panel.outer_size.height == 6
        assert "ms per step" in str(app.phases_panel.render())


async def test_stopped_sweep_says_it_recommends_from_what_was_measured():
    app = SweepApp(stopped_sweep())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        advice = str(app.advice_panel.body.render())
        assert "Sweep stopped after 2 of 4 counts" in advice
        assert "recommending from what was measured (1, 2 devices)" in advice
        assert app.recommendation is not None and app.recommendation.table


async def test_the_recommendation_can_be_read_in_full_at_80x24():
    """Focused from the start, ↓ and pgdn scroll it; r shows it full screen (r again:
    back); ? shows the scaling view's keys."""
    app = SweepApp(cpu_sweep())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        panel = app.advice_panel
        assert app.focused is panel
        assert panel.max_scroll_y > 0  # more than the panel shows at this size
        await pilot.press("pagedown")
        await pilot.pause()
        assert panel.scroll_y > 0
        await pilot.press("r")
        await pilot.pause()
        assert app.screen.maximized is panel and panel.region.height >= 20
        await pilot.press("r")
        await pilot.pause()
        assert app.screen.maximized is None and panel.region.height < 20
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        shown = " ".join(str(w.render()) for w in app.screen.query(Static))
        assert "Scaling view keys" in shown and "the recommendation full screen" in shown
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)


async def test_a_long_heading_wraps_rather_than_being_cut_at_120_columns():
    view = gpu_sweep()
    view.heading = (
        "Scaling of 2 configurations, 64 per device (weak scaling), on NVIDIA "
        "A100-SXM4-80GB with a long partition name from 8 files"
    )
    app = SweepApp(view)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        header = app.header_panel
        assert header.region.height == 3
        shown = " ".join(line.strip() for line in str(_text_of(header)).splitlines())
        assert "from 8 files" in shown and "COMPLETE" in shown and "…" not in shown


def _text_of(widget) -> str:
    lines = widget.render_lines(widget.region.reset_offset)
    return "\n".join("".join(segment.text for segment in line) for line in lines)


async def test_c_switches_between_the_chart_and_the_bars_on_a_small_terminal():
    app = SweepApp(gpu_sweep())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app.throughput_panel.display and not app.phases_panel.display
        await pilot.press("c")
        await pilot.pause()
        assert app.phases_panel.display and not app.throughput_panel.display
        assert "ms per step" in str(app.phases_panel.render())
        await pilot.press("c")
        await pilot.pause()
        assert app.throughput_panel.display and not app.phases_panel.display


async def test_wide_terminal_shows_both_charts_and_the_recommendation_beside():
    app = SweepApp(gpu_sweep())
    async with app.run_test(size=(200, 60)) as pilot:
        await settle(pilot)
        assert app.throughput_panel.display and app.phases_panel.display
        assert app.advice_panel.region.x > app.throughput_panel.region.right - 1
        chart = str(app.throughput_panel.render())
        assert "samples/s (log)" in chart and "devices (log2)" in chart
        assert "recommended: 8" in chart or "recommended: 4" in chart


@pytest.mark.parametrize(
    "size", [(80, 24), (120, 40), (200, 60)], ids=["80x24", "120x40", "200x60"]
)
async def test_no_phase_breakdown_is_one_line_not_bars(size):
    """A published table has step times only: no grey 'not split' bars, one line
    instead, and the throughput chart gets the room."""
    app = SweepApp(published_sweep())
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        note = "no phase breakdown in this input: step times only"
        if size[1] < 36:  # one chart at a time: no bars to switch to, the line on its border
            await pilot.press("c")
            await pilot.pause()
            assert app.throughput_panel.display and not app.phases_panel.display
            assert app.throughput_panel.border_subtitle == note
            return
        assert str(app.phases_panel.render()) == note
        assert app.phases_panel.outer_size.height == 3
        if size[1] >= 36:
            assert app.throughput_panel.outer_size.height > 20
            assert "samples/s (log)" in str(app.throughput_panel.render())


async def test_phases_not_resolved_is_said_short_on_the_charts_and_in_full_beside():
    """The trial's sweep (probed, phases not resolved): at 80x24 the note on the
    chart's border was cut ("…(1 probe at each of 1 and 2 devices): st…"), at 80x40
    its own panel ended in "…": the charts say it short, the recommendation in full."""
    from pathlib import Path

    from gpuscale.analysis.sweep import load_inputs
    from gpuscale.ui.sweep_app import SweepView, sweep_heading

    trial = Path(__file__).parent / "fixtures" / "trial"
    sweep = load_inputs(
        [
            str(trial / "20261128-013323_mnist-cnn-w32_1xcpu.ndjson.gz"),
            str(trial / "20261128-013329_mnist-cnn-w32_2xcpu.ndjson.gz"),
        ]
    )
    short = "phases not resolved: step times only"
    full = "phases measured but not resolved (1 probe at each of 1 and 2 devices)"
    app = SweepApp(SweepView(points=sweep.points, heading=sweep_heading(sweep.points, 2)))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app.throughput_panel.border_subtitle == short
        assert short in app.export_screenshot().replace("&#160;", " ")  # whole on screen
        advice = " ".join(_text_of(app.advice_panel.body).split())
        assert f"Where the step time goes: {full}: step times only." in advice
        await pilot.resize_terminal(80, 40)
        await settle(pilot)
        assert app.phases_panel.display and str(app.phases_panel.render()) == short
        await pilot.resize_terminal(200, 60)
        await settle(pilot)
        assert str(app.phases_panel.render()) == f"{full}: step times only"


def _plot_rows(panel) -> int:
    """The rows of the throughput chart's plot: between its frame's top and bottom."""
    lines = str(panel.render()).splitlines()
    top = next(i for i, line in enumerate(lines) if "┌" in line)
    bottom = next(i for i, line in enumerate(lines) if "└" in line)
    return bottom - top - 1


MIN_PLOT_ROWS = 5
"""The fewest rows the throughput chart's plot gets at 80x24 (2 read as no scaling)."""


@pytest.mark.parametrize("sweep", [published_sweep, cpu_sweep], ids=["unsplit", "split"])
async def test_the_throughput_chart_keeps_a_useful_height_at_80x24(sweep):
    """At 80x24 a sweep without bars kept their one line in a panel of its own under
    the chart, which left the plot 2 rows tall (the measured line flat along one row,
    reading as no scaling): the line is on the chart's lower border instead."""
    app = SweepApp(sweep())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app.throughput_panel.display
        assert _plot_rows(app.throughput_panel) >= MIN_PLOT_ROWS
        if sweep is published_sweep:
            assert not app.phases_panel.display
            note = "no phase breakdown in this input: step times only"
            assert app.throughput_panel.border_subtitle == note
            # a tall screen has room for the line's own panel: not said twice
            await pilot.resize_terminal(80, 40)
            await settle(pilot)
            assert app.phases_panel.display and app.throughput_panel.border_subtitle == ""
            assert str(app.phases_panel.render()) == note
        else:
            assert app.throughput_panel.border_subtitle == ""


async def test_s_saves_a_screenshot_with_the_chart(tmp_path):
    app = SweepApp(gpu_sweep(), screenshot_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("s")
        await pilot.pause()
        assert app.last_screenshot is not None and app.last_screenshot.parent == tmp_path
        svg = app.last_screenshot.read_text()
        assert "Throughput&#160;vs&#160;devices" in svg or "Throughput vs devices" in svg
        assert "ms&#160;per&#160;step" in svg or "ms per step" in svg


async def test_q_quits_and_t_changes_theme():
    app = SweepApp(cpu_sweep())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        before = app.theme
        await pilot.press("t")
        assert app.theme != before
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


def _in_a_terminal(monkeypatch) -> None:
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)


def test_replay_of_several_recordings_opens_the_scaling_view(monkeypatch):
    shown = []
    monkeypatch.setattr(SweepApp, "run", lambda self: shown.append(self.view))
    _in_a_terminal(monkeypatch)
    assert main(["replay", *map(str, CPU_RUNS)]) == 0
    (view,) = shown
    assert view.measured_counts == [1, 2]
    assert "CPU logical devices, NOT GPUs" in view.heading


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        (["nope.ndjson"], "no such file"),
        ([str(SAMPLES / "seed002_mnist.json")], "not compared"),
    ],
)
def test_replay_of_a_bad_sweep_is_one_error_line(capsys, files, expected):
    assert main(["replay", str(CPU_RUNS[0]), *files]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gpuscale: error:")


def test_replay_of_a_sweep_file_opens_its_scaling_view(monkeypatch):
    shown = []
    monkeypatch.setattr(SweepApp, "run", lambda self: shown.append(self.view))
    _in_a_terminal(monkeypatch)
    assert main(["replay", str(SAMPLES / "seed002_mnist.json")]) == 0
    (view,) = shown
    assert view.measured_counts == [1, 2, 4, 8]
    assert view.heading.startswith(
        "Scaling of six-conv MNIST CNN (128 channels), global batch 1024"
    )


@pytest.mark.parametrize(
    "inputs",
    [list(map(str, CPU_RUNS)), [str(SAMPLES / "seed002_mnist.json")]],
    ids=["runs", "file"],
)
def test_the_scaling_view_off_a_terminal_prints_what_recommend_from_prints(
    monkeypatch, capsys, inputs
):
    """Piped or redirected, a screen would write escape codes for ever: the text
    result instead, as ``recommend --from`` prints it, and a note on stderr."""
    monkeypatch.setattr(SweepApp, "run", lambda self: pytest.fail("a screen off a terminal"))
    assert main(["replay", *inputs]) == 0
    replayed = capsys.readouterr()
    assert main(["recommend", "--from", *inputs]) == 0
    assert replayed.out == capsys.readouterr().out and "Recommendation: " in replayed.out
    note = replayed.err.strip().splitlines()[-1]
    assert "stdout is not one" in note and "recommend --from" in note


async def test_a_heading_too_long_for_two_lines_still_leaves_the_state_line():
    view = gpu_sweep()
    view.heading = "Sweep on CPU logical devices, NOT GPUs, " + "a long note " * 30
    app = SweepApp(view)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        lines = _text_of(app.header_panel).splitlines()
        assert len(lines) == 3 and lines[1].rstrip().endswith("…")
        assert lines[2].strip().startswith("COMPLETE  devices: 1✓ 2✓ 4✓ 8✓")


NO_NVML_HEADING = (
    "Sweep on CPU logical devices sharing 2 CPU cores, NOT GPUs (No NVIDIA driver found "
    "(libnvidia-ml.so.1 not found)); device counts 1, 2; one TensorFlow process for "
    "counts 1, 2"
)
"""What ``recommend --watch`` says on a machine without NVIDIA's driver."""


async def test_a_narrow_header_shortens_the_heading_rather_than_cutting_it():
    """At 80 columns the NVML message took the heading's two lines and cut the rest
    (``so…``): the aside goes, then the last clauses, so what matters is whole; the
    whole heading is the header's tooltip, and is shown as is where it fits."""
    view = cpu_sweep()
    view.heading = NO_NVML_HEADING
    app = SweepApp(view)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        lines = _text_of(app.header_panel).splitlines()
        shown = " ".join(line.strip() for line in lines[:2])
        assert "…" not in shown, lines
        assert "sharing 2 CPU cores, NOT GPUs" in shown, lines
        assert "libnvidia-ml" not in shown
        assert lines[2].strip().startswith("COMPLETE")
        assert app.header_panel.tooltip == NO_NVML_HEADING
        await pilot.resize_terminal(200, 40)
        await pilot.pause()
        await pilot.pause()
        shown = " ".join(line.strip() for line in _text_of(app.header_panel).splitlines())
        assert "libnvidia-ml.so.1 not found" in shown and "one TensorFlow process" in shown
        assert app.header_panel.tooltip is None
