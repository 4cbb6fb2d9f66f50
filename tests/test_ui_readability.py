"""Readable at a glance: charts name their axes (utilization against seconds,
whole step numbers), legends sit under the data, one series per chart area, the
recommendation leaves the charts the room, and a finished replay without host
samples says so."""

from __future__ import annotations

import pytest
from ui_fixtures import cpu_run, gpu8_run, replay

from gpuscale.events.schema import HostSample
from gpuscale.ui.app import build_app
from gpuscale.ui.widgets.charts import (
    CHART_TITLES,
    UTIL_CHART,
    build_breakdown_chart,
    build_step_chart,
    build_util_chart,
)


async def _final_snapshot(events, size=(120, 40)):
    app = build_app(replay(events, end=True))
    async with app.run_test(size=size) as pilot:
        await app.settle()
        await pilot.pause()
        return app, app.model.snapshot()


async def test_replay_without_host_samples_says_so_after_the_end():
    events = [e for e in cpu_run() if not isinstance(e, HostSample)]
    app = build_app(replay(events, end=True))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.settle()
        await pilot.pause()
        host = app.device_grid._cards[0].body
        assert "no host samples in this run" in str(host.render())
        assert "waiting" not in str(host.render())


async def test_step_chart_draws_one_series_and_the_phase_legend_is_under_the_bars():
    app, snap = await _final_snapshot(cpu_run())
    step = build_step_chart(snap, 40, 16).plain
    assert "samples/s" not in step and "ms" in step and "step" in step
    bars = build_breakdown_chart(snap, 40, 16).plain.splitlines()
    legend_rows = [i for i, line in enumerate(bars) if "█ compute" in line]
    axis_row = max(i for i, line in enumerate(bars) if "└" in line)
    assert legend_rows and min(legend_rows) > axis_row  # under the chart, not on the bars
    assert "input" in "\n".join(bars[axis_row:])  # every phase named, wrapped if need be


def test_chart_titles_fit_a_narrow_panel():
    assert all(len(title) <= 18 for title in CHART_TITLES.values())


def _tick_labels(chart_text: str) -> list[int]:
    """The x axis's tick labels: the numbers on the line under the axis."""
    lines = chart_text.splitlines()
    axis_row = max(i for i, line in enumerate(lines) if "└" in line)
    return [int(word) for word in lines[axis_row + 1].split() if word.lstrip("-").isdigit()]


async def test_utilization_is_drawn_against_seconds_since_the_start():
    """Not sample numbers: gpu8_run samples at 10 Hz for 20 s (200 samples), so
    seconds end near 20 where sample numbers would reach 120 (the history kept)."""
    from ui_fixtures import gpu8_run

    from gpuscale.ui.widgets.charts import build_util_chart

    app, snap = await _final_snapshot(gpu8_run())
    assert snap.origin_t == snap.start.t
    chart = build_util_chart(snap, 60, 16).plain
    assert "s since start" in chart and "sample" not in chart
    ticks = _tick_labels(chart)
    assert len(ticks) >= 2 and 10 <= max(ticks) <= 20
    # host CPU (no GPU): its own samples' times, the same axis
    app, snap = await _final_snapshot(cpu_run())
    chart = build_util_chart(snap, 60, 16).plain
    assert "host CPU" in chart and "s since start" in chart
    assert 20 <= max(_tick_labels(chart)) <= 30


async def test_live_utilization_counts_seconds_from_the_runs_start():
    """Live as in replay: the same model, the samples' own times."""
    from ui_fixtures import FakeLiveRun, gpu8_run

    from gpuscale.ui.sources import LiveSource
    from gpuscale.ui.widgets.charts import UTIL_CHART

    app = build_app(LiveSource(FakeLiveRun(gpu8_run())))
    async with app.run_test(size=(200, 50)) as pilot:
        await app.settle()
        await pilot.pause()
        chart = str(app.charts[UTIL_CHART].render())
        assert "s since start" in chart
        assert 10 <= max(_tick_labels(chart)) <= 20


def test_step_numbers_on_the_axis_are_whole():
    from gpuscale.ui.widgets.charts import whole_ticks

    assert whole_ticks(4, 25, 40) == [10, 20]
    assert whole_ticks(6, 94, 38) == [20, 40, 60, 80]  # never a single tick
    assert whole_ticks(3, 9, 40) == [4, 6, 8]


async def test_the_recommendation_is_a_compact_row_under_the_charts_when_wide():
    """At 120 columns and more the charts get the whole width and the
    recommendation is a row under them, its facts side by side, nothing clipped."""
    from ui_fixtures import gpu8_run

    for size in ((120, 40), (200, 60)):
        app = build_app(replay(gpu8_run(), end=True))
        async with app.run_test(size=size) as pilot:
            await app.settle()
            await pilot.pause()
            await app.settle()
            await pilot.pause()
            advice = app.advice_panel
            charts = app.query_one("#charts")
            assert advice.region.y >= charts.region.bottom
            assert advice.region.width == size[0]
            assert charts.region.width == size[0]
            assert all(chart.region.width >= size[0] // 3 - 1 for chart in app.charts.values())
            assert all(chart.region.height >= 10 for chart in app.charts.values())
            body = str(advice.body.render())
            assert (
                "step time 61.5 ms median · throughput 8,328 samples/s at median · "
                "wall clock 2,580 samples/s: between steps 69%"
            ) in body
            assert "confidence medium: " in body
            width = advice.content_size.width
            assert max(len(line) for line in body.splitlines()) <= width
            assert advice.max_scroll_y == 0  # all of it shown


async def test_the_recommendation_is_a_narrow_column_on_a_small_terminal():
    """80x24: one chart shown, the recommendation a narrow column beside it, one
    fact a line (scrollable)."""
    from ui_fixtures import gpu8_run

    app = build_app(replay(gpu8_run(), end=True))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        await pilot.pause()
        shown = [chart for chart in app.charts.values() if chart.display]
        assert len(shown) == 1 and shown[0].region.width >= 44
        assert app.advice_panel.region.width == 34
        assert app.advice_panel.region.x >= shown[0].region.right
        assert "step time    61.5 ms median" in str(app.advice_panel.body.render())


async def test_samples_before_the_runs_start_give_no_negative_seconds():
    """A script's samples arrive before its run's own start (Python and TensorFlow
    loading): the axis "s since start" starts at 0, not at -2."""
    from gpuscale.ui.widgets.charts import build_util_chart

    events = cpu_run()
    start = events[0]
    early = [
        HostSample(t=start.t - dt, cpu_pct=50.0, mem_used_bytes=10**9, mem_total_bytes=8 * 10**9)
        for dt in (3.0, 2.5, 2.0, 1.5, 1.0, 0.5)
    ]
    first_seconds = [e for e in events[1:] if e.t <= start.t + 2.5]  # a short run, ticks 1 s apart
    app, snap = await _final_snapshot([start, *early, *first_seconds])
    assert min(snap.host_cpu_history_t) < snap.origin_t
    chart = build_util_chart(snap, 60, 16).plain
    ticks = _tick_labels(chart)
    assert ticks and min(ticks) >= 0, chart


def _y_ticks(chart_text: str) -> list[float]:
    return [float(line.split("┤")[0]) for line in chart_text.splitlines() if "┤" in line]


async def test_one_phase_probe_is_one_narrow_bar_with_even_ticks():
    from gpuscale.events.schema import PhaseEvent

    events, seen = [], 0
    for event in cpu_run():
        seen += isinstance(event, PhaseEvent)
        if not (isinstance(event, PhaseEvent) and seen > 1):
            events.append(event)
    app, snap = await _final_snapshot(events)
    assert len(snap.phases) == 1
    chart = build_breakdown_chart(snap, 44, 12).plain
    rows = [line.split("│")[1] for line in chart.splitlines() if line.count("│") >= 2]
    widest = max(row.count("█") for row in rows)
    assert 0 < widest <= len(rows[0]) // 4, chart  # a bar, not a block filling the panel
    assert "one probe" in chart
    ticks = sorted(_y_ticks(chart))
    gaps = {round(b - a, 6) for a, b in zip(ticks, ticks[1:], strict=False)}
    assert ticks[0] == 0 and len(gaps) == 1, ticks  # evenly spaced from 0
    assert ticks[-1] >= snap.phases[0].compute_s * 1000


async def test_utilization_ticks_are_round_percentages_at_every_size():
    """0, 25, 50, 75, 100 (or 0, 50, 100 where rows are few): never ``83.3 66.7``."""
    _app, snap = await _final_snapshot(gpu8_run())
    for width, height in ((40, 12), (40, 16), (78, 12), (38, 30), (40, 9)):
        chart = build_util_chart(snap, width, height).plain
        ticks = [line.split("┤")[0].strip() for line in chart.splitlines() if "┤" in line]
        assert ticks[0] == "100" and ticks[-1] == "0", (width, height, ticks)
        assert set(ticks) <= {"0", "25", "50", "75", "100"}, (width, height, ticks)
        if height >= 12:
            assert "50" in ticks, (width, height, ticks)


@pytest.mark.parametrize("gpm", [False, True], ids=["without-gpm", "gpm"])
async def test_eight_gpus_are_all_named_under_the_utilization_chart_at_120_columns(gpm):
    """Without GPM a line per GPU, each named; with it (Hopper), busy beside working
    as the eight GPUs' mean, which the legend says (tests/test_gpu_busy_working_views.py)."""
    app = build_app(replay(gpu8_run(gpm=gpm), end=True))
    async with app.run_test(size=(120, 40)) as pilot:
        # settle again once the layout has its final sizes: the first settle can draw
        # the charts at the sizes of a layout still in progress (seen under load in CI)
        await app.settle()
        await pilot.pause()
        await app.settle()
        await pilot.pause()
        width, height = app.charts[UTIL_CHART].content_size
        drawn = str(app.charts[UTIL_CHART].render())
    legend = build_util_chart(app.model.snapshot(), width, height).plain.splitlines()[-1]
    assert legend in drawn
    if gpm:
        assert legend == "mean of 8 GPUs"  # under "⠶ busy  ⠶ SM (GPM)  ⠶ tensor (GPM)"
    else:
        assert all(f"⠶{n}" in legend or f"GPU{n}" in legend for n in range(8)), legend
    assert "…" not in legend and len(legend) <= width


async def test_step_time_ticks_are_round_at_every_scale_and_size():
    """``1,000 2,000 3,000 4,000`` (or 1, 2 or 5 x 10^k apart at any scale): never
    plotext's ``1704.7 2672.3 3783.3``; the ticks cover every step drawn."""
    import dataclasses
    import math

    from gpuscale.ui.widgets.charts import binned

    _app, snap = await _final_snapshot(cpu_run())
    for scale in (0.01, 1.0, 13.7, 27.3):  # step times of ~2 ms to ~5 s
        scaled = dataclasses.replace(snap, step_times_s=[t * scale for t in snap.step_times_s])
        pairs = zip(scaled.step_times_s, snap.steps_warmup, strict=True)
        counted = [t * 1000 for t, warm in pairs if not warm]
        for width, height in ((40, 12), (60, 30), (44, 8)):
            chart = build_step_chart(scaled, width, height).plain
            labels = [line.split("┤")[0].strip() for line in chart.splitlines() if "┤" in line]
            ticks = sorted(float(label.replace(",", "")) for label in labels)
            assert len(ticks) >= 2, (scale, width, height, chart)
            gaps = {round(b - a, 9) for a, b in zip(ticks, ticks[1:], strict=False)}
            assert len(gaps) == 1, (scale, width, height, labels)
            gap = gaps.pop()
            mantissa = gap / 10 ** math.floor(math.log10(gap))
            assert round(mantissa, 6) in (1.0, 2.0, 5.0), (scale, labels)
            assert all(round(t / gap, 6).is_integer() for t in ticks), (scale, labels)
            _, drawn = binned(counted, counted, max(2 * (width - 16), 8))  # as drawn
            assert ticks[0] <= min(drawn) and ticks[-1] >= max(drawn), (scale, labels)


async def test_a_lone_cpu_replica_card_speaks_of_no_other_replicas():
    """`gpuscale watch -- python train.py` on a CPU: one replica, whose card said
    "shared with the other replicas"; with two it still says so."""
    from ui_fixtures import synthetic_run

    for replicas, said, unsaid in ((1, "only replica", "other"), (2, "other", "only replica")):
        events = synthetic_run(gpus=0, cpu_devices=replicas, duration_s=10.0)
        app = build_app(replay(events, end=True))
        async with app.run_test(size=(120, 40)) as pilot:
            await app.settle()
            await pilot.pause()
            text = " ".join(str(app.device_grid._cards[1].body.render()).split())
        assert said in text and unsaid not in text, text


async def test_the_summary_text_keeps_clear_of_its_scrollbar_at_80x24():
    """The narrow summary column scrolls at 80x24: its scrollbar sits beside the
    text with a blank column between them, never drawn against the letters
    ("of wall▆▆")."""
    app = build_app(replay(gpu8_run(), end=True))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.settle()
        await pilot.pause()
        advice = app.advice_panel
        assert advice.show_vertical_scrollbar and advice.max_scroll_y > 0
        bar = advice.vertical_scrollbar.region
        assert advice.body.content_region.right < bar.x


def _two_cpu_workers_run():
    """A `--strategy multi-worker --local-workers 2` run on CPUs: the chief's start
    lists its own CPU device; the other worker's is in config["workers"]."""
    import msgspec

    from gpuscale.events.schema import DeviceInfo, StartEvent
    from gpuscale.ui.synthetic import synthetic_run

    events = synthetic_run(gpus=0, cpu_devices=1, duration_s=10.0, model="mlp")
    at = next(i for i, e in enumerate(events) if isinstance(e, StartEvent))
    names = [f"/job:worker/replica:0/task:{w}/device:CPU:0" for w in (0, 1)]
    start = events[at]
    events[at] = msgspec.structs.replace(
        start,
        platform="cpu",
        strategy="multi-worker",
        cross_device_ops="collective",
        num_replicas=2,
        num_workers=2,
        per_replica_batch=64,
        global_batch=128,
        devices=[DeviceInfo(index=0, name="CPU", kind="cpu", tf_name=names[0])],
        config={
            **(start.config or {}),
            "workers": [
                {"worker": w, "host": "vm", "pid": 10 + w, "devices": [names[w]]} for w in (0, 1)
            ],
        },
    )
    return events


async def test_two_cpu_workers_show_two_replicas_one_card_each():
    """The header said "1x CPU on 2 workers" and the only card "CPU:0 (logical) · the
    run's only replica": each worker's replica is a real CPU device over gRPC."""
    from gpuscale.ui.widgets.header import describe_run

    app = build_app(replay(_two_cpu_workers_run(), end=True))
    async with app.run_test(size=(200, 50)) as pilot:
        await app.settle()
        await pilot.pause()
        cards = app.device_grid._cards
        titles = [str(c.border_title) for c in cards]
        bodies = [" ".join(str(c.body.render()).split()) for c in cards[1:]]
        header = describe_run(app.model.snapshot())
    assert titles == ["host", "worker 0 · CPU:0", "worker 1 · CPU:0"]
    assert "worker 1's replica" in bodies[1] and "gRPC" in bodies[1]
    assert not any("only replica" in b or "logical" in b for b in bodies)
    assert "2 replicas (1 CPU per worker, 2 workers)" in header


async def test_a_finished_run_with_too_few_samples_says_so_rather_than_waiting():
    """A script's 1-second fit under `watch` (a docs trial): the host card had its
    samples, but one fell within the run, and the Utilization chart still said
    "utilization appears after the first samples" once the run was over."""
    from gpuscale.ui.widgets.charts import build_util_chart

    events = cpu_run()
    hosts = [e for e in events if isinstance(e, HostSample)]
    kept = [e for e in events if not isinstance(e, HostSample) or e is hosts[0]]
    app, snap = await _final_snapshot(kept)
    assert snap.end is not None and len(snap.host_cpu_history_t) == 1
    chart = build_util_chart(snap, 60, 16).plain
    assert "appears after" not in chart, chart
    assert "1 sample within the run: too few to draw utilization over time" in chart, chart
