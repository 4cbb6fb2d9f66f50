"""The TCP event transport: events arrive intact, strangers are refused, a producer
that vanishes without an end event is reported."""

from __future__ import annotations

import queue
import socket
import time

import pytest

from gpuscale.events import EndEvent, LogEvent, StepEvent, transport
from gpuscale.events.transport import (
    ENV_ADDRESS,
    ENV_WORKER,
    EventClient,
    EventServer,
    parse_address,
)


def _drain(q: queue.Queue, want: int, timeout_s: float = 5.0) -> list:
    got = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        try:
            got.append(q.get(timeout=0.05))
        except queue.Empty:
            pass
    return got


def test_events_round_trip_in_order():
    q: queue.Queue = queue.Queue()
    disconnects: list = []
    server = EventServer(q.put, on_disconnect=lambda w, end: disconnects.append((w, end)))
    try:
        client = EventClient(server.address, server.token, worker=3)
        for i in range(100):
            client.send(StepEvent(t=1000.0 + i, step=i, step_time_s=0.01, samples=64, worker=3))
        client.send(EndEvent(t=2000.0, status="completed", steps=100, worker=3))
        client.close()
        got = _drain(q, 101)
        assert [e.step for e in got[:100]] == list(range(100))
        assert isinstance(got[100], EndEvent)
        deadline = time.monotonic() + 30  # returns as soon as it holds
        while not disconnects and time.monotonic() < deadline:
            time.sleep(0.01)
        assert disconnects == [(3, True)]
    finally:
        server.close()


def test_wrong_token_is_refused_and_nothing_accepted():
    q: queue.Queue = queue.Queue()
    server = EventServer(q.put)
    try:
        sock = socket.create_connection((server.host, server.port))
        sock.sendall(b'{"hello":"gpuscale","token":"not-it"}\n')
        sock.sendall(b'{"kind":"step","t":1.0,"step":1,"step_time_s":0.1,"samples":1}\n')
        time.sleep(0.2)
        sock.close()
        got = _drain(q, 1, timeout_s=30.0)
        assert len(got) == 1 and isinstance(got[0], LogEvent)
        assert "rejected" in got[0].message
        assert q.empty()
    finally:
        server.close()


def test_malformed_lines_are_dropped_with_a_warning():
    q: queue.Queue = queue.Queue()
    server = EventServer(q.put)
    try:
        sock = socket.create_connection((server.host, server.port))
        sock.sendall(f'{{"hello":"gpuscale","token":"{server.token}"}}\n'.encode())
        sock.sendall(b"not json\n")
        sock.sendall(b'{"kind":"step","t":1.0,"step":1,"step_time_s":0.1,"samples":1}\n')
        sock.close()
        got = _drain(q, 2)
        assert isinstance(got[0], LogEvent) and "malformed" in got[0].message
        assert isinstance(got[1], StepEvent)
    finally:
        server.close()


def test_vanished_producer_is_reported_without_end():
    q: queue.Queue = queue.Queue()
    disconnects: list = []
    server = EventServer(q.put, on_disconnect=lambda w, end: disconnects.append((w, end)))
    try:
        client = EventClient(server.address, server.token, worker=1)
        client.send(StepEvent(t=1.0, step=1, step_time_s=0.1, samples=1, worker=1))
        client.close()
        deadline = time.monotonic() + 30  # returns as soon as it holds
        while not disconnects and time.monotonic() < deadline:
            time.sleep(0.01)
        assert disconnects == [(1, False)]
    finally:
        server.close()


def test_client_from_env_and_unreachable_server():
    assert EventClient.from_env({}) is None
    with pytest.raises(ConnectionError, match="cannot reach"):
        EventClient("127.0.0.1:1", "x", connect_timeout_s=0.2)


@pytest.mark.parametrize("bad", ["nohost", ":80", "host:", "host:99999", "host:abc"])
def test_parse_address_rejects(bad):
    with pytest.raises(ValueError, match="host:port"):
        parse_address(bad)


def test_a_silent_connection_is_closed_after_the_hello_timeout(monkeypatch):
    """Nothing may hold a server thread forever by connecting and saying nothing
    (the chief listens on 0.0.0.0)."""
    monkeypatch.setattr(transport, "HELLO_TIMEOUT_S", 0.3)
    q: queue.Queue = queue.Queue()
    server = EventServer(q.put)
    try:
        sock = socket.create_connection((server.host, server.port))
        sock.settimeout(5)
        assert sock.recv(1) == b""  # closed by the server, not by our timeout
        got = _drain(q, 1, timeout_s=30.0)
        assert got and "no hello" in got[0].message
        sock.close()
    finally:
        server.close()


def test_close_returns_promptly_with_connections_still_open():
    server = EventServer(lambda event: None)
    clients = [EventClient(server.address, server.token, worker=i) for i in range(4)]
    deadline = time.monotonic() + 30  # returns as soon as it holds
    while not all(server.connected(i) for i in range(4)) and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    server.close()
    assert time.monotonic() - started < 1.5
    for client in clients:
        client.close(timeout_s=0.5)


def test_finished_connection_threads_are_pruned():
    server = EventServer(lambda event: None)
    try:
        for _ in range(5):
            client = EventClient(server.address, server.token)
            client.close()
            time.sleep(0.05)
        client = EventClient(server.address, server.token)
        deadline = time.monotonic() + 30  # returns as soon as it holds
        while len(server._threads) > 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(server._threads) <= 2
        client.close()
    finally:
        server.close()


def test_a_client_whose_connection_breaks_reconnects_as_the_same_worker():
    q: queue.Queue = queue.Queue()
    disconnects: list = []
    server = EventServer(q.put, on_disconnect=lambda w, end: disconnects.append((w, end)))
    try:
        client = EventClient(server.address, server.token, worker=2)
        client.send(StepEvent(t=1.0, step=0, step_time_s=0.1, samples=1, worker=2))
        assert len(_drain(q, 1)) == 1
        client._sock.shutdown(socket.SHUT_RDWR)  # the network drops the connection
        client.send(StepEvent(t=2.0, step=1, step_time_s=0.1, samples=1, worker=2))
        got = _drain(q, 1)
        assert [e.step for e in got] == [1]
        assert disconnects == [(2, False)] and server.connected(2)
        client.close()
    finally:
        server.close()


def test_a_bad_worker_number_in_the_environment_is_a_clear_error():
    env = {ENV_ADDRESS: "127.0.0.1:1", ENV_WORKER: "two"}
    with pytest.raises(ValueError, match="GPUSCALE_WORKER must be a worker number.*'two'"):
        EventClient.from_env(env)
