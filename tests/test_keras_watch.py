"""`gpuscale watch -- COMMAND`'s pieces together: a ScriptRun feeding the dashboard
(Pilot), for a script without the callback (no TensorFlow needed)."""

from __future__ import annotations

import asyncio
import sys
import time

from gpuscale.live.script_run import ScriptRun
from gpuscale.ui.app import build_app
from gpuscale.ui.sources import LiveSource
from gpuscale.ui.widgets.header import RunHeader
from gpuscale.ui.widgets.logpane import LogPane


async def test_dashboard_shows_a_script_without_callback_and_how_to_add_it(tmp_path):
    script = "import time; print('epoch 1 done', flush=True); time.sleep(0.5)"
    run = ScriptRun(
        [sys.executable, "-c", script],
        record=tmp_path / "watch.ndjson",
        start_timeout_s=0.2,
        sampler=False,
    )
    source = LiveSource(run)
    app = build_app(source)
    async with app.run_test(size=(100, 30)) as pilot:
        deadline = time.monotonic() + 60  # a busy machine starts Python slowly
        while app.model.end is None and time.monotonic() < deadline:
            await pilot.pause(0.1)
        await app.settle()
        assert app.model.end is not None and app.model.end.status == "completed"
        assert app.model.start.source == "script"
        log_text = "\n".join(str(line.text) for line in app.query_one(LogPane).lines)
        assert "epoch 1 done" in log_text
        assert "step times are unavailable" in log_text
        assert "callbacks=[gpuscale.keras.ScalingMonitor()]" in log_text
        assert "COMPLETED" in str(app.query_one(RunHeader).render())
    source.stop()
    await asyncio.sleep(0)
    assert run.done and (tmp_path / "watch.ndjson").exists()
