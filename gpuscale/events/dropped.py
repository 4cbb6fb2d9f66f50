"""Output lines dropped because they came faster than they could be taken, and the
one notice that says how many.

A producer that keeps a bounded backlog (the event client's send queue, a live
script's output waiting to be recorded) drops log lines past its bound, never
steps, phases or the end. :class:`DroppedLines` counts them and hands back one
warning LogEvent, ``dropped N lines of ...: WHY``, when the next line gets
through (or at the end), so the run's log says where its output has a gap.
"""

from __future__ import annotations

import threading
import time

from gpuscale.events.schema import LogEvent


class DroppedLines:
    """Counts dropped lines of ``what`` (``"log lines of worker 2"``: a plural noun
    phrase, its first word made singular for one) dropped because ``why``."""

    def __init__(self, what: str, why: str, *, worker: int = 0):
        self.what = what
        self.why = why
        self.worker = worker
        self._count = 0
        self._lock = threading.Lock()

    def drop(self) -> None:
        """One more line dropped."""
        with self._lock:
            self._count += 1

    def notice(self, t: float | None = None) -> LogEvent | None:
        """The notice for the lines dropped since the last one (``t``: when; now by
        default), or ``None`` if none were; the count starts again from zero."""
        if not self._count:  # the usual case (every event sent asks): no lock; a line
            return None  # dropped meanwhile is in the next notice
        with self._lock:
            count, self._count = self._count, 0
        if not count:
            return None
        what = self.what
        if count == 1:  # "log lines of worker 2" -> "log line of worker 2"
            what = what.replace("lines", "line", 1)
        return LogEvent(
            t=time.time() if t is None else t,
            worker=self.worker,
            source="gpuscale",
            level="warning",
            message=f"dropped {count} {what}: {self.why}",
        )
