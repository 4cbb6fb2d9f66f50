"""The TCP event transport: events arrive intact, strangers are refused, a producer
that vanishes without an end event is reported."""

from __future__ import annotations

import queue
import socket
import time

import msgspec
import pytest

from gpuscale.events import EndEvent, LogEvent, StepEvent, transport
from gpuscale.events.transport import (
    ENV_ADDRESS,
    ENV_WORKER,
    EventClient,
    EventServer,
    HelloRefused,
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
        sock.settimeout(5)
        assert sock.recv(100) == b'{"ok":true}\n'  # a producer reads the answer first
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


# -- issue 17: the event port is closed to strangers -------------------------------------


def _hello(token: str, worker: int = 0) -> bytes:
    return msgspec.json.encode({"hello": "gpuscale", "token": token, "worker": worker}) + b"\n"


def test_issue17_case2_a_refused_hello_is_answered_and_the_client_says_so():
    q: queue.Queue = queue.Queue()
    server = EventServer(q.put, token="the-right-secret")
    try:
        with pytest.raises(HelloRefused, match="refused this worker: worker 1 has no valid"):
            EventClient(server.address, "a-wrong-secret", worker=1, connect_timeout_s=5)
        got = _drain(q, 1, timeout_s=2.0)
        assert got and "worker 1 has no valid gpuscale token" in got[0].message
    finally:
        server.close()


def test_issue17_case2_a_non_ascii_token_works_on_both_sides():
    q: queue.Queue = queue.Queue()
    token = "gëhéim-秘密-токен"
    server = EventServer(q.put, token=token)
    try:
        client = EventClient(server.address, token, worker=1)
        client.send(StepEvent(t=1.0, step=0, step_time_s=0.1, samples=1, worker=1))
        client.close()
        got = _drain(q, 1)
        assert len(got) == 1 and isinstance(got[0], StepEvent)
        with pytest.raises(HelloRefused):
            EventClient(server.address, "gëhéim-秘密-токеn", connect_timeout_s=5)
    finally:
        server.close()


def test_issue17_case6_an_overlong_line_is_dropped_whole(monkeypatch):
    """After the hello, a line over the cap whose tail is a forged end event: the
    tail is never taken as an event."""
    monkeypatch.setattr(transport, "MAX_LINE_BYTES", 1000)
    q: queue.Queue = queue.Queue()
    server = EventServer(q.put)
    try:
        sock = socket.create_connection((server.host, server.port))
        sock.sendall(_hello(server.token))
        sock.settimeout(5)
        assert sock.recv(100) == b'{"ok":true}\n'
        forged = b'{"kind":"end","t":1.0,"status":"completed","steps":999}'
        sock.sendall(b'{"kind":"log","t":1.0,"message":"' + b"x" * 5000 + b'"}' + forged + b"\n")
        sock.sendall(b'{"kind":"step","t":1.0,"step":1,"step_time_s":0.1,"samples":1}\n')
        sock.close()
        got = _drain(q, 2)
        assert not any(isinstance(e, EndEvent) for e in got)
        assert isinstance(got[0], LogEvent) and "more than 1000 bytes" in got[0].message
        assert isinstance(got[1], StepEvent)
    finally:
        server.close()


def test_issue17_case11_the_hello_is_tiny_and_time_boxed_as_a_whole(monkeypatch):
    monkeypatch.setattr(transport, "HELLO_TIMEOUT_S", 1.0)
    server = EventServer(lambda event: None)
    try:
        # one byte every 0.2 s never adds up to a hello: closed after 1 s in all
        slow = socket.create_connection((server.host, server.port))
        began = time.monotonic()
        closed = False
        while time.monotonic() - began < 10:  # hang guard
            try:
                slow.sendall(b" ")
            except OSError:
                closed = True
                break
            slow.settimeout(0.2)
            try:
                if slow.recv(1) == b"":
                    closed = True
                    break
            except TimeoutError:
                pass
        assert closed and time.monotonic() - began < 5
        slow.close()
        # a 4 MiB hello: the server stops reading after 1 KiB and closes
        big = socket.create_connection((server.host, server.port))
        big.settimeout(5)
        try:
            for _ in range(4096):
                big.sendall(b"x" * 1024)
            reset = big.recv(1) == b""
        except OSError:
            reset = True
        assert reset
        big.close()
    finally:
        server.close()


def test_issue17_case11_connections_and_threads_are_bounded(monkeypatch):
    monkeypatch.setattr(transport, "HELLO_TIMEOUT_S", 30.0)
    server = EventServer(lambda event: None)
    idle = []
    try:
        for _ in range(transport.MAX_PENDING + 40):
            idle.append(socket.create_connection((server.host, server.port)))
        time.sleep(0.5)
        with server._lock:
            alive = [t for t in server._threads if t.is_alive()]
        assert len(alive) <= transport.MAX_PENDING
        # a worker with the token still gets in once strangers stop hogging the port
        for sock in idle:
            sock.close()
        client = EventClient(server.address, server.token, connect_timeout_s=10)
        client.close()
    finally:
        for sock in idle:
            sock.close()
        server.close()


def test_issue17_case12_rejected_connections_are_summarised():
    q: queue.Queue = queue.Queue()
    server = EventServer(q.put)
    try:
        for _ in range(300):
            sock = socket.create_connection((server.host, server.port))
            sock.sendall(b'{"hello":"gpuscale","token":"nope"}\n')
            sock.close()
        time.sleep(0.5)
    finally:
        server.close()
    notices = [e for e in _drain(q, 1000, timeout_s=1.0) if isinstance(e, LogEvent)]
    assert 1 <= len(notices) <= 3
    assert "rejected" in notices[-1].message


def test_issue17_a_client_slower_than_its_producer_drops_log_lines_never_steps(monkeypatch):
    monkeypatch.setattr(transport, "MAX_CLIENT_BACKLOG", 10)
    server = EventServer(lambda event: None)
    try:
        client = EventClient(server.address, server.token, worker=2)
        sending, client._queue = client._queue, queue.SimpleQueue()  # the network stalls
        for i in range(100):
            client.send(LogEvent(t=1.0, message=f"line {i}", worker=2))
        for i in range(20):
            client.send(StepEvent(t=2.0, step=i, step_time_s=0.1, samples=1, worker=2))
        held = []
        while not client._queue.empty():
            held.append(client._queue.get())
        assert [e.message for e in held[:10]] == [f"line {i}" for i in range(10)]
        assert "dropped 90 log lines of worker 2" in held[10].message
        assert [e.step for e in held[11:]] == list(range(20))
        sending.put(transport._STOP)
        client._queue = sending
        client.close(timeout_s=2)
    finally:
        server.close()


def test_lines_dropped_at_the_end_are_still_said_when_the_client_closes(monkeypatch):
    monkeypatch.setattr(transport, "MAX_CLIENT_BACKLOG", 10)
    received: queue.Queue = queue.Queue()
    server = EventServer(received.put)
    try:
        client = EventClient(server.address, server.token, worker=1)
        sending, client._queue = client._queue, queue.SimpleQueue()  # the network stalls
        for i in range(25):  # the last 15 are dropped, and nothing follows them
            client.send(LogEvent(t=1.0, message=f"line {i}", worker=1))
        held = client._queue
        client._queue = sending
        while not held.empty():
            client._queue.put(held.get())
        client.close(timeout_s=5)
        events = _drain(received, 11, timeout_s=5.0)
    finally:
        server.close()
    assert [e.message for e in events[:10]] == [f"line {i}" for i in range(10)]
    assert events[10].message == (
        "dropped 15 log lines of worker 1: they came faster than they could be sent"
    )
    assert events[10].level == "warning" and events[10].worker == 1


def _steps_then(client: EventClient, received: queue.Queue, last) -> list:
    """Send a step (the first after a quiet spell: it goes at once, and the client then
    waits its interval), two more steps, then ``last``: the events received, in order."""
    client.send(StepEvent(t=1.0, step=0, step_time_s=0.1, samples=1))
    assert [e.step for e in _drain(received, 1)] == [0]
    for i in (1, 2):
        client.send(StepEvent(t=1.0 + i, step=i, step_time_s=0.1, samples=1))
    return last()


def test_steps_wait_for_the_interval_and_a_runs_end_goes_at_once_with_them(monkeypatch):
    """While events keep coming the client writes once per SEND_INTERVAL_S (one wake-up
    and one write for all the steps of it, a timer's: a step only queues itself); the
    events that say where the run is (start, probe, error, end) go at once, after the
    steps queued before them."""
    monkeypatch.setattr(transport, "SEND_INTERVAL_S", 600.0)  # no step goes by the timer
    received: queue.Queue = queue.Queue()
    server = EventServer(received.put)
    try:
        client = EventClient(server.address, server.token)

        def end() -> list:
            time.sleep(0.3)
            assert received.empty()  # the steps wait for the interval (or a hurry)
            client.send(EndEvent(t=9.0, status="completed", steps=3))
            return _drain(received, 3, timeout_s=10.0)  # not 600 s

        got = _steps_then(client, received, end)
        assert [getattr(e, "step", "end") for e in got] == [1, 2, "end"]
        client.close(timeout_s=5)
    finally:
        server.close()


def test_close_sends_what_waits_for_the_interval_at_once(monkeypatch):
    """A process that exits (or crashes) closes the client at exit: what waited for the
    interval goes then, not after it (it was lost where the interval outlasted
    close's wait)."""
    monkeypatch.setattr(transport, "SEND_INTERVAL_S", 600.0)
    received: queue.Queue = queue.Queue()
    server = EventServer(received.put)
    try:
        client = EventClient(server.address, server.token)

        def close() -> list:
            began = time.monotonic()
            client.close(timeout_s=30)
            assert time.monotonic() - began < 25  # returned as it sent, not at its timeout
            return _drain(received, 2, timeout_s=10.0)

        assert [e.step for e in _steps_then(client, received, close)] == [1, 2]
    finally:
        server.close()


# -- a worker started twice, a cluster that differs ----------------------------------------


def test_a_second_launch_of_a_connected_worker_is_refused_its_own_reconnects_are_not():
    """One launch (a worker's gpuscale and its script share a session) may hold several
    connections for its worker and reconnect; another launch claiming the same worker
    is refused while the first has a connection open, and taken once it has none."""
    q: queue.Queue = queue.Queue()
    server = EventServer(q.put)
    try:
        first = EventClient(server.address, server.token, worker=1, session="launch-a")
        script = EventClient(server.address, server.token, worker=1, session="launch-a")
        with pytest.raises(HelloRefused, match="worker 1 is in this run already") as refused:
            EventClient(server.address, server.token, worker=1, session="launch-b")
        assert refused.value.kind == "duplicate"
        assert server.refused_workers == {1: "it was started twice"}
        first._sock.shutdown(socket.SHUT_RDWR)  # a network hiccup: the next send reconnects
        first.send(StepEvent(t=1.0, step=0, step_time_s=0.1, samples=1, worker=1))
        assert [e.step for e in _drain(q, 2) if isinstance(e, StepEvent)] == [0]
        unsaid = EventClient(server.address, server.token, worker=1)  # no session: unchecked
        for client in (first, script, unsaid):
            client.close()
        deadline = time.monotonic() + 30  # returns as soon as it holds
        while server.connected(1) and time.monotonic() < deadline:
            time.sleep(0.01)
        EventClient(server.address, server.token, worker=1, session="launch-b").close()
    finally:
        server.close()


def test_the_admit_hook_refuses_a_hello_and_the_client_is_told_why():
    q: queue.Queue = queue.Queue()
    server = EventServer(q.put, admit=lambda hello: "" if hello.cluster == "2:ab" else "not ours")
    try:
        EventClient(server.address, server.token, worker=1, cluster="2:ab").close()
        with pytest.raises(HelloRefused, match="refused this worker: not ours") as refused:
            EventClient(server.address, server.token, worker=2, cluster="3:cd")
        assert refused.value.kind == "cluster"
        assert server.refused_workers == {2: "its TF_CONFIG lists another cluster"}
    finally:
        server.close()
