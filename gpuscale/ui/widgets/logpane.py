"""The log pane: the trainer's output, telemetry notices and errors, in order."""

from __future__ import annotations

from collections import deque

from rich.text import Text
from textual.events import Resize
from textual.widgets import RichLog

from gpuscale.formatting import visible
from gpuscale.live.terminal import settle_visible
from gpuscale.ui.model import LogLine

LEVEL_STYLES = {"error": "bold red", "warning": "yellow", "debug": "dim", "info": ""}


MAX_LINES = 2000
"""Lines the pane keeps (as the model's log lines, before wrapping)."""


class LogPane(RichLog):
    """Appends the lines it has not shown yet; cleared when a replay seeks back.
    Lines are wrapped to the pane's width, and wrapped again when that changes (a
    line wrapped at 80 columns is one line again at 200). They wrap at the width
    left beside the vertical scrollbar, which is kept whether it shows or not
    (``scrollbar-gutter: stable``): a line wrapped before the scrollbar appeared
    would otherwise run under it, and RichLog's default ``min_width`` of 78 wrapped
    them wider than an 80-column pane (``host sampl`` then ``only``, "es" hidden)."""

    DEFAULT_CSS = """
    LogPane {
        scrollbar-gutter: stable;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(
            id=id, max_lines=MAX_LINES, wrap=True, markup=False, highlight=False, min_width=1
        )
        self._shown: deque[Text] = deque(maxlen=MAX_LINES)
        """Every line written, unwrapped: written again at a new width."""
        self._wrapped_at = 0
        self.border_title = "Log"
        self.last_seq = 0
        self.epoch = 0
        self.show_debug = False
        """Debug lines (output gpuscale knows to be harmless, e.g. TensorFlow's
        cuInit complaint on a machine without a GPU) are hidden unless asked for."""
        self.hidden = 0

    def toggle_debug(self) -> None:
        """Show or hide debug lines; the next :meth:`show` redraws everything."""
        self.show_debug = not self.show_debug
        self.epoch = -1

    def show(self, epoch: int, lines: list[LogLine]) -> None:
        if epoch != self.epoch:
            self.epoch = epoch
            self.last_seq = 0
            self.hidden = 0
            self.clear()
            self._shown.clear()
        for line in lines:
            if line.seq <= self.last_seq:
                continue
            self.last_seq = line.seq
            if line.level == "debug" and not self.show_debug:
                self.hidden += 1
                continue
            prefix = "" if line.source == "trainer" else f"[{line.source}] "
            style = LEVEL_STYLES.get(line.level, "")
            # a script's progress bar: its last state, in its own colours; other control
            # characters shown, not obeyed
            message = Text.from_ansi(settle_visible(line.message), style=style)
            text = Text(visible(prefix), style=style) + message
            self._shown.append(text)
            self.write(text)
        if self.show_debug:
            self.border_subtitle = "d hides debug lines"
        elif self.hidden:
            self.border_subtitle = (
                f"{self.hidden} debug line{'s' if self.hidden != 1 else ''} hidden: d shows"
            )
        else:
            self.border_subtitle = ""

    def on_resize(self, event: Resize) -> None:
        """Wrap every line again at the new width (RichLog wraps once, when written)."""
        width = self.scrollable_content_region.width
        if self._wrapped_at and width != self._wrapped_at and self._shown:
            at_end = self.scroll_offset.y >= self.max_scroll_y
            self.clear()
            for text in self._shown:
                self.write(text, width=width, scroll_end=False)
            if at_end:
                self.scroll_end(animate=False)
        self._wrapped_at = width
