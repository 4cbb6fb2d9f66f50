"""The log pane shows a script's output as a terminal would: a Keras progress bar
(redrawn with carriage returns and backspaces, coloured with ANSI codes) as its
last state, in its colours. Snapshot with pytest-textual-snapshot."""

from __future__ import annotations

from textual.app import App, ComposeResult

from gpuscale.live.terminal import plain, settle_line, settle_visible
from gpuscale.ui.model import LogLine
from gpuscale.ui.widgets.logpane import LogPane

BAR = "\u2501"
KERAS_EPOCH = (
    "\r\x1b[1m1/6\x1b[0m \x1b[32m"
    + BAR * 3
    + "\x1b[0m\x1b[37m"
    + BAR * 17
    + "\x1b[0m \x1b[1m0s\x1b[0m 190ms/step - loss: 1.4927"
    + "\b" * 53
    + "\r\x1b[1m6/6\x1b[0m \x1b[32m"
    + BAR * 20
    + "\x1b[0m\x1b[37m\x1b[0m \x1b[1m0s\x1b[0m 14ms/step - loss: 1.3987 "
)
"""One epoch of Keras 3's progress bar as read from a pipe (captured from a real run)."""


def test_a_progress_bar_settles_to_its_last_state():
    assert plain(KERAS_EPOCH) == "6/6 " + BAR * 20 + " 0s 14ms/step - loss: 1.3987"
    assert "\x1b[32m" in settle_line(KERAS_EPOCH)  # the colours stay
    assert plain("abcdef\rxy") == "xycdef"  # a shorter redraw leaves the tail, as on a terminal
    assert plain("50%\x1b[K\rdone\x1b[K") == "done"
    assert settle_line("no control characters") == "no control characters"


class _LogApp(App):
    def compose(self) -> ComposeResult:
        yield LogPane(id="log")

    def on_mount(self) -> None:
        lines = [
            LogLine(1, 0.0, "script", "info", "Epoch 1/2"),
            LogLine(2, 0.1, "script", "info", KERAS_EPOCH),
            LogLine(3, 0.2, "script", "info", "Epoch 2/2"),
            LogLine(4, 0.3, "script", "info", KERAS_EPOCH.replace("1.3987", "1.2664")),
            LogLine(5, 0.4, "gpuscale", "info", "training completed after 12 steps"),
        ]
        self.query_one(LogPane).show(1, lines)


def test_log_pane_with_a_keras_progress_bar(snap_compare):
    assert snap_compare(_LogApp(), terminal_size=(80, 10))


def test_a_scripts_colours_are_kept_but_no_other_control_character_reaches_the_terminal():
    """The log pane and `gpuscale run` show a script's SGR colours; a title-setting
    OSC, a bell, a NUL or an 8-bit CSI in its output is shown escaped, not obeyed."""
    hostile = "\x1b[31mred\x1b[0m \x1b]0;PWNED\x07 bell\x07 nul\x00 csi\x9b2J"
    shown = settle_visible(hostile)
    assert "\x1b[31m" in shown  # the colour stays
    assert "PWNED" not in shown  # settle_line drops the OSC sequence whole
    for raw in ("\x07", "\x00", "\x9b"):
        assert raw not in shown
    assert "\\x07" in shown and "\\x00" in shown and "\\x9b" in shown
    remaining_escapes = shown.replace("\x1b[31m", "").replace("\x1b[0m", "")
    assert "\x1b" not in remaining_escapes


class _LongLineApp(App):
    def compose(self) -> ComposeResult:
        yield LogPane(id="log")

    def on_mount(self) -> None:
        notice = "No NVIDIA driver found (libnvidia-ml.so.1 not found): host samples only"
        lines = [
            LogLine(1, 0.0, "telemetry", "warning", notice),
            LogLine(2, 0.1, "gpuscale", "info", "run completed after 60 steps, 1m 19s"),
        ]
        self.query_one(LogPane).show(1, lines)


async def test_lines_wrapped_at_80_columns_are_wrapped_again_after_a_resize():
    """The telemetry notice wrapped at 80 columns stayed wrapped at 200: each line is
    wrapped again at the pane's new width (and back when it narrows)."""
    app = _LongLineApp()
    async with app.run_test(size=(60, 10)) as pilot:
        await pilot.pause()
        log = app.query_one(LogPane)
        assert len(log.lines) == 3  # the notice in two lines
        await pilot.resize_terminal(200, 30)
        await pilot.pause()
        await pilot.pause()
        assert [strip.text.rstrip() for strip in log.lines] == [
            "[telemetry] No NVIDIA driver found (libnvidia-ml.so.1 not found): host samples only",
            "[gpuscale] run completed after 60 steps, 1m 19s",
        ]
        await pilot.resize_terminal(60, 10)
        await pilot.pause()
        await pilot.pause()
        assert len(log.lines) == 3


async def test_wrapped_lines_fit_beside_the_scrollbar_at_80x24():
    """A replay at 80x24 wrapped the telemetry notice at 78 columns in a 76-column
    pane: ``host sampl`` then ``only``, the "es" hidden under the scrollbar."""
    from pathlib import Path

    from gpuscale.ui.app import build_app
    from gpuscale.ui.sources import ReplaySource

    trial = Path(__file__).parent / "fixtures" / "trial"
    app = build_app(ReplaySource(trial / "20261126-123505_mnist-cnn-w32_2xcpu.ndjson.gz", end=True))
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(3):
            await app.settle()
            await pilot.pause()
        log = app.query_one(LogPane)
        width = log.scrollable_content_region.width
        assert width < 78
        assert all(strip.cell_length <= width for strip in log.lines)
        shown = " ".join(strip.text.strip() for strip in log.lines)
        assert "host samples only" in shown
        log.write("x " * 200)  # enough lines for the scrollbar: the text keeps its columns
        for _ in range(20):
            log.write("one more line")
        await pilot.pause()
        assert log.scrollable_content_region.width == width
        assert all(strip.cell_length <= width for strip in log.lines)
