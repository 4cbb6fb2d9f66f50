"""Modal screens: the help (?) and the error of a failed run."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

LIVE_KEYS = [
    ("q", "quit: stops the trainer cleanly and finalizes the recording"),
    ("p", "pause / resume the display (the run goes on)"),
    ("s", "save a screenshot (SVG) in the current directory"),
    ("c", "next chart (when the screen shows one chart at a time)"),
    ("t", "light / dark theme"),
    ("tab / shift+tab", "move between panels; up/down/pgup/pgdn scroll the focused panel"),
    ("e", "show the error again (after a failed run)"),
    ("ctrl+p", "command palette"),
    ("?", "this help"),
]
REPLAY_KEYS = [
    ("space", "pause / resume the replay"),
    ("left / right", "seek back / forward 10 s of run time"),
    ("+ / -", "faster / slower (0.25x to 100x)"),
    ("home / end", "back to the start / jump to the final state"),
]


class HelpScreen(ModalScreen[None]):
    """Every key, in one place."""

    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close")]

    def __init__(self, replay: bool) -> None:
        super().__init__()
        self.replay = replay

    def compose(self) -> ComposeResult:
        rows = LIVE_KEYS + (REPLAY_KEYS if self.replay else [])
        text = Content("\n").join(
            Content.assemble((f"{key:>16}", "bold $accent"), "  ", what) for key, what in rows
        )
        with Vertical(id="help-box"):
            yield Static(text)
            yield Static(Content.styled("escape or ? closes this", "$text-muted"))

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss()


class ErrorScreen(ModalScreen[None]):
    """The run failed: the message, and the traceback when there is one."""

    BINDINGS = [
        Binding("escape", "dismiss", "Back to the dashboard"),
        Binding("q", "app.quit_run", "Quit"),
    ]

    def __init__(self, message: str, traceback: str | None) -> None:
        super().__init__()
        self.message = message
        self.traceback = traceback

    def compose(self) -> ComposeResult:
        with Vertical(id="error-box"):
            yield Static(Content.styled("The run failed", "bold $text-error"), id="error-title")
            yield Static(Content(self.message), id="error-message")
            if self.traceback:
                with VerticalScroll(id="error-traceback"):
                    yield Static(Content(self.traceback))
            yield Static(Content.styled("escape: back to the dashboard · q: quit", "$text-muted"))

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss()
