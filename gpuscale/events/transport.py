"""How events travel between processes and machines: newline-delimited JSON over TCP.

One mechanism serves every producer that is not the parent process itself: the
built-in trainer (a child process), a user's script with the Keras callback, and
the workers of a multi-worker run on other hosts. The parent (``gpuscale run``,
``watch`` or ``recommend``) runs an :class:`EventServer`; a producer finds it
through the environment and sends events with an :class:`EventClient`.

Environment
-----------
``GPUSCALE_EVENTS``  ``host:port`` of the server.
``GPUSCALE_TOKEN``   shared secret; a connection that does not present it is
                     closed and nothing it sent is accepted.
``GPUSCALE_WORKER``  the worker index this process reports as (default 0).
``GPUSCALE_SESSION`` the launch this process belongs to (set by the gpuscale that
                     started a worker of a multi-host run, for its script too).

Protocol
--------
The client's first line is a hello, ``{"hello":"gpuscale","token":...,"worker":N}``
(at most :data:`MAX_HELLO_BYTES`, all of it within :data:`HELLO_TIMEOUT_S`), with
``"session"`` (the launch it belongs to) and ``"cluster"`` (a digest of the
cluster its TF_CONFIG describes) where it has them; the server answers one line,
``{"ok":true}`` or ``{"ok":false,"reason":"...","kind":"..."}`` (and then closes),
so a refused producer knows it (:class:`HelloRefused`). Tokens are compared as
UTF-8 bytes in constant time. While a worker number has connections open from one
session, a hello for it from another session is refused (the same worker started
twice); the server's ``admit`` hook may refuse a hello too (a cluster that differs).
Every further line is one event
(:mod:`gpuscale.events.schema`); a line longer than :data:`MAX_LINE_BYTES` is
dropped whole (its remainder is read and thrown away, never taken as an event),
and lines that do not decode are dropped with a warning.

Limits (the multi-worker chief listens on every interface): at most
:data:`MAX_PENDING` connections waiting for their hello and
:data:`MAX_CONNECTIONS` in all (one thread each); more are closed at once.
Refused connections are summarised in at most one notice per
:data:`REJECT_NOTICE_INTERVAL_S`.
Why plain TCP: it is in the standard library, works the same on loopback and
across hosts of a cluster, needs no broker, and a closed socket tells the chief
at once that a worker is gone.
"""

from __future__ import annotations

import hmac
import io
import os
import queue
import secrets
import socket
import sys
import threading
import time
from collections.abc import Callable

import msgspec

from gpuscale.events.bounded import JsonInputError, check_depth
from gpuscale.events.dropped import DroppedLines
from gpuscale.events.schema import (
    EndEvent,
    ErrorEvent,
    Event,
    LogEvent,
    PhaseEvent,
    StartEvent,
    decode,
    encode,
)
from gpuscale.formatting import visible

ENV_ADDRESS = "GPUSCALE_EVENTS"
ENV_TOKEN = "GPUSCALE_TOKEN"
ENV_WORKER = "GPUSCALE_WORKER"
ENV_SESSION = "GPUSCALE_SESSION"
DEFAULT_PORT = 47470
"""The port a multi-worker chief listens on unless told otherwise."""
MAX_LINE_BYTES = 4 * 1024 * 1024
MAX_HELLO_BYTES = 1024
"""The most a connection may send before it is authenticated."""
HELLO_TIMEOUT_S = 10.0
"""How long a new connection may take to send its whole hello before it is closed."""
MAX_PENDING = 16
"""Connections waiting for their hello at once; more are closed at once."""
MAX_CONNECTIONS = 128
"""Connections (and their threads) at once, authenticated or not."""
REJECT_NOTICE_INTERVAL_S = 10.0
"""At most one notice about refused connections per this many seconds."""
MAX_CLIENT_BACKLOG = 50_000
"""Events an :class:`EventClient` holds while its connection is slower than its
producer; past this, log lines are dropped (counted in a notice sent later),
never steps, phases or the end."""
ACK_TIMEOUT_S = 10.0
"""How long a client waits for the server's answer to its hello."""
RECONNECT_BACKOFF_S = (0.5, 1.0, 2.0)
"""How long :class:`EventClient` tries each reconnection after a send fails."""
SEND_INTERVAL_S = 0.2
"""While events keep coming, an :class:`EventClient` sends once per this many seconds,
all that came meanwhile in one write, its thread woken by a timer (a step's ``send``
only queues it); the first event after a quiet spell goes at once, and so do the
rare ones that say where the run is (:data:`SENT_AT_ONCE`). A write costs about
0.2 ms of CPU on a 2-core machine (the writer's wake-ups, the system call, the
receiving end's wake-up and read), taken from the training's cores: at one per
50 ms that was 20 us a 4.5 ms step at the writer and 9 us at the receiver, at one
per 0.2 s 7 us and 5 us (2026-11-28, ``benchmarks/callback_overhead.py``'s model).
The dashboard redraws 4-10 times a second."""
SENT_AT_ONCE: tuple[type, ...] = (StartEvent, PhaseEvent, ErrorEvent, EndEvent)
"""Kinds an :class:`EventClient` sends without waiting for the interval (with what is
queued before them, in order): a run's start, its probes, errors and end, a few a
run. Steps, samples and log lines wait at most :data:`SEND_INTERVAL_S`."""
LOST_GRACE_S = sum(RECONNECT_BACKOFF_S) + 2.5
"""How long a worker whose connection closed without an end event may take to
reconnect before it counts as lost (longer than the client's whole back-off)."""


class Hello(msgspec.Struct, omit_defaults=True):
    """A connection's first line: who it is and the secret it presents."""

    hello: str
    token: str
    worker: int = 0
    session: str = ""
    """The launch this connection belongs to (:data:`ENV_SESSION`): a worker's gpuscale
    and its script share one; another process claiming the same worker has another."""
    cluster: str = ""
    """A digest of the cluster the worker's TF_CONFIG describes (:func:`gpuscale.live.
    cluster.fingerprint`), checked by the server's ``admit`` hook."""


class _Ack(msgspec.Struct, omit_defaults=True):
    ok: bool
    reason: str = ""
    kind: str = ""
    """Why, in one word: ``token``, ``duplicate``, ``cluster`` (empty: another reason)."""


_REFUSED_WHY = {
    "token": f"its {ENV_TOKEN} differs from the chief's",
    "cluster": "its TF_CONFIG lists another cluster",
    "duplicate": "it was started twice",
}
"""A refused worker, in a few words, by the refusal's kind (:attr:`EventServer.refused_workers`)."""


class HelloRefused(ConnectionError):
    """The server answered the hello with a refusal (a wrong token, the worker already
    connected from another launch, a cluster that differs, too many connections);
    ``reason`` says which, ``kind`` in one word (see :class:`_Ack`)."""

    def __init__(self, address: str, reason: str, kind: str = ""):
        super().__init__(f"the gpuscale event server at {address} refused this worker: {reason}")
        self.reason = reason
        self.kind = kind


def _same_token(given: str, expected: str) -> bool:
    """Constant-time comparison of two tokens as UTF-8 bytes (any characters)."""
    return hmac.compare_digest(
        given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass")
    )


def parse_frame(line: bytes) -> Event:
    """One received line (a frame) as a validated event, safely: at most
    :data:`MAX_LINE_BYTES`, nesting checked before decoding, every decoding
    problem a :class:`~gpuscale.events.bounded.JsonInputError` whose message is
    one printable line (nothing a peer sent reaches the terminal raw)."""
    if len(line) > MAX_LINE_BYTES:
        raise JsonInputError(f"a line longer than {MAX_LINE_BYTES} bytes")
    check_depth(line)
    try:
        return decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, ValueError) as exc:
        raise JsonInputError(visible(str(exc), limit=200)) from None


def parse_address(address: str) -> tuple[str, int]:
    """``"host:port"`` -> ``(host, port)``; raises ``ValueError`` with a clear message."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"not an address of the form host:port: {address!r}")
    return host.strip("[]"), int(port)


class EventServer:
    """Accepts authenticated connections and hands every event to ``on_event``.

    ``on_event`` is called from the server's threads; it must be thread-safe
    (putting into a ``queue.Queue`` is). ``on_disconnect(worker, saw_end)`` is
    called when a producer's connection closes; ``saw_end`` is False when it went
    away without an end event (a crashed or killed worker). ``admit(hello)``, called
    for a hello with the right token, returns why it is refused (``""``: admitted).
    """

    def __init__(
        self,
        on_event: Callable[[Event], None],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
        on_disconnect: Callable[[int, bool], None] | None = None,
        admit: Callable[[Hello], str] | None = None,
    ):
        self._on_event = on_event
        self._on_disconnect = on_disconnect
        self._admit = admit
        self.token = token or secrets.token_hex(16)
        self._sock = socket.create_server((host, port), reuse_port=False)
        self._sock.settimeout(0.2)
        self.host, self.port = self._sock.getsockname()[:2]
        self._closed = threading.Event()
        self._threads: list[threading.Thread] = []
        self._conns: set[socket.socket] = set()
        self._open: dict[int, int] = {}
        self._sessions: dict[int, dict[str, int]] = {}
        """Per worker, the open connections of each session that said one."""
        self._peers: dict[tuple[int, str], str] = {}
        """Where a worker's session connected from (for the refusal of another)."""
        self._lock = threading.Lock()
        self._pending = 0
        self.refused_workers: dict[int, str] = {}
        """Worker numbers named in refused hellos (a wrong token, a cluster that
        differs, started twice), with why in a few words."""
        self._rejected = 0
        self._rejected_from: set[str] = set()
        self._last_reason = ""
        self._last_reject_notice = -float("inf")
        self._accept_thread = threading.Thread(
            target=self._accept_loop, name="gpuscale-event-server", daemon=True
        )
        self._accept_thread.start()

    @property
    def address(self) -> str:
        host = self.host if self.host not in ("0.0.0.0", "::") else socket.gethostname()
        return f"{host}:{self.port}"

    def connected(self, worker: int) -> bool:
        """Whether an authenticated connection from ``worker`` is open now."""
        with self._lock:
            return self._open.get(worker, 0) > 0

    def env(self, worker: int = 0) -> dict[str, str]:
        """The environment a producer needs to reach this server."""
        return {ENV_ADDRESS: self.address, ENV_TOKEN: self.token, ENV_WORKER: str(worker)}

    def _notice(self, message: str, level: str = "warning") -> None:
        self._on_event(LogEvent(t=time.time(), message=message, source="gpuscale", level=level))

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                conn, peer = self._sock.accept()
            except TimeoutError:
                self._summarise_rejections()
                continue
            except OSError:
                break
            with self._lock:
                self._threads = [t for t in self._threads if t.is_alive()]
                full = len(self._threads) >= MAX_CONNECTIONS or self._pending >= MAX_PENDING
                if not full:
                    self._pending += 1
            if full:  # costs nothing: no thread, no read
                try:
                    conn.close()
                except OSError:
                    pass
                self._reject(peer, "too many connections")
                continue
            thread = threading.Thread(
                target=self._serve, args=(conn, peer), name="gpuscale-event-conn", daemon=True
            )
            with self._lock:
                self._conns.add(conn)
                self._threads.append(thread)
            thread.start()

    def _reject(self, peer: tuple, reason: str) -> None:
        """Count a refused connection; say so at most once per
        REJECT_NOTICE_INTERVAL_S (a port scan must not flood the run's log)."""
        with self._lock:
            self._rejected += 1
            self._rejected_from.add(str(peer[0]))
            self._last_reason = reason
        self._summarise_rejections()

    def _summarise_rejections(self, force: bool = False) -> None:
        now = time.monotonic()
        with self._lock:
            if not self._rejected or (
                not force and now - self._last_reject_notice < REJECT_NOTICE_INTERVAL_S
            ):
                return
            count, peers, reason = self._rejected, sorted(self._rejected_from), self._last_reason
            self._rejected = 0
            self._rejected_from = set()
            self._last_reject_notice = now
        where = ", ".join(peers[:3]) + (f" and {len(peers) - 3} more" if len(peers) > 3 else "")
        if count == 1:
            self._notice(f"rejected a connection from {where}: {reason}")
        else:
            self._notice(
                f"rejected {count} connections from {where} (latest: {reason}); "
                f"at most one such notice per {REJECT_NOTICE_INTERVAL_S:g} s"
            )

    def _read_hello(self, conn: socket.socket) -> tuple[bytes, bytes] | None:
        """The hello line (without its newline) and what came after it, read within
        HELLO_TIMEOUT_S in all and at most MAX_HELLO_BYTES; ``None`` when the
        connection does not send one."""
        deadline = time.monotonic() + HELLO_TIMEOUT_S
        data = b""
        while b"\n" not in data:
            left = deadline - time.monotonic()
            if left <= 0 or len(data) > MAX_HELLO_BYTES:
                return None
            conn.settimeout(left)
            try:
                chunk = conn.recv(MAX_HELLO_BYTES + 1 - len(data))
            except (TimeoutError, OSError):
                return None
            if not chunk:
                return None
            data += chunk
        line, _, rest = data.partition(b"\n")
        return line, rest

    def _answer(self, conn: socket.socket, ok: bool, reason: str = "", kind: str = "") -> None:
        try:
            conn.settimeout(2.0)
            conn.sendall(msgspec.json.encode(_Ack(ok=ok, reason=reason, kind=kind)) + b"\n")
        except OSError:
            pass

    def _open_session(self, hello: Hello, peer: tuple) -> str:
        """Count a new connection of ``hello``'s session; why it is refused instead where
        its worker has connections open from another session (the worker started twice:
        TensorFlow would fail in one of them, and its events would mix with the other's).
        A hello without a session (a local worker, an older client) is not checked."""
        if not hello.session:
            return ""
        with self._lock:
            sessions = self._sessions.setdefault(hello.worker, {})
            others = [s for s, count in sessions.items() if count and s != hello.session]
            if others:
                where = self._peers.get((hello.worker, others[0]), "another process")
                return (
                    f"worker {hello.worker} is in this run already (connected from {where}): "
                    "start each worker once, each with its own task index in TF_CONFIG"
                )
            sessions[hello.session] = sessions.get(hello.session, 0) + 1
            self._peers[(hello.worker, hello.session)] = str(peer[0])
        return ""

    def _serve(self, conn: socket.socket, peer: tuple) -> None:
        worker = -1
        session = ""
        """The session counted for this connection (:meth:`_open_session`), if any."""
        saw_end = False
        authenticated = False
        pending = True
        try:
            got = self._read_hello(conn)
            first, rest = got if got is not None else (None, b"")
            hello = None
            kind = ""  # a refusal's kind, for the refused producer and refused_workers
            if first is None:
                reason = f"no hello within {HELLO_TIMEOUT_S:g} s (or one that is too long)"
            else:
                try:
                    hello = msgspec.json.decode(first, type=Hello)  # flat: nothing to nest
                except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, ValueError):
                    hello = None
                if hello is None or hello.hello != "gpuscale":
                    reason = "not a gpuscale hello"
                elif not _same_token(hello.token, self.token):
                    reason = f"worker {hello.worker} has no valid gpuscale token ({ENV_TOKEN})"
                    kind = "token"
                else:
                    reason = self._admit(hello) if self._admit is not None else ""
                    kind = "cluster" if reason else ""
            if not reason:
                assert hello is not None
                reason = self._open_session(hello, peer)  # checked and counted at once
                kind = "duplicate" if reason else ""
                if not reason:
                    worker, session = hello.worker, hello.session
            with self._lock:
                self._pending -= 1
                pending = False
                if kind and hello is not None:
                    self.refused_workers[hello.worker] = _REFUSED_WHY[kind]
            if reason:
                if first is not None:
                    self._answer(conn, False, reason, kind)
                self._reject(peer, reason)
                return
            assert hello is not None
            self._answer(conn, True)
            conn.settimeout(None)
            reader = io.BufferedReader(_Prefixed(conn, rest), 64 * 1024)
            authenticated = True
            worker = hello.worker
            with self._lock:
                self._open[worker] = self._open.get(worker, 0) + 1
            bad = 0
            for line in iter(lambda: reader.readline(MAX_LINE_BYTES + 1), b""):
                if not line.endswith(b"\n"):
                    if len(line) <= MAX_LINE_BYTES:
                        break  # connection cut mid-line
                    cut = _skip_rest_of_line(reader)  # dropped whole, never half taken
                    bad += 1
                    if bad <= 3:
                        self._notice(
                            f"dropped an event of more than {MAX_LINE_BYTES} bytes from worker "
                            f"{worker} ({len(line) + cut} bytes)"
                        )
                    continue
                try:
                    event = parse_frame(line)
                except JsonInputError as exc:
                    bad += 1
                    if bad <= 3:
                        self._notice(f"dropped a malformed event from worker {worker}: {exc}")
                    continue
                if isinstance(event, EndEvent):
                    saw_end = True
                self._on_event(event)
        except OSError:
            pass
        finally:
            with self._lock:
                self._conns.discard(conn)
                if pending:
                    self._pending -= 1
                if authenticated:
                    self._open[worker] -= 1
                if session:
                    self._sessions[worker][session] -= 1
                    if not self._sessions[worker][session]:
                        del self._sessions[worker][session]
            try:
                conn.close()
            except OSError:
                pass
            if authenticated and self._on_disconnect is not None and not self._closed.is_set():
                self._on_disconnect(worker, saw_end)

    def close(self) -> None:
        """Stop accepting and close the open connections (lines already received are
        still handed on); returns within about 2 s whatever the producers do."""
        self._closed.set()
        try:
            self._sock.close()
        except OSError:
            pass
        self._accept_thread.join(timeout=1)
        self._summarise_rejections(force=True)
        with self._lock:
            threads = list(self._threads)
        deadline = time.monotonic() + 0.3  # lines in flight: a moment to arrive, shared
        for thread in threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        with self._lock:
            conns = list(self._conns)
        for conn in conns:  # wakes each connection's thread from its blocking read
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        deadline = time.monotonic() + 0.5
        for thread in threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))


class _Prefixed(io.RawIOBase):
    """A socket read as a stream, after the bytes that came with the hello."""

    def __init__(self, sock: socket.socket, prefix: bytes):
        self._sock = sock
        self._prefix = prefix

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._prefix:
            n = min(len(buffer), len(self._prefix))
            buffer[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        return self._sock.recv_into(buffer)


def _skip_rest_of_line(reader) -> int:
    """Read and throw away the rest of an overlong line; the bytes thrown away."""
    skipped = 0
    while True:
        chunk = reader.readline(MAX_LINE_BYTES)
        skipped += len(chunk)
        if not chunk or chunk.endswith(b"\n"):
            return skipped


_STOP = object()


class _Flush:
    """A mark in the client's queue: set once everything queued before it is written."""

    def __init__(self) -> None:
        self.done = threading.Event()


def _read_ack(sock: socket.socket, address: str) -> _Ack:
    """The server's answer to the hello (one short line)."""
    sock.settimeout(ACK_TIMEOUT_S)
    data = b""
    while b"\n" not in data and len(data) <= MAX_HELLO_BYTES:
        chunk = sock.recv(MAX_HELLO_BYTES)
        if not chunk:
            raise ConnectionResetError(f"{address} closed the connection before answering")
        data += chunk
    try:
        return msgspec.json.decode(data.partition(b"\n")[0], type=_Ack)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise ConnectionError(f"{address} is not a gpuscale event server") from None


class EventClient:
    """Sends events to an :class:`EventServer` from a background thread, so a slow
    network never stalls the training step; at most one write per
    :data:`SEND_INTERVAL_S` while events keep coming, of all the events queued
    meanwhile (sooner for :data:`SENT_AT_ONCE`'s kinds, and at :meth:`close`, which
    sends everything queued before it). Connecting retries for
    ``connect_timeout_s``; a broken connection is retried a few times with back-off,
    then events are dropped with one message on stderr (training goes on), or, given
    ``on_lost``, that is called instead (from the sender's thread).
    ``session`` and ``cluster`` go in the hello (see :class:`Hello`)."""

    def __init__(
        self,
        address: str,
        token: str,
        *,
        worker: int = 0,
        connect_timeout_s: float = 10.0,
        reconnect_attempts: int = 3,
        session: str = "",
        cluster: str = "",
        on_lost: Callable[[], None] | None = None,
    ):
        self.address = address
        self._on_lost = on_lost
        self.worker = worker
        self.session = session
        self.cluster = cluster
        self._host, self._port = parse_address(address)
        self._token = token
        self._reconnect_attempts = reconnect_attempts
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._hurry = threading.Lock()
        """Held while nothing hurries the sender; released (:meth:`_wake`) to end its wait
        for the interval early: an event of :data:`SENT_AT_ONCE`'s kinds, :meth:`close`.
        A plain lock, not a ``threading.Event``: its timed wait costs the least CPU."""
        self._hurry.acquire()
        self._sock: socket.socket | None = None
        self._broken = False
        self._dropped = DroppedLines(
            f"log lines of worker {worker}",
            "they came faster than they could be sent",
            worker=worker,
        )
        self._connect(connect_timeout_s)
        self._thread = threading.Thread(target=self._send_loop, name="gpuscale-events", daemon=True)
        self._thread.start()

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None, **kwargs) -> EventClient | None:
        """A client for the server named in the environment, or None if none is."""
        environ = os.environ if environ is None else environ
        address = environ.get(ENV_ADDRESS)
        if not address:
            return None
        text = environ.get(ENV_WORKER, "0") or "0"
        try:
            worker = int(text)
        except ValueError:
            raise ValueError(
                f"{ENV_WORKER} must be a worker number (0, 1, ...), not {text!r}; "
                f"unset it or fix it (gpuscale sets it for the processes it starts)"
            ) from None
        kwargs.setdefault("session", environ.get(ENV_SESSION, ""))
        return cls(address, environ.get(ENV_TOKEN, ""), worker=worker, **kwargs)

    def _connect(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        delay = 0.05
        while True:
            try:
                sock = socket.create_connection((self._host, self._port), timeout=5)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                hello = Hello(
                    hello="gpuscale",
                    token=self._token,
                    worker=self.worker,
                    session=self.session,
                    cluster=self.cluster,
                )
                sock.sendall(msgspec.json.encode(hello) + b"\n")
                ack = _read_ack(sock, self.address)
                sock.settimeout(None)
                if not ack.ok:
                    sock.close()
                    raise HelloRefused(self.address, ack.reason or "no reason given", ack.kind)
                self._sock = sock
                return
            except HelloRefused:
                raise
            except OSError as exc:
                if time.monotonic() + delay > deadline:
                    raise ConnectionError(
                        f"cannot reach the gpuscale event server at {self.address}: {exc}"
                    ) from exc
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def send(self, event: Event) -> None:
        """Queue one event for sending; returns at once. Log lines beyond
        :data:`MAX_CLIENT_BACKLOG` waiting events are dropped and counted."""
        if type(event) is LogEvent and self._queue.qsize() >= MAX_CLIENT_BACKLOG:
            self._dropped.drop()
            return
        if (notice := self._dropped.notice(event.t)) is not None:
            self._queue.put(notice)
        self._queue.put(event)
        if type(event) in SENT_AT_ONCE:
            self._wake()

    def flush(self, timeout_s: float = 2.0) -> bool:
        """Wait until everything queued before this call is written (at most
        ``timeout_s``); whether it was. For an event that must leave before the
        caller goes on: a thread that next holds the interpreter in a long native
        call (TensorFlow's ``MultiWorkerMirroredStrategy()`` waiting for every
        worker) leaves the sender no turn to run until that call returns."""
        mark = _Flush()
        self._queue.put(mark)
        self._wake()
        return mark.done.wait(timeout_s)

    def _wake(self) -> None:
        """End the sender's wait for the interval now (or its next one, if not waiting)."""
        try:
            self._hurry.release()
        except RuntimeError:  # released already: the sender has not waited since
            pass

    def _send_loop(self) -> None:
        while True:
            items = [self._queue.get()]  # quiet until now: the first event goes at once
            self._hurry.acquire(blocking=False)  # what hurried it is being sent now
            while True:
                while True:
                    try:
                        items.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                stop = next((i for i, item in enumerate(items) if item is _STOP), None)
                if stop is not None:
                    items = items[:stop]
                marks = [item for item in items if type(item) is _Flush]
                if marks:
                    items = [item for item in items if type(item) is not _Flush]
                if items and not self._broken:
                    self._send(b"".join(encode(item) + b"\n" for item in items))
                for mark in marks:
                    mark.done.set()
                if stop is not None:
                    return
                # events may keep coming: wait the interval (a timer, not the producer,
                # wakes this thread), then send what came meanwhile in one write
                self._hurry.acquire(timeout=SEND_INTERVAL_S)  # held again either way
                items = []
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break  # nothing came: wait for the next event

    def _send(self, data: bytes) -> None:
        """Write ``data`` (whole lines), reconnecting a few times if the connection broke."""
        for attempt in range(self._reconnect_attempts + 1):
            try:
                assert self._sock is not None
                self._sock.sendall(data)
                return
            except (OSError, AssertionError):
                if attempt == self._reconnect_attempts:
                    self._broken = True
                    if self._on_lost is not None:
                        self._on_lost()
                        return
                    print(
                        f"gpuscale: lost the event server at {self.address}; "
                        "events are no longer reported (training goes on)",
                        file=sys.stderr,
                    )
                    return
                if self._sock is not None:  # the broken one
                    try:
                        self._sock.close()
                    except OSError:
                        pass
                    self._sock = None
                try:
                    self._connect(timeout_s=RECONNECT_BACKOFF_S[min(attempt, 2)])
                except ConnectionError:
                    pass

    def close(self, timeout_s: float = 5.0) -> None:
        """Send what is queued (waiting at most ``timeout_s``), then close."""
        if (notice := self._dropped.notice()) is not None:  # the last lines were dropped
            self._queue.put(notice)
        self._queue.put(_STOP)
        self._wake()  # not a moment of the interval more
        self._thread.join(timeout=timeout_s)
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_WR)
                self._sock.close()
            except OSError:
                pass
