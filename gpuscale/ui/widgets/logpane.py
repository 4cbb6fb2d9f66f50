"""The log pane: the trainer's output, telemetry notices and errors, in order."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import RichLog

from gpuscale.formatting import visible
from gpuscale.ui.model import LogLine

LEVEL_STYLES = {"error": "bold red", "warning": "yellow", "debug": "dim", "info": ""}


class LogPane(RichLog):
    """Appends the lines it has not shown yet; cleared when a replay seeks back."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, max_lines=2000, wrap=True, markup=False, highlight=False)
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
        for line in lines:
            if line.seq <= self.last_seq:
                continue
            self.last_seq = line.seq
            if line.level == "debug" and not self.show_debug:
                self.hidden += 1
                continue
            prefix = "" if line.source == "trainer" else f"[{line.source}] "
            text = visible(prefix + line.message, keep_newlines=True)  # data: shown, not obeyed
            self.write(Text(text, style=LEVEL_STYLES.get(line.level, "")))
        if self.show_debug:
            self.border_subtitle = "d hides debug lines"
        elif self.hidden:
            self.border_subtitle = (
                f"{self.hidden} debug line{'s' if self.hidden != 1 else ''} hidden: d shows"
            )
        else:
            self.border_subtitle = ""
