"""Modal screens: the help (?) and the error of a failed run."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from gpuscale.formatting import visible

COMMON_KEYS = [
    ("q", "quit; a live run is stopped cleanly first"),
    ("p", "freeze the display (the run goes on)"),
    ("s", "save an SVG screenshot in this directory"),
    ("c", "next chart (narrow screens show one)"),
    ("t", "light / dark theme"),
    ("d", "show / hide debug lines in the log"),
    ("tab / shift+tab", "next / previous panel"),
    ("↑ ↓ pgup pgdn", "scroll the focused panel"),
    ("e", "show the error again (failed runs)"),
    ("ctrl+p", "command palette"),
    ("?", "this help"),
]
LIVE_KEYS = [("← / →", "previous / next panel")]
REPLAY_KEYS = [
    ("space", "pause / resume the replay"),
    ("← / →", "seek 10 s back / forward"),
    ("+ / -", "faster / slower (0.25x to 100x)"),
    ("home / end", "back to the start / the final state"),
]


class HelpScreen(ModalScreen[None]):
    """Every key, in one place."""

    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close")]

    def __init__(self, replay: bool) -> None:
        super().__init__()
        self.replay = replay

    def compose(self) -> ComposeResult:
        rows = (REPLAY_KEYS if self.replay else LIVE_KEYS) + COMMON_KEYS
        title = "Replay keys" if self.replay else "Live run keys"
        text = Content("\n").join(
            [Content.styled(title, "bold"), Content("")]
            + [Content.assemble((f"{key:>15}", "bold $accent"), "  ", what) for key, what in rows]
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
            yield Static(Content(visible(self.message, keep_newlines=True)), id="error-message")
            if self.traceback:
                with VerticalScroll(id="error-traceback"):
                    yield Static(Content(visible(self.traceback, keep_newlines=True)))
            yield Static(Content.styled("escape: back to the dashboard · q: quit", "$text-muted"))

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss()
