"""Readable at a glance: charts name their axes, legends sit under the data, one
series per chart area, and a finished replay without host samples says so."""

from __future__ import annotations

from ui_fixtures import cpu_run, replay

from gpuscale.events.schema import HostSample
from gpuscale.ui.app import build_app
from gpuscale.ui.widgets.charts import CHART_TITLES, build_breakdown_chart, build_step_chart


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
