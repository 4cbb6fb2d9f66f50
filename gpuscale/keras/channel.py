"""The process's one connection to the gpuscale parent, if it runs under gpuscale.

``gpuscale run``/``watch -- python train.py`` set ``GPUSCALE_EVENTS``; every
monitor in the script then sends its events over one TCP stream
(:class:`~gpuscale.events.transport.EventClient`), so a second ``fit`` does not
open a second stream. Without it, a monitor writes its own recording.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time

from gpuscale.events.schema import LogEvent
from gpuscale.events.transport import ENV_ADDRESS, ENV_WORKER, EventClient

CALLBACK_SOURCE = "keras-callback"
"""The ``source`` of the LogEvent the package sends when it is loaded under gpuscale,
so the parent knows a callback is coming (see :mod:`gpuscale.live.script_run`)."""


class Channel:
    """The connection shared by all monitors in the process (class-level state)."""

    _lock = threading.Lock()
    _client: EventClient | None = None
    _tried = False
    started = False
    """Whether a StartEvent already went out from this process."""
    batch = 0
    """The global batch of the stream's latest start or restart (0: not known)."""
    steps_sent = 0
    """Steps reported by every monitor of the process (one step index sequence per stream)."""

    @classmethod
    def client(cls) -> EventClient | None:
        if cls._tried:  # every step asks: answered without the lock once it is known
            return cls._client
        with cls._lock:
            if not cls._tried:
                try:
                    cls._client = EventClient.from_env(connect_timeout_s=5.0)
                except (ConnectionError, ValueError) as exc:
                    print(f"gpuscale: {exc}; this run is not reported", file=sys.stderr)
                    cls._client = None
                finally:  # after the client: a thread that sees it tried sees the client
                    cls._tried = True
                if cls._client is not None:
                    atexit.register(cls._client.close)
            return cls._client

    @classmethod
    def next_indices(cls, steps: int) -> int:
        """Count ``steps`` more steps on the shared stream; the last one's index."""
        with cls._lock:
            cls.steps_sent += steps
            return cls.steps_sent - 1


def worker_index() -> int:
    """This process's worker index: from gpuscale's environment, else TF_CONFIG/Slurm."""
    text = os.environ.get(ENV_WORKER)
    if text and text.isdigit():
        return int(text)
    try:
        from gpuscale.live import cluster

        info = cluster.resolve()
    except Exception:  # a bad TF_CONFIG is TensorFlow's to report, not ours
        return 0
    return info.index if info else 0


ANNOUNCE_FLUSH_S = 2.0
"""How long ``import gpuscale.keras`` waits at most for its word to be on the wire."""


def announce() -> None:
    """Tell a waiting gpuscale parent that a callback is in this script, before the
    import returns: a multi-worker script's next line, ``MultiWorkerMirroredStrategy()``,
    holds the interpreter until every worker has joined (minutes on a cluster started
    by hand), and the word would wait with it while its chief took the script for one
    without the callback."""
    if os.environ.get(ENV_ADDRESS):
        client = Channel.client()
        if client is not None:
            client.send(
                LogEvent(
                    t=time.time(),
                    worker=worker_index(),
                    message=f"gpuscale.keras loaded in process {os.getpid()}",
                    source=CALLBACK_SOURCE,
                    level="debug",
                )
            )
            client.flush(ANNOUNCE_FLUSH_S)
