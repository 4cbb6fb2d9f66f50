"""The gpuscale end of the event stream in a process of its own, as under ``gpuscale
run``: the training process only queues each event on an EventClient, whose thread
encodes and sends it; receiving, decoding and keeping the events is the gpuscale
parent's work, in another process. The overhead benchmarks ran the EventServer in
their own process before, so its decoding and the garbage it made (collected on the
training threads' time) were charged to the training (2026-11-27: gen-2 collections
of 0.1-0.3 s landing in one arm's round)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

_CHILD = r"""
import json, sys, threading
from gpuscale.events.transport import EventServer
count = [0]
lock = threading.Lock()
def on_event(event):
    with lock:
        count[0] += 1
server = EventServer(on_event)
print(json.dumps(server.env(0)), flush=True)
sys.stdin.read()  # until the benchmark is done with it
server.close()
print(count[0], flush=True)
"""


class EventSink:
    """An EventServer in a child process that counts what it receives: ``env`` is the
    environment a producer needs (``EventClient.from_env``, ``ScalingMonitor``);
    :meth:`close` stops it and returns how many events it received."""

    def __init__(self) -> None:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self._proc.stdout is not None
        self.env: dict[str, str] = json.loads(self._proc.stdout.readline())

    def close(self) -> int:
        """Stop the server (its connections' last lines still counted); the events received."""
        out, _ = self._proc.communicate(timeout=30)
        return int(out.strip() or 0)
