"""`gpuscale watch -- SCRIPT` where SCRIPT cannot start: the dashboard said
STARTING, "waiting for the first sample…" and "recording (starts with the run)" for
ever beside the error, and after q the terminal said "The trainer ended before
training began." (exit 1) where `gpuscale run` says `gpuscale: error: cannot start
...` (exit 2)."""

from __future__ import annotations

from test_watch_quit_summary import _watch_in_a_pty
from ui_fixtures import FakeLiveRun

from gpuscale.errors import GpuscaleError
from gpuscale.ui.app import build_app
from gpuscale.ui.sources import LiveSource
from gpuscale.ui.widgets.devices import DeviceCard

MESSAGE = "cannot start /nonexistent/train.py: No such file or directory"


class _CannotStart(FakeLiveRun):
    def __init__(self) -> None:
        super().__init__([], finish=False)
        self.recording_path = None  # nothing written

    def start(self) -> _CannotStart:
        raise GpuscaleError(MESSAGE)


async def test_the_dashboard_says_the_run_failed_not_starting():
    source = LiveSource(_CannotStart())
    app = build_app(source)
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(3):
            await pilot.pause()
            await app.settle()
        await pilot.press("escape")  # the error screen
        await pilot.pause()
        header = str(app.header_panel.render())
        assert "FAILED" in header and "STARTING" not in header, header
        assert "starts with the run" not in header and "nothing was recorded" in header
        host = str(app.query(DeviceCard).first().query_one(".card-body").render())
        assert "waiting" not in host and "no host samples" in host, host
        assert any(MESSAGE in line.message for line in app.model.snapshot().logs)
        assert source.start_error is not None


def test_watch_says_runs_error_line_after_the_screen(tmp_path):
    env = {"GPUSCALE_DATA_DIR": str(tmp_path), "TERM": "xterm-256color"}
    code, text = _watch_in_a_pty(["--", str(tmp_path / "missing.py")], 3.0, env)
    assert code == 2, text[-2000:]
    tail = " ".join(text[-600:].split())
    assert f"gpuscale: error: cannot start {tmp_path / 'missing.py'}" in tail, tail
    assert "ended before training began" not in text
