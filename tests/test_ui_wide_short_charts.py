"""Full device cards on a wide terminal leave the charts their rows: at 120 columns
the recommendation is a row under the charts, which the cards' room did not count
(at 120x30 and 120x36 the step-time chart kept one row of plot, its one y tick `0`
beside step times of 80 ms)."""

from __future__ import annotations

import pytest
from ui_fixtures import cpu_run, replay

from gpuscale.ui.app import build_app
from gpuscale.ui.widgets.charts import PLOT_FRAME_ROWS, STEP_CHART


@pytest.mark.parametrize("size", [(120, 27), (120, 30), (120, 36), (80, 36), (120, 40), (200, 50)])
async def test_the_step_chart_keeps_four_rows_of_plot(size):
    app = build_app(replay(cpu_run(), end=True))
    async with app.run_test(size=size) as pilot:
        for _ in range(2):
            await app.settle()
            await pilot.pause()
        chart = app.charts[STEP_CHART]
        assert chart.content_size.height - PLOT_FRAME_ROWS >= 4, (size, app.device_grid.compact)


async def test_full_cards_where_there_is_room():
    app = build_app(replay(cpu_run(), end=True))
    async with app.run_test(size=(200, 50)) as pilot:
        await app.settle()
        await pilot.pause()
        assert not app.device_grid.compact
