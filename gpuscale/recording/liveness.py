"""Whether a recording without an end event is still being written: a run in
progress rather than an interrupted one.

A recording's start events carry the host and the process id of who wrote them:
the first one gpuscale's own process (the provisional start, :mod:`gpuscale.live.base`),
the run's own one its trainer or script. While one of those processes is alive on
this host, and began before the run did (a pid reused since is not the run), the
run is ``running``; otherwise a recording with no end event was ``interrupted``.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable

from gpuscale.events.schema import StartEvent

PID_START_SLACK_S = 5.0
"""How much later than the run's start its writer's process may seem to have been
created (clocks are read at different moments) and still count as that writer."""


def writer_alive(starts: Iterable[StartEvent]) -> bool:
    """Whether a process that wrote one of ``starts`` (a recording's start events)
    is alive on this host and older than its start event: the run is in progress."""
    host = socket.gethostname()
    for start in starts:
        if start.host == host and _alive_since(start.pid, start.t):
            return True
    return False


def _alive_since(pid: int, start_t: float) -> bool:
    """Whether process ``pid`` runs now and was created by ``start_t`` (+ slack)."""
    if pid <= 0:
        return False
    import psutil

    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        created = process.create_time()
    except (psutil.Error, OSError):
        return False
    return created <= start_t + PID_START_SLACK_S


__all__ = ["writer_alive"]
