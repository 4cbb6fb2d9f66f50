"""Every event of a live run, for tests of scripts and clusters."""

from __future__ import annotations

import time


def collect(run, timeout_s: float = 60.0, on_event=None, poll_s: float = 0.5) -> list:
    """The run's events until it is done (``on_event`` called on each as it comes);
    the run stopped and an AssertionError where it did not end within ``timeout_s``."""
    events = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for event in run.events(timeout=poll_s):
            events.append(event)
            if on_event is not None:
                on_event(event)
        if run.done:
            events.extend(run.drain())
            return events
    run.stop()
    raise AssertionError("the run did not end in time")
