"""Modal screens: the help (?) and the error of a failed run."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from gpuscale.formatting import visible
from gpuscale.ui import keys


class HelpScreen(ModalScreen[None]):
    """Every key, in one place: the run dashboard's (``replay``: a replay's, else a
    live run's) or, with ``sweep``, the scaling view's."""

    BINDINGS = [Binding("escape,question_mark,q", "dismiss", "Close")]
    CLOSE_HINT = "escape or ? closes this"
    SCROLL_HINT = "↑/↓ scroll for more · escape or ? closes this"
    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
    }
    #help-box {
        width: auto;
        max-width: 90%;
        height: auto;
        max-height: 100%;
        border: thick $primary;
        background: $surface;
        padding: 0 2;
    }
    #help-keys {
        width: auto;
        height: auto;
    }
    #help-box Static {
        width: auto;
    }
    /* The toasts (a run's end, a screenshot's path) would cover the help at 80x24:
       hidden while it is open, back with the dashboard (those not yet expired). */
    Toast {
        visibility: hidden;
    }
    """

    def __init__(self, replay: bool = False, *, sweep: bool = False) -> None:
        super().__init__()
        self.replay = replay
        self.sweep = sweep

    def compose(self) -> ComposeResult:
        if self.sweep:
            rows, title = keys.sweep_help_rows(), "Scaling view keys"
        else:
            rows = keys.help_rows(self.replay)
            title = "Replay keys" if self.replay else "Live run keys"
        text = Content("\n").join(
            [Content.styled(title, "bold"), Content("")]
            + [Content.assemble((f"{key:>15}", "bold $accent"), "  ", what) for key, what in rows]
        )
        with Vertical(id="help-box"):
            with VerticalScroll(id="help-keys"):
                yield Static(text)
            yield Static(Content.styled(self.CLOSE_HINT, "$text-muted"), id="help-hint")

    def on_mount(self) -> None:
        self._fit()

    def on_resize(self) -> None:
        self._fit()

    def _fit(self) -> None:
        """The keys scroll where the screen is too short for them all (80x24 for a
        replay's): the box's border and the hint line stay, and the hint says so."""
        keys_view = self.query_one("#help-keys", VerticalScroll)
        keys_view.styles.max_height = max(3, self.size.height - 3)  # border, hint
        keys_view.focus()
        self.call_after_refresh(self._update_hint)

    def _update_hint(self) -> None:
        keys_view = self.query_one("#help-keys", VerticalScroll)
        hint = self.SCROLL_HINT if keys_view.max_scroll_y > 0 else self.CLOSE_HINT
        self.query_one("#help-hint", Static).update(Content.styled(hint, "$text-muted"))

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
