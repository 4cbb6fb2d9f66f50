"""A live sweep's progress for one device count, on stderr (``recommend``'s trainer
sweep and its script sweep alike).

On a terminal it is a line redrawn in place: a bar with the steps done (the trainer,
whose steps are known) or a spinner (a script's), and the latest step time. Off a
terminal (``2>file``, a pipe, a batch job's log) nothing is redrawn: a plain line
when the count starts and one when it ends, without spinner frames, bars or
carriage returns, so the file reads as text. ``quiet``: nothing at all.
"""

from __future__ import annotations

from typing import Any

from gpuscale.formatting import format_measured_ms


def step_words(step_time_s: float, warmup: bool) -> str:
    """A step as the progress line says it: ``warm-up``, ``52 ms/step``; under 10 ms
    with a decimal (``0.8 ms/step``, not ``1 ms/step`` for 0.8 and 1.6 alike), never
    ``0 ms``."""
    if warmup:
        return "warm-up"
    return f"{format_measured_ms(step_time_s, 0 if step_time_s >= 0.00995 else 1)}/step"


def median_words(step_time_s: float | None) -> str | None:
    """The count's median step as its ending line says it, the step time its report's
    table shows (``median 52 ms/step``, as the scaling view's header says it), not the
    last step's; ``None`` where it has none (no counted step)."""
    if step_time_s is None:
        return None
    return f"median {step_words(step_time_s, False)}"


class CountProgress:
    """One count's progress line (use as a context manager).

    ``total``: the steps the count will run (a bar), ``None`` where not known (a
    spinner). :meth:`step` says the latest step, :meth:`status` how the count
    stands (``completed``, ``failed``), :meth:`say` prints a line above it."""

    def __init__(
        self,
        console: Any,
        devices: int,
        *,
        total: int | None = None,
        status: str = "",
        quiet: bool = False,
    ) -> None:
        self.console = console
        self.label = f"{devices} device{'s' if devices != 1 else ''}"
        self.total = total
        self.quiet = quiet
        self.redraws = bool(console.is_terminal) and not quiet
        self._status = status
        self._completed: int | None = None
        self._step_text = ""
        self._progress: Any = None
        self._task: Any = None
        if self.redraws:
            self._progress, self._task = self._rich_progress(status)

    def _rich_progress(self, status: str) -> tuple[Any, Any]:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
        )

        label = TextColumn(f"[bold]{self.label}")
        status_column = TextColumn("{task.fields[status]}")
        if self.total is not None:
            columns = (label, BarColumn(), MofNCompleteColumn(), status_column)
        else:
            columns = (SpinnerColumn(), label, status_column)
        progress = Progress(*columns, console=self.console, transient=False)
        return progress, progress.add_task("", total=self.total, status=status)

    def __enter__(self) -> CountProgress:
        if self._progress is not None:
            self._progress.start()
        elif not self.quiet and self._status:
            self.console.print(f"{self.label}: {self._status}", markup=False, highlight=False)
        return self

    def __exit__(self, *exc: object) -> bool:
        if self._progress is not None:
            self._progress.stop()
        elif not self.quiet:
            self.console.print(self.plain_line(), markup=False, highlight=False)
        return False

    def step(self, completed: int, text: str) -> None:
        """Step ``completed`` (counted from 1) is done; ``text`` says it (``52 ms/step``)."""
        self._completed = completed
        self._step_text = text
        self._status = ""  # what it said before its steps ("starting TensorFlow") is past
        self._update(completed=completed, status=text)

    def status(self, text: str) -> None:
        """How the count stands now (``completed``, ``failed``)."""
        self._status = text
        self._update(status=text)

    def finish(self, status: str, step_text: str | None) -> None:
        """The count ended (``completed``, ``failed``): ``step_text``, where given,
        says its steps as the report will (:func:`median_words`) in place of the
        latest step's time."""
        if step_text is not None:
            self._step_text = step_text
        self.status(status)

    def say(self, text: str, style: str | None = None) -> None:
        """A line of its own, above the progress line (a warning)."""
        target = self._progress.console if self._progress is not None else self.console
        target.print(text, style=style, markup=False, highlight=False)

    def plain_line(self) -> str:
        """The line that ends the count off a terminal: ``2 devices: completed,
        12/12 steps, median 52 ms/step``."""
        parts = [self._status] if self._status else []
        if self._completed is not None and self.total is not None:
            parts.append(f"{self._completed}/{self.total} steps")
        if self._step_text:
            parts.append(self._step_text)
        return f"{self.label}: {', '.join(parts) or 'no step'}"

    def _update(self, **fields: Any) -> None:
        if self._progress is not None:
            self._progress.update(self._task, **fields)
