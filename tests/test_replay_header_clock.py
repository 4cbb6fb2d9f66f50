"""A replay's header shows one clock: its position in the recording, which is the
run's elapsed time at the moment shown. It showed ``replay 0:13/0:31 … elapsed
0:12`` (the position, and beside it the time of the last event drawn, which lags
it by up to the gap between events). A live run keeps its ``elapsed``."""

from __future__ import annotations

import re
from pathlib import Path

from ui_fixtures import FakeClock

from gpuscale.ui.app import build_app
from gpuscale.ui.sources import ReplaySource
from gpuscale.ui.widgets.header import RunHeader

RECORDING = Path(__file__).resolve().parent.parent / "sample_runs" / "mnist-cnn_2xcpu.ndjson"


async def test_a_replay_shows_one_clock_mid_run_and_at_its_end():
    clock = FakeClock()
    app = build_app(ReplaySource(RECORDING, clock=clock))
    async with app.run_test(size=(160, 40)) as pilot:
        clock.now += 13.4  # between two events: the last one drawn is before 0:13
        await app.settle()
        await pilot.pause()
        header = str(app.query_one(RunHeader).render())
        assert re.search(r"RUNNING  replay 0:13/0:\d\d 1x · step \d+  file ", header), header
        assert "elapsed" not in header
        clock.now += 600  # past the end
        await app.settle()
        await pilot.pause()
        header = str(app.query_one(RunHeader).render())
        assert "COMPLETED  replay " in header and "elapsed" not in header, header
        total = re.search(r"replay (\d+:\d\d)/(\d+:\d\d) 1x", header)
        assert total and total.group(1) == total.group(2), header
