"""``import gpuscale.keras``'s word to the gpuscale parent (:mod:`gpuscale.keras.channel`),
without TensorFlow: the module is loaded from its file, not through the package."""

from __future__ import annotations

import importlib.util
import queue
import sys
from pathlib import Path

import gpuscale
from gpuscale.events import LogEvent
from gpuscale.events.transport import (
    ENV_ADDRESS,
    ENV_SESSION,
    ENV_TOKEN,
    ENV_WORKER,
    EventClient,
    EventServer,
)

CHANNEL = Path(gpuscale.__path__[0]) / "keras" / "channel.py"


def _channel_module():
    """A fresh copy of gpuscale/keras/channel.py (its own Channel state), without the
    package's __init__, which imports TensorFlow."""
    spec = importlib.util.spec_from_file_location("channel_under_test", CHANNEL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_callbacks_word_is_written_before_the_import_returns(monkeypatch):
    """A multi-worker script's next line after the import, MultiWorkerMirroredStrategy(),
    holds the interpreter until every worker has joined, so the client's sender thread
    gets no turn: a hand-started cluster's chief heard nothing from the callback and
    said after 15 s that the script did not use it. Here the main thread is never
    preempted (a switch interval of 1000 s), as in that native call: the word must be
    on the wire when announce() returns."""
    import gpuscale.live.cluster  # noqa: F401 - imported here, not by worker_index() below

    got: queue.Queue = queue.Queue()
    server = EventServer(got.put)
    written: list[bytes] = []
    send = EventClient._send

    def recording_send(self, data: bytes) -> None:
        written.append(data)
        send(self, data)

    monkeypatch.setattr(EventClient, "_send", recording_send)
    for name, value in {
        ENV_ADDRESS: server.address,
        ENV_TOKEN: server.token,
        ENV_WORKER: "1",
        ENV_SESSION: "launch-a",
    }.items():
        monkeypatch.setenv(name, value)
    channel = _channel_module()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        channel.announce()
        on_the_wire = b"".join(written)  # read before any other thread may run
    finally:
        sys.setswitchinterval(interval)
    try:
        assert b"gpuscale.keras loaded in process" in on_the_wire
        event = got.get(timeout=30)
        assert isinstance(event, LogEvent) and event.source == channel.CALLBACK_SOURCE
        assert event.worker == 1
        assert channel.Channel._client.session == "launch-a"  # the launch's, from its gpuscale
    finally:
        channel.Channel._client.close()
        server.close()
