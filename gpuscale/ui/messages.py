"""Typed messages the dashboard's background work posts to the UI."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.message import Message

from gpuscale.events.schema import EndEvent


class RunFinished(Message):
    """The source will send nothing more: the run ended (``end``) or the stream
    stopped without an end event (``end`` is None)."""

    def __init__(self, end: EndEvent | None) -> None:
        super().__init__()
        self.end = end


class RunFailed(Message):
    """The run failed, or the source could not start: show the error."""

    def __init__(self, message: str, traceback: str | None = None) -> None:
        super().__init__()
        self.message = message
        self.traceback = traceback


@dataclass
class ChartTexts:
    """Charts rendered off the UI thread, keyed by panel id."""

    version: int
    texts: dict[str, Text]
    sizes: dict[str, tuple[int, int]]
    """The (width, height) each chart was drawn for."""


class ChartsReady(Message):
    """Freshly built charts. Only the newest matters, so a pending one is
    replaced rather than queued (``can_replace``)."""

    def __init__(self, charts: ChartTexts) -> None:
        super().__init__()
        self.charts = charts

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ChartsReady)


class AdviceReady(Message):
    """A new analysis of the run for the recommendation panel (newest wins)."""

    def __init__(self, analysis: object) -> None:
        super().__init__()
        self.analysis = analysis

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, AdviceReady)


MAX_TOASTS = 2
"""At most this many toasts at once (at 80x24 more cover the charts and the log)."""

RUN_ENDED_TOAST_S = 3.0
"""How long the "Run completed: N steps in T." toast stays: one line, its padding
trimmed in ``app.tcss``, so at 80x24 it sits over the log pane's bottom border (the
log's last lines, which say the same, stay readable); briefly all the same."""


def toast_kind(title: str, message: str) -> str:
    """What a toast is about, for :func:`make_room_for_toast`: its title, else its
    message's first word (``Chart: Step time`` -> ``Chart``; ``Replay speed 2x`` and
    ``Replay paused`` -> ``Replay``)."""
    return title or (message.split(":", 1)[0].split() or [""])[0]


def make_room_for_toast(app, title: str, message: str) -> None:
    """Before a new toast shows in ``app`` (on its own thread): older toasts of the
    same kind go (the newest replaces them), then the oldest others until the new
    one makes :data:`MAX_TOASTS`."""
    kind = toast_kind(title, message)
    shown = list(app._notifications)  # Textual 8's store, oldest first
    for old in shown:
        if toast_kind(old.title, old.message) == kind:
            app._unnotify(old, refresh=False)
    shown = list(app._notifications)
    for old in shown[: max(0, len(shown) - (MAX_TOASTS - 1))]:
        app._unnotify(old, refresh=False)
