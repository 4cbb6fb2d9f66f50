"""A run of the user's own training script: ``gpuscale run|watch -- python train.py ARGS``.

:class:`ScriptRun` is the script-mode counterpart of :class:`gpuscale.live.trainer_run.LiveRun`
and offers the same surface to consumers (``start()``, ``events(timeout)``,
``queue``, ``stop()``, ``recording_path``, ``status``): it starts an
:class:`~gpuscale.events.transport.EventServer`, launches the script (or, with
``local_workers=N``, N copies of it as one multi-worker cluster on this
machine) with the server's address and token in the environment, turns the
script's stdout/stderr into LogEvents, samples NVML for the script's processes,
records every event and hands each one to the consumer. No TensorFlow here.

The start of the run
--------------------
The recording is written ahead: it opens when the run starts, with a start event
marked ``provisional`` (the command, the devices gpuscale sees), and every event is
recorded as it comes, so nothing waits in memory for the run's own start (see
docs/recording-format.md). A script with :class:`gpuscale.keras.ScalingMonitor`
sends its own StartEvent (model, strategy, replicas, batch, parameters) with its
first training step. The telemetry (NVML and host samples) reaches the consumer from
the launch: with its first sample the consumer gets a *provisional* start
(``provisional=True``) made up from what gpuscale knows (the command, the NVML
devices; note :data:`PROVISIONAL_NOTE`), so its stream still begins with a start.
The script's own events (its output, its callback's) are held back until the run's
start: the callback's, or, after ``start_timeout_s`` (default 15 s) without it, the
provisional one for a single-process script (given then if no sample came first). When
the callback's start arrives, consumers receive it as a second StartEvent (it
replaces the provisional one: header, devices, batch) and it is recorded, where it
supersedes the recording's provisional start.

The missing-callback warning (:data:`ADD_CALLBACK_HINT`) is given only when it
is true as far as gpuscale can tell: the script ended without a start from the
callback, or Keras's output shows a second epoch beginning without one, or
``callback_timeout_s`` passed without even ``import gpuscale.keras``; where the
script did import it (its devices set up, as asked), the warning says so instead
(:data:`LOADED_NO_STEP_HINT`: the callback not in ``fit``'s list, or a ``fit`` that
trained nothing), not that the callback and ``--devices`` were missing. The
made-up start (with the warning as its note) is then recorded as the run's own;
should the callback's start come after all, consumers still receive it and a
log line withdraws the warning. With several workers,
the chief waits (at most ``callback_timeout_s``) for every worker's start and
sends one StartEvent holding all of them in ``config["workers"]`` (host, pid,
devices of each).

The end of the run
------------------
The callback's EndEvent (one per ``fit``) becomes a log line; the run ends when
the script's processes have exited: ``completed`` (all exit 0), ``failed`` (an
ErrorEvent with the exit status and the last lines of stderr, of the first worker
to fail, whose status ``returncode`` is; without a step, "before its first step"
only where the script loaded the callback, else "before gpuscale's callback
reported a step"; a script that evidently trained without the callback, Keras's
epoch lines or ``trained_after_s``, gets the missing-callback warning), ``stopped``
(:meth:`stop`, :meth:`interrupt`; or a worker's own end said ``stopped``, as every worker of the built-in
trainer's does when one was stopped alone: a warning names the worker asked to stop;
a script's own early stop, a custom loop's ``close("stopped")`` with no worker asked to
stop, is recorded ``stopped`` too, with no warning: ``stopped_by_script``),
or ``lost``: a worker that disconnected without finishing
(killed, crashed host) is named in an ErrorEvent, the other workers of a local
cluster are stopped (a synchronous all-reduce cannot go on without it) and
everything received so far stays in the recording; a worker of a multi-host run
whose connection to the chief broke for good stops its script and ends ``lost``
too. A worker's failure that followed another worker's ``stopped`` end (Ctrl-C
on that machine) names that worker.

A cluster started by hand
-------------------------
The chief of a multi-host run makes up no start while a worker of the cluster has
not connected (:meth:`_PumpState.awaited`): TensorFlow trains only once every
worker has joined, which may take minutes. Its event server refuses a worker whose
cluster differs from its own (:func:`gpuscale.live.cluster.cluster_mismatch`) and
a worker started twice (another launch, ``GPUSCALE_SESSION``, of a worker number
already connected); the refused worker runs nothing.
"""

from __future__ import annotations

import collections
import os
import queue
import re
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from gpuscale import __version__
from gpuscale.errors import GpuscaleError
from gpuscale.events.dropped import DroppedLines
from gpuscale.events.run_name import builtin_trainer_model, script_name
from gpuscale.events.schema import (
    DeviceInfo,
    EndEvent,
    ErrorEvent,
    Event,
    GpuSample,
    HostSample,
    LogEvent,
    PhaseEvent,
    StartEvent,
    StepEvent,
    run_duration_s,
)
from gpuscale.events.transport import (
    ENV_ADDRESS,
    ENV_SESSION,
    ENV_TOKEN,
    ENV_WORKER,
    LOST_GRACE_S,
    EventClient,
    EventServer,
    HelloRefused,
)
from gpuscale.formatting import plural
from gpuscale.live import cluster
from gpuscale.live.base import RunBase
from gpuscale.live.child import (
    INTERRUPT_GRACE_S,
    STOP_DEADLINE_S,
    STOP_GRACE_S,
    describe_exit,
    read_lines,
    release,
    spawn,
)
from gpuscale.live.devices import ENV_DEVICES, device_env
from gpuscale.live.terminal import settle_line
from gpuscale.telemetry.topology import probe_topology
from gpuscale.trainer.vote import stop_asked_signal

CALLBACK_SOURCE = "keras-callback"
"""Source of the LogEvent that ``import gpuscale.keras`` sends (see :mod:`gpuscale.keras`)."""
TELEMETRY_SOURCE = "telemetry"
"""Source of the sampler's own LogEvents (:mod:`gpuscale.telemetry.sampler`): shown
from the launch, with the samples."""
AWAITED_FIRST_S = 15.0
"""A multi-host run's chief says which workers it still awaits this long after launch..."""
AWAITED_EVERY_S = 60.0
"""...and again this often while none has started training."""
ADD_CALLBACK_HINT = (
    "step times are unavailable: the script does not use gpuscale's callback. "
    "Add it with one line: model.fit(..., callbacks=[gpuscale.keras.ScalingMonitor()])"
)
LOADED_NO_STEP_HINT = (
    "step times are unavailable: the script imported gpuscale.keras, but no "
    "ScalingMonitor reported a training step (is it in model.fit(..., callbacks=[...])? "
    "a fit with nothing to train, e.g. initial_epoch=epochs, reports none)"
)
"""The warning where ``import gpuscale.keras`` said so (its devices were set up) but no
start came: the callback is loaded, not used, or used by a fit that ran no step."""
PROVISIONAL_NOTE = (
    "no start from gpuscale's callback yet (it sends one with the first training step): "
    "until then this is what gpuscale sees from outside the script"
)
STOPPED_NOTE = (
    "stopped before the script started training: whether it uses gpuscale's callback "
    "is not known; this is what was asked"
)
KERAS_LATER_EPOCH = re.compile(r"(?:^|\r)Epoch (?:[2-9]|\d{2,})/\d+")
"""Keras's line at the start of epoch 2 or later: the first epoch is over."""
KERAS_EPOCH = re.compile(r"(?:^|\r)Epoch \d+/\d+")
"""Keras's line at the start of an epoch (``fit`` with ``verbose`` on): training began."""
REMOTE_END_WAIT_S = 30.0
"""How long the chief of a multi-host run, its own script over, waits for the remote
workers' connections to end (their last events) before its run ends."""
CHIEF_GONE_GRACE_S = 60.0
"""How long a worker's script may run on after its chief is gone (the chief's run
completed, or its machine went away) before it is stopped: long enough to write its
own files after the last step, short of the for ever its next all-reduce would wait."""
TRAINED_AFTER_S = 30.0
"""A script that ran this long without a word from ``gpuscale.keras`` evidently got
past its imports (where ``import gpuscale.keras`` belongs): its failure then comes
with the missing-callback advice (:meth:`_PumpState.trained_without_callback`)."""
BEFORE_FIRST_STEP = "before its first step"
"""When a script that loaded gpuscale's callback failed, where no step came."""
BEFORE_CALLBACK_STEP = "before gpuscale's callback reported a step"
"""When a script failed that gpuscale's callback never spoke for: it may have trained
for hours, uncounted."""
STDERR_TAIL_LINES = 30
MAX_QUEUED_LINES = 100_000
"""Output lines waiting to be recorded: past this (or :data:`MAX_QUEUED_BYTES`) the
script prints faster than gpuscale records, and further lines are dropped (counted
in a notice) until the backlog is below it again. Steps, phases and the end are
never dropped."""
MAX_QUEUED_BYTES = 64 * 1024 * 1024
"""Output waiting to be recorded, in bytes of text (see :data:`MAX_QUEUED_LINES`)."""
STDOUT_SHARE = 0.75
"""The part of the backlog (:data:`MAX_QUEUED_LINES`, :data:`MAX_QUEUED_BYTES`) stdout
may fill: a script flooding stdout never leaves stderr, where its errors go, no room."""


def backlog_admits(stream: str, lines: int, size_bytes: int, line_bytes: int) -> bool:
    """Whether a line of ``line_bytes`` from ``stream`` (``stdout``/``stderr``) fits
    a backlog already holding ``lines`` lines of ``size_bytes``: stderr up to the
    whole backlog, stdout up to :data:`STDOUT_SHARE` of it."""
    share = 1.0 if stream == "stderr" else STDOUT_SHARE
    return lines < MAX_QUEUED_LINES * share and size_bytes + line_bytes <= MAX_QUEUED_BYTES * share


MAX_CONSUMER_BACKLOG = 20_000
"""Events waiting for the consumer (the dashboard, the CLI): past this, output
lines are recorded but not shown (counted in a notice)."""


class _Disconnect(msgspec.Struct):
    worker: int
    saw_end: bool


class _Line(msgspec.Struct):
    """An output line read here, counted in the backlog until the pump takes it."""

    event: LogEvent
    size: int


class _Exited(msgspec.Struct):
    worker: int
    returncode: int


class _ChiefLost(msgspec.Struct):
    """A worker's connection to its chief broke for good (the chief's gpuscale ended,
    or its machine went away)."""


class ScriptRun(RunBase):
    """Runs the user's script under gpuscale; see the module docstring.

    ``argv``: the command (``["python", "train.py", ...]``). ``record``: a path,
    ``None`` (no recording) or ``"default"`` (gpuscale's runs folder).
    ``local_workers``: 0 for one process; N >= 1 for N processes forming a
    MultiWorkerMirroredStrategy cluster on loopback ports. ``cluster_info``: this
    machine's place in a real multi-host cluster (chief listens on
    ``listen_host:port`` with the shared ``token``; other workers forward to it).
    ``lost_grace_s``: how long a remote worker whose connection closed without an
    end may take to reconnect before it counts as lost. ``nvml`` is handed to the
    Sampler (tests pass a stand-in). ``early_telemetry=False`` holds the telemetry
    with the script's events until the run's start (a consumer that shows no samples).
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        record: str | os.PathLike | None = "default",
        sample_interval_s: float = 0.5,
        local_workers: int = 0,
        cluster_info: cluster.ClusterInfo | None = None,
        start_timeout_s: float = 15.0,
        chief_gone_grace_s: float = CHIEF_GONE_GRACE_S,
        callback_timeout_s: float = 120.0,
        trained_after_s: float = TRAINED_AFTER_S,
        lost_grace_s: float = LOST_GRACE_S,
        nvml: Any = None,
        env: Mapping[str, str] | None = None,
        sampler: bool = True,
        early_telemetry: bool = True,
    ):
        if not argv:
            raise GpuscaleError(
                "no command to run: put it after '--', e.g. gpuscale run -- python train.py"
            )
        self._init_run()
        self.argv = list(argv)
        self.name = script_name(self.argv)
        self.record = record
        self.sample_interval_s = sample_interval_s
        self.local_workers = local_workers
        self.cluster_info = cluster_info
        self.start_timeout_s = start_timeout_s
        self.chief_gone_grace_s = chief_gone_grace_s
        self.callback_timeout_s = callback_timeout_s
        self.trained_after_s = trained_after_s
        self.lost_grace_s = lost_grace_s
        self._nvml = nvml
        self._env = dict(os.environ if env is None else env)
        self._use_sampler = sampler
        self.early_telemetry = early_telemetry
        """The consumer gets the telemetry from the launch, with a provisional start (a
        dashboard); ``False``: held with the script's events until the run's start, for
        a consumer that shows no samples and would print the start twice (``run``'s text)."""
        if cluster_info is not None:
            self.num_workers = cluster_info.num_workers
            self.worker = cluster_info.index
        else:
            self.num_workers = max(1, local_workers)
            self.worker = 0
        self.is_chief = self.worker == 0

        self.status: str | None = None
        """``completed``, ``failed``, ``stopped`` or ``lost`` once the run is over."""
        self.lost_workers: list[int] = []
        self.forwarding_to: str | None = None
        """For a non-chief worker: the chief's event address, where its events go."""
        self._incoming: queue.Queue[Any] = queue.Queue()
        self._procs: dict[int, subprocess.Popen] = {}
        self._threads: list[threading.Thread] = []
        self._server: EventServer | None = None
        self._forward: EventClient | None = None
        self._stderr_tail: dict[int, collections.deque[str]] = {}
        self._stopping = threading.Event()
        self._interrupt_lock = threading.Lock()
        self._interrupt_sent = False
        """:meth:`interrupt` has begun (one SIGINT a run)."""
        self._hurry = threading.Event()
        """Set by :meth:`stop`: an :meth:`interrupt` waiting for the script stops waiting."""
        self.interrupt_grace_s = 0.0 if builtin_trainer_model(self.argv) else INTERRUPT_GRACE_S
        """A user's script gets Ctrl-C first when stopped by hand (:meth:`interrupt`); the
        built-in trainer as a worker program stops on SIGTERM as on SIGINT, at once."""
        self._t0 = 0.0
        self._launched_at: float | None = None
        self._launched_mono = 0.0
        """When the first script process was launched (wall clock, monotonic): where the
        run lasts from (:meth:`_mark_launch`)."""
        self._consumer_dropped = 0
        self._descendants: dict[int, float] = {}
        """Processes the scripts started: pid -> start time (see _track_descendants)."""
        self._tracked_at = 0.0
        self._pump_started = False
        self._backlog_lock = threading.Lock()
        self._backlog_lines = 0
        self._backlog_bytes = 0
        """Output lines (and their bytes) read but not yet recorded: bounded."""

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> ScriptRun:
        """Start the event server, the script process(es) and the sampler; returns at
        once. A sampler that refuses its settings raises before any process starts."""
        self._t0 = time.perf_counter()
        if self._use_sampler:
            self._sampler = self._new_sampler(
                self._emit, self._pids, nvml=self._nvml, worker=self.worker
            )
        env = dict(self._env)
        env["PYTHONUNBUFFERED"] = "1"
        if self.cluster_info is not None and not self.is_chief:
            address = cluster.events_address(self.cluster_info, self._env)
            token = cluster.shared_token(self._env)
            session = secrets.token_hex(8)  # this launch: its script's connections share it
            self.forwarding_to = address
            try:
                self._forward = EventClient(
                    address,
                    token,
                    worker=self.worker,
                    connect_timeout_s=60.0,
                    session=session,
                    cluster=cluster.fingerprint(self.cluster_info),
                    on_lost=lambda: self._incoming.put(_ChiefLost()),
                )
            except HelloRefused as exc:
                advice = (
                    f"; set the same {ENV_TOKEN} on every worker" if exc.kind == "token" else ""
                )
                raise GpuscaleError(f"{exc}{advice} (nothing was run)") from None
            except ConnectionError as exc:
                raise GpuscaleError(f"{exc} (is the chief's gpuscale running?)") from None
            env.update(
                {
                    ENV_ADDRESS: address,
                    ENV_TOKEN: token,
                    ENV_WORKER: str(self.worker),
                    ENV_SESSION: session,
                }
            )
            self._launch_one(env, self.worker)
        else:
            if self.cluster_info is not None:
                token = cluster.shared_token(self._env)
                port = cluster.events_port(self._env)
                info = self.cluster_info
                try:
                    self._server = EventServer(
                        self._incoming.put,
                        host="0.0.0.0",
                        port=port,
                        token=token,
                        on_disconnect=self._on_disconnect,
                        admit=lambda hello: cluster.cluster_mismatch(
                            info, hello.cluster, hello.worker
                        ),
                    )
                except OSError as exc:
                    raise GpuscaleError(
                        f"cannot listen for workers on port {port}: {exc.strerror or exc} "
                        f"(set {cluster.ENV_PORT} to a free port on every worker)"
                    ) from None
                env.update(self._server.env(0))
                env[ENV_ADDRESS] = f"127.0.0.1:{self._server.port}"
                self._launch_one(env, 0)
            else:
                self._server = EventServer(self._incoming.put, on_disconnect=self._on_disconnect)
                if self.local_workers >= 1:
                    self._launch_local(env)
                else:
                    env.update(self._server.env(0))
                    self._launch_one(env, 0)
        self._start_sampler()
        state = _PumpState(self)
        try:
            state.begin_recording()  # on disk before start() returns
        except Exception as exc:  # recording must never stop a run
            self._recording_problem(f"recording stopped: {type(exc).__name__}: {exc}")
        pump = threading.Thread(
            target=self._pump, args=(state,), name="gpuscale-script-pump", daemon=True
        )
        self._pump_started = True
        pump.start()
        self._threads.append(pump)
        return self

    def _mark_launch(self) -> None:
        """Note the launch, just before the first script process is spawned: a run
        without the callback's start lasts from here (its made-up start is stamped
        with it), not from when gpuscale was done starting its own parts after it
        (NVML, threads: they may take long on a busy machine, and the script runs
        meanwhile)."""
        if self._launched_at is None:
            self._launched_at = time.time()
            self._launched_mono = time.monotonic()

    def _launch_one(self, env: dict[str, str], worker: int) -> None:
        self._mark_launch()
        if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            # the script inherits an ignored SIGINT (gpuscale started with it ignored,
            # `cmd &` from a script): a Ctrl-C passed on would only wait out the grace
            self.interrupt_grace_s = 0.0
        try:
            proc = spawn(
                self.argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            self._close_transport()
            raise GpuscaleError(
                f"cannot start {shlex.join(self.argv)}: {exc.strerror or exc}"
            ) from None
        self._watch(proc, worker)

    def _launch_local(self, env: dict[str, str]) -> None:
        assert self._server is not None
        self._mark_launch()
        try:
            procs = cluster.launch_local_workers(
                self.argv,
                self.local_workers,
                events_address=self._server.address,
                token=self._server.token,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except GpuscaleError:
            self._close_transport()
            raise
        for worker, proc in enumerate(procs):
            self._watch(proc, worker)

    def _watch(self, proc: subprocess.Popen, worker: int) -> None:
        self._procs[worker] = proc
        self._stderr_tail[worker] = collections.deque(maxlen=STDERR_TAIL_LINES)
        for stream, level in ((proc.stdout, "info"), (proc.stderr, "warning")):
            thread = threading.Thread(
                target=self._read_lines,
                args=(stream, worker, level),
                name=f"gpuscale-script-{level}",
                daemon=True,
            )
            thread.start()
            self._threads.append(thread)
        readers = self._threads[-2:]
        waiter = threading.Thread(
            target=self._wait_exit,
            args=(proc, worker, readers),
            name="gpuscale-script-wait",
            daemon=True,
        )
        waiter.start()
        self._threads.append(waiter)

    def _read_lines(self, stream: Any, worker: int, level: str) -> None:
        """Each line the script prints, as a LogEvent: stdout ``info``, stderr
        ``warning``, TensorFlow's own C++ log lines at their level (start-up noise
        ``debug``), as for the built-in trainer."""
        name = "stderr" if level == "warning" else "stdout"
        dropped = DroppedLines(
            f"lines of the script's {name}",
            "it printed faster than gpuscale records (its backlog was full)",
            worker=worker,
        )

        def on_line(line_level: str, message: str) -> None:
            message = settle_line(message)  # progress bars: the line's last state
            if name == "stderr" and line_level != "debug":
                self._stderr_tail[worker].append(message)
            event = LogEvent(
                t=time.time(), worker=worker, message=message, source="script", level=line_level
            )
            if self._forward is not None:
                self._emit(event)  # to the chief, through the client's own queue
                return
            size = len(message) + 64
            with self._backlog_lock:
                full = not backlog_admits(name, self._backlog_lines, self._backlog_bytes, size)
                if not full:
                    self._backlog_lines += 1
                    self._backlog_bytes += size
            if full:
                dropped.drop()
                return
            if (notice := dropped.notice()) is not None:
                self._emit(notice)
            self._incoming.put(_Line(event, size))

        read_lines(stream, name, on_line, skip_blank=False)
        if (notice := dropped.notice()) is not None:
            self._emit(notice)

    def _wait_exit(
        self, proc: subprocess.Popen, worker: int, readers: list[threading.Thread]
    ) -> None:
        returncode = proc.wait()
        for reader in readers:  # its last lines come before its exit
            reader.join(timeout=5.0)
        self._incoming.put(_Exited(worker=worker, returncode=returncode))

    def _pids(self) -> list[int]:
        pids = []
        for proc in self._procs.values():
            if proc.poll() is None:
                pids.append(proc.pid)
                try:
                    import psutil

                    pids.extend(c.pid for c in psutil.Process(proc.pid).children(recursive=True))
                except Exception:  # the process may be gone between the two calls
                    pass
        return pids

    def _start_sampler(self) -> None:
        if self._sampler is None:
            return
        try:
            self._sampler.start()
        except Exception as exc:  # telemetry must never stop a run
            self._sampler = None
            self._emit(
                LogEvent(
                    t=time.time(),
                    worker=self.worker,
                    message=f"telemetry is off: {type(exc).__name__}: {exc}",
                    source="telemetry",
                    level="warning",
                )
            )

    def _emit(self, event: Event) -> None:
        """Entry point of every locally produced event (log lines, samples)."""
        if self._forward is not None:
            self._forward.send(msgspec.structs.replace(event, worker=self.worker))
        else:
            self._incoming.put(event)

    def _on_disconnect(self, worker: int, saw_end: bool) -> None:
        self._incoming.put(_Disconnect(worker=worker, saw_end=saw_end))

    # -- the pump: start gating, lost workers, the end ---------------------------------
    def _pump(self, state: _PumpState) -> None:
        try:
            state.run()
        except Exception as exc:  # never leave the consumer waiting forever
            state.fail_internal(exc)
        finally:
            self._shutdown()
            self._done.set()
            self.queue.put(None)

    def _publish(self, event: Event) -> None:
        if isinstance(event, StartEvent):
            self._stamp_sweep(event)
            self.start_event = event
        elif isinstance(event, EndEvent):
            self.end = event
        elif isinstance(event, ErrorEvent) and self.error is None:
            self.error = event
        if self._forward is not None and isinstance(event, EndEvent):
            # tells the chief this worker finished (not lost) before the connection closes
            self._forward.send(msgspec.structs.replace(event, worker=self.worker, summary=None))
        if (
            type(event) is LogEvent
            and event.source == "script"
            and self.queue.qsize() >= MAX_CONSUMER_BACKLOG
        ):
            self._consumer_dropped += 1  # recorded, not shown: the consumer is behind
            return
        if self._consumer_dropped:
            dropped, self._consumer_dropped = self._consumer_dropped, 0
            self.queue.put(
                LogEvent(
                    t=event.t,
                    worker=self.worker,
                    source="gpuscale",
                    level="warning",
                    message=(
                        f"{plural(dropped, 'line')} of output not shown: they "
                        "came faster than they could be displayed (all are in the recording)"
                    ),
                )
            )
        self.queue.put(event)

    def _record(self, event: Event) -> None:
        if self._recorder is not None:
            self._recorder.write(event)

    def _open_recorder(self, start: StartEvent, model: str) -> None:
        if self._forward is None:  # a non-chief worker's events are recorded by the chief
            super()._open_recorder(start, model)

    def _recording_problem(self, message: str) -> None:
        self.recording_problem = message
        self.queue.put(LogEvent(t=time.time(), message=message, source="recorder", level="warning"))

    def _track_descendants(self) -> None:
        """Remember every process the scripts started (with its start time, against
        pid reuse), so one that left the process group (``setsid``) and was
        orphaned is still stopped with the run."""
        try:
            import psutil
        except ImportError:
            return
        for proc in list(self._procs.values()):
            if proc.poll() is not None:
                continue
            try:
                children = psutil.Process(proc.pid).children(recursive=True)
            except psutil.Error:
                continue
            for child in children:
                try:
                    self._descendants.setdefault(child.pid, child.create_time())
                except psutil.Error:
                    pass

    def _signal_descendants(self, signum: int) -> int:
        """Send ``signum`` to the remembered descendants still alive; how many."""
        try:
            import psutil
        except ImportError:
            return 0
        alive = 0
        for pid, created in list(self._descendants.items()):
            try:
                process = psutil.Process(pid)
                if process.create_time() != created:
                    raise psutil.NoSuchProcess(pid)
                if process.status() == psutil.STATUS_ZOMBIE:
                    raise psutil.NoSuchProcess(pid)
                process.send_signal(signum)
                alive += 1
            except psutil.Error:
                self._descendants.pop(pid, None)
        return alive

    def _terminate(self, grace_s: float = 3.0) -> None:
        """SIGTERM the scripts' process groups and every process they started,
        SIGKILL what is left after ``grace_s``."""
        self._track_descendants()
        for proc in self._procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except (ProcessLookupError, PermissionError):
                    pass
        self._signal_descendants(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        killed = []
        for proc in self._procs.values():
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                killed.append(proc)
        while self._signal_descendants(0) and time.monotonic() < deadline:
            time.sleep(0.05)
        self._signal_descendants(signal.SIGKILL)
        deadline = time.monotonic() + 1.0
        for proc in killed:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:  # stuck in the kernel: its waiter reaps it
                pass

    def _close_transport(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        if self._forward is not None:
            self._forward.close()
            self._forward = None

    def _shutdown(self) -> None:
        if self._sampler is not None:
            self._sampler.stop()
            self._sampler = None
        self._terminate(grace_s=1.0)
        for proc in self._procs.values():
            if proc.poll() is not None:  # stopped, with its group: gpuscale's death need not
                release(proc)
        if self._recorder is not None:
            self._recorder.close()
            if not self._recorder.on_disk:
                self.recording_path = None  # "recorded to" only a file that was written
        self._close_transport()

    def _interrupt(self, grace_s: float) -> None:
        """Pass Ctrl-C on to the scripts: SIGINT to their process groups, as a terminal
        sends it to a program run alone (a process that left the group gets none there
        either); return once they have exited, after ``grace_s``, or at :meth:`hurry`."""
        self._track_descendants()
        interrupted = []
        for proc in self._procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGINT)
                    interrupted.append(proc)
                except (ProcessLookupError, PermissionError):
                    pass
        deadline = time.monotonic() + grace_s
        while any(proc.poll() is None for proc in interrupted):
            left = deadline - time.monotonic()
            if left <= 0 or self._hurry.wait(min(0.05, left)):
                return

    def interrupt(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop the script as the user asked by hand (Ctrl-C in ``gpuscale run``, the
        dashboard's ``q``), as Ctrl-C stops it run alone: SIGINT to its process group
        (its ``except KeyboardInterrupt`` runs: a checkpoint saved), then, if it is
        still running :attr:`interrupt_grace_s` later, as :meth:`stop`; the run ends
        ``stopped``. Returns within :data:`INTERRUPT_GRACE_S` + 5 s in all. Idempotent:
        a second call sends no second SIGINT (it would raise inside the script's
        handler, cutting its save short) but waits for the run the first one stops."""
        with self._interrupt_lock:
            first = not self._interrupt_sent
            self._interrupt_sent = True
        if not first:
            self._done.wait(timeout=self.interrupt_grace_s + STOP_DEADLINE_S)
            return
        self._stop(grace_s, self.interrupt_grace_s)

    def hurry(self) -> None:
        """Cut the wait of an :meth:`interrupt` under way short: SIGTERM now."""
        self._hurry.set()

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop the script (SIGTERM to its process group, SIGKILL after ``grace_s``) and
        end the run as ``stopped``; returns within 5 s in all (called while
        :meth:`interrupt` waits for the script, it cuts that wait short). Idempotent."""
        self.hurry()
        self._stop(grace_s, 0.0)

    def _stop(self, grace_s: float, interrupt_s: float) -> None:
        if self._done.is_set():
            return
        if not self._pump_started:  # start() failed or never ran: nothing to wait for
            self._stopping.set()
            self._shutdown()
            self._done.set()
            self.queue.put(None)
            return
        deadline = time.monotonic() + interrupt_s + STOP_DEADLINE_S
        self._stopping.set()
        self._incoming.put(None)
        if interrupt_s > 0 and not self._hurry.is_set():
            self._interrupt(interrupt_s)
        self._terminate(grace_s=min(grace_s, STOP_DEADLINE_S - 2.0))
        self._done.wait(timeout=max(0.0, deadline - time.monotonic()))

    def pid_of(self, worker: int) -> int | None:
        """The process id of a local worker's script (None if not started here)."""
        proc = self._procs.get(worker)
        return proc.pid if proc else None


class _PumpState:
    """The pump thread's state machine (one instance per run)."""

    def __init__(self, run: ScriptRun):
        self.run_ = run
        self.started = False
        self.held: list[Event] = []
        self.starts: dict[int, StartEvent] = {}
        self.announced_at: float | None = None
        launched = run._launched_at is not None
        self.t0 = run._launched_mono if launched else time.monotonic()
        """When the run began (monotonic): the start timeout and the waits count from here."""
        self.launched_at = run._launched_at if launched else time.time()
        """When the run began (wall clock, the script's launch): a made-up start is stamped
        with it, so a run without the callback's start, or stopped before it, lasts from
        here."""
        self.deadline = self.t0 + run.start_timeout_s
        if run._forward is not None:  # a non-chief worker: its events go to the chief
            self.deadline = time.monotonic()
        self.exited: dict[int, int] = {}
        self.disconnected: set[int] = set()
        self.connected: set[int] = set()
        self.ended_workers: dict[int, int] = {}
        self.chief_lost = False
        """A worker of a multi-host run lost its chief while its script ran (its run
        ended, or its machine went away)."""
        self.chief_lost_at: float | None = None
        self.stopped_for_chief = False
        """The script ran on :attr:`ScriptRun.chief_gone_grace_s` after its chief was
        gone, and was stopped (it cannot train on alone): the run ends ``lost``. A
        script that ends on its own within it (the chief completed first, this worker
        was writing its files) ends as its exit says."""
        self.stopped_workers: set[int] = set()
        """Workers whose own end said ``stopped`` (a multi-worker trainer's stop takes
        every worker with it, and each still exits 0)."""
        self.stopped_before_failure: list[int] = []
        """Workers whose end had said ``stopped`` when the first worker failed: a
        synchronous all-reduce cannot go on without them, which is likely why."""
        self.asked_to_stop: dict[int, str] = {}
        """Workers that said they were asked to stop, with the signal
        (:func:`~gpuscale.trainer.vote.stop_asked_message`)."""
        self.steps: dict[int, int] = collections.defaultdict(int)
        self.analysis_events: list[Event] = []
        self.lost: list[int] = []
        self.suspects: dict[int, float] = {}
        """Remote workers whose connection closed without an end: when they count as lost."""
        self.exit_seen_at: float | None = None
        self.provisional = False
        """Consumers have a made-up start while the callback's is awaited (the recording
        has had its own provisional start since the run began)."""
        self.shown_provisional = False
        """Consumers have been given a provisional start: with the run's first telemetry
        (:meth:`show_telemetry`), or after ``start_timeout_s`` (:meth:`send_provisional`)."""
        self.hinted = False
        """The missing-callback warning went out (and was not withdrawn)."""
        self.later_epoch = False
        """The script's output shows Keras beginning a second epoch."""
        self.keras_epoch = False
        """The script's output shows Keras beginning an epoch (the first counts)."""
        self.awaited_said = 0.0
        """Seconds after the launch when the chief last said whom it awaits (0: never)."""

    # what the recording and the consumer see --------------------------------------------
    def begin_recording(self) -> None:
        """Write-ahead: open the recording at once with a provisional start, so every
        event is on disk within a flush interval even before the run's own start
        (a script's callback, or the start made up after ``start_timeout_s``)."""
        run = self.run_
        if run.record is None or run._forward is not None:
            return
        provisional = self.provisional_start(
            "provisional: the run's own start event follows when it is known"
        )
        run._begin_recording(provisional, run.name)

    def publish(self, event: Event, *, record: bool = True) -> None:
        """Record ``event`` now; hand it to the consumer once the start is sent, or at
        once for telemetry (:meth:`show_telemetry`)."""
        if record:
            self.run_._record(event)
        if not self.started and not self.show_telemetry(event):
            if (
                type(event) is LogEvent
                and event.source == "script"
                and len(self.held) >= MAX_CONSUMER_BACKLOG
            ):
                self.run_._consumer_dropped += 1  # recorded, shown as a count
                return
            self.held.append(event)
            return
        if isinstance(event, (StepEvent, PhaseEvent, GpuSample, HostSample, StartEvent)):
            self.analysis_events.append(event)
        if isinstance(event, StepEvent):
            self.steps[event.worker] = max(self.steps[event.worker], event.step + 1)
        self.run_._publish(event)

    def show_telemetry(self, event: Event) -> bool:
        """Whether ``event``, come before the run's start, goes to the consumer now: the
        samples of the script's processes (and the sampler's own notices) show from the
        launch, as nvitop's do, while TensorFlow imports. The consumer's stream still
        begins with a start: a provisional one, given with the first such event; the
        script's own events (its output, its callback's) still wait for the run's start
        (or the made-up one after ``start_timeout_s``), and are ordered after it. A
        worker that forwards to the chief gives its start at once (no wait)."""
        run = self.run_
        telemetry = isinstance(event, (GpuSample, HostSample)) or (
            type(event) is LogEvent and event.source == TELEMETRY_SOURCE
        )
        if not telemetry or run._forward is not None or not run.early_telemetry:
            return False
        if not self.shown_provisional:
            self.show_provisional()
        return True

    def show_provisional(self) -> None:
        """Give the consumers a made-up start (``provisional=True``): what gpuscale knows
        (the command, the devices it sees), replaced by the run's own when it comes."""
        start = self.provisional_start()
        self.add_topology(start)
        self.shown_provisional = True
        self.run_._publish(start)  # consumers only: the recording began with its own

    def add_topology(self, start: StartEvent) -> None:
        run = self.run_
        if start.topology is None and run.num_workers == 1:  # this machine's GPU links
            start.topology = getattr(run._sampler, "topology", None) or probe_topology(run._nvml)

    def send_start(self, start: StartEvent) -> None:
        run = self.run_
        self.add_topology(start)
        run._record_start(start, run.name)
        self.started = True
        self.publish(start, record=False)
        held, self.held = self.held, []
        for event in held:
            self.publish(event, record=False)  # on disk already

    def check_devices(self, start: StartEvent) -> None:
        """``--devices N`` asked for N replicas: say so when the script trains on fewer."""
        run = self.run_
        asked = run._env.get(ENV_DEVICES, "")
        if run.num_workers != 1 or not asked.isdigit() or start.num_replicas == int(asked):
            return
        self.publish(
            LogEvent(
                t=start.t,
                source="gpuscale",
                level="warning",
                message=(
                    f"--devices {asked} but the script trains on {start.num_replicas} "
                    f"replica(s) ({start.strategy} strategy): build and compile the model "
                    "inside 'with tf.distribute.MirroredStrategy().scope():' (no device list), "
                    "and import gpuscale.keras before the first TensorFlow operation"
                ),
            )
        )

    def may_wait_for_callback(self) -> bool:
        """Whether the start may stay provisional: one local script, still running."""
        run = self.run_
        return (
            run.num_workers == 1
            and run._forward is None
            and run.cluster_info is None
            and not self.starts
            and not self.lost
            and len(self.exited) < len(run._procs)
            and not run._stopping.is_set()
        )

    def send_provisional(self) -> None:
        """Show the run with a made-up start (``provisional=True``) while the callback's
        is awaited (TensorFlow can take long to import and trace). Every event is
        recorded as it comes meanwhile, after the recording's own provisional start."""
        if not self.shown_provisional:  # else given with the first telemetry already
            self.show_provisional()
        self.started = True
        self.provisional = True
        held, self.held = self.held, []
        for event in held:
            self.publish(event, record=False)  # on disk already

    def commit(self, start: StartEvent) -> None:
        """End the provisional start: ``start`` is recorded as the run's own (it
        supersedes the recording's provisional start) and consumers get it as the
        run's description (it replaces the provisional one they were shown)."""
        run = self.run_
        self.provisional = False
        self.add_topology(start)
        run._record_start(start, run.name)
        self.publish(start, record=False)

    def hint(self) -> None:
        """The script does not use the callback (as far as gpuscale can tell): say so."""
        self.hinted = True
        if self.provisional:
            self.commit(self.callbackless_start())
        loaded = self.callback_loaded()
        message = LOADED_NO_STEP_HINT if loaded else ADD_CALLBACK_HINT
        asked = self.asked_replicas(0)
        if asked > 1 and not loaded:  # --devices N reaches the script through gpuscale.keras
            message += (
                f". --devices {asked} was not applied either: gpuscale.keras sets up the "
                "logical devices when the script imports it"
            )
        self.publish(LogEvent(t=time.time(), source="gpuscale", level="warning", message=message))

    def hint_due(self) -> bool:
        """No step by the end of the first epoch (Keras's output says a later one began),
        or ``callback_timeout_s`` with not even ``import gpuscale.keras``."""
        waited = time.monotonic() - self.t0
        return self.later_epoch or (
            self.announced_at is None and waited >= self.run_.callback_timeout_s
        )

    def withdraw_hint(self, start: StartEvent) -> None:
        """The callback's start came after the warning: consumers get it (the recording
        keeps the made-up start as the run's own), and the warning is withdrawn."""
        run = self.run_
        self.hinted = False
        run._stamp_sweep(start)
        run.start_event = start
        run.queue.put(start)
        self.analysis_events.append(start)
        self.publish(
            LogEvent(
                t=start.t,
                source="gpuscale",
                message=(
                    f"gpuscale's callback started after all ({start.model}, {start.strategy}, "
                    f"{plural(start.num_replicas, 'replica')}): step times follow, the warning above "
                    "no longer applies"
                ),
            )
        )

    def merged_start(self) -> StartEvent:
        """One StartEvent for the run from the workers' own (or a made-up one)."""
        run = self.run_
        if not self.starts:
            return self.callbackless_start()
        first = self.starts[min(self.starts)]
        if run.num_workers == 1 and len(self.starts) == 1:
            return first
        workers = [
            {
                "worker": w,
                "host": s.host,
                "pid": s.pid,
                "devices": [d.tf_name or d.name for d in s.devices],
                "num_replicas": s.num_replicas,
            }
            for w, s in sorted(self.starts.items())
        ]
        config = dict(first.config)
        config["workers"] = workers
        missing = [w for w in range(run.num_workers) if w not in self.starts]
        note = first.note
        if missing:
            note = (
                f"no start from worker(s) {', '.join(map(str, missing))} within "
                f"{run.callback_timeout_s:g} s"
            )
        pids = sorted({p for s in self.starts.values() for p in s.pids})
        return msgspec.structs.replace(
            first,
            worker=0,
            config=config,
            num_workers=max(run.num_workers, first.num_workers),
            pids=pids,
            note=note,
        )

    def stopped_before_start(self) -> bool:
        """Stopped (Ctrl-C) before the script's callback said anything: nothing tells
        whether the script uses the callback, so no warning is due."""
        run = self.run_
        return not self.starts and run._stopping.is_set() and run._forward is None

    def first_failure(self) -> tuple[int, int] | None:
        """``(worker, status)`` of the first worker to exit with an error (or be
        killed), in the order they exited: the one whose failure ended the run (the
        other workers of a local cluster are stopped after it, by gpuscale). The error
        line names it and ``gpuscale run`` exits with its status. ``None``: none failed."""
        return next(((w, c) for w, c in self.exited.items() if c != 0), None)

    def callback_loaded(self) -> bool:
        """Whether the script loaded gpuscale's callback: ``import gpuscale.keras`` said
        so (:data:`CALLBACK_SOURCE`), or a start came from it."""
        return self.announced_at is not None or bool(self.starts)

    def trained_without_callback(self) -> bool:
        """Whether the script evidently trained without gpuscale's callback: no word
        from ``gpuscale.keras``, and Keras's output shows an epoch beginning, or it ran
        ``trained_after_s`` (past its imports, where the callback's belongs)."""
        if self.callback_loaded():
            return False
        ran = (self.exit_seen_at or time.monotonic()) - self.t0
        return self.keras_epoch or ran >= self.run_.trained_after_s

    def before_step(self) -> str:
        """When a script failed that sent no step, in what gpuscale knows:
        :data:`BEFORE_FIRST_STEP` where its callback was loaded, else
        :data:`BEFORE_CALLBACK_STEP` (it may have trained, uncounted)."""
        return BEFORE_FIRST_STEP if self.callback_loaded() else BEFORE_CALLBACK_STEP

    def failed_before_start(self) -> tuple[int, int] | None:
        """``(worker, status)`` of the first worker that exited with an error (or was
        killed, :meth:`first_failure`) before the script's callback started, where
        the script did not evidently train (:meth:`trained_without_callback`): it
        failed early (a file not found, an import error), which says nothing of
        whether it uses the callback, so the missing-callback advice is not given;
        ``None`` otherwise (a script that trained without the callback gets it)."""
        run = self.run_
        if self.starts or run._stopping.is_set() or run._forward is not None:
            return None
        failed = self.first_failure()
        if failed is None or self.trained_without_callback():
            return None
        return failed

    def failed_start(self) -> StartEvent:
        """The start of a run whose script failed before its callback started
        (:meth:`failed_before_start`): what gpuscale knows, the devices the script
        was asked to use among it (as :meth:`provisional_start` says them: its
        recording is named and listed for them, and a sweep's count found by
        them), its note saying so (:meth:`before_step`), and whether it uses the
        callback not said (``callback: None``: it never got that far), so no view
        calls it a script without the callback."""
        failed = self.failed_before_start()
        assert failed is not None
        start = self.provisional_start()
        return msgspec.structs.replace(
            start,
            provisional=False,
            config={**start.config, "callback": None},
            note=f"the script {describe_exit(failed[1])} {self.before_step()}",
        )

    def asked_replicas(self, default: int) -> int:
        """The replicas ``--devices N`` asked for (one local script), else ``default``."""
        run = self.run_
        asked = run._env.get(ENV_DEVICES, "")
        if run.num_workers == 1 and asked.isdigit() and int(asked) > 0:
            return int(asked)
        return default

    def stopped_start(self) -> StartEvent:
        """The start of a run stopped before its own: what was asked (``--devices N``,
        the script's name), provisional, from the launch (so its duration is the run's)."""
        return self.provisional_start(STOPPED_NOTE)  # made-up starts are stamped at the launch

    def provisional_start(self, note: str | None = None) -> StartEvent:
        """A made-up start (``provisional=True``) from what gpuscale knows: the command,
        the devices it sees, and the replicas ``--devices N`` set up for the script
        (without GPUs, N CPU logical devices, which ``gpuscale.keras`` makes);
        ``note``, else :meth:`synthetic_start`'s."""
        start = self.synthetic_start(hint=False)
        replicas = self.asked_replicas(start.num_replicas)
        logical = start.platform == "cpu" and replicas > 1
        # what --devices asked, else None: "(the default)", not "(as asked)", is said
        asked = replicas if self.asked_replicas(0) else None
        return msgspec.structs.replace(
            start,
            config={**(start.config or {}), "devices": asked},
            num_replicas=replicas,
            platform="cpu-logical" if logical else start.platform,
            provisional=True,
            note=start.note if note is None else note,
        )

    def callbackless_start(self) -> StartEvent:
        """The made-up start recorded as the run's own where no start came from the
        callback: :meth:`synthetic_start`, or, where the script imported
        ``gpuscale.keras`` (which set up the devices ``--devices N`` asked for), those
        devices (as :meth:`provisional_start` says them) and :data:`LOADED_NO_STEP_HINT`,
        and whether the script uses the callback not said (``callback: None``: loaded,
        it may be in a ``fit`` that trained nothing), so no view calls it a script
        without the callback."""
        if not self.callback_loaded() or self.run_._forward is not None:
            return self.synthetic_start()
        start = self.provisional_start(LOADED_NO_STEP_HINT)
        config = {**(start.config or {}), "callback": None}
        return msgspec.structs.replace(start, provisional=False, config=config)

    def synthetic_start(self, hint: bool = True) -> StartEvent:
        run = self.run_
        sampler = run._sampler
        devices: list[DeviceInfo] = list(getattr(sampler, "devices", []) or [])
        return StartEvent(
            # the run began when the script was launched: without the callback nothing
            # later marks a start, and durations and the summary count from here
            t=self.launched_at,
            gpuscale_version=__version__,
            host=socket.gethostname(),
            pid=os.getpid(),
            source="script",
            # a worker forwarding to its chief cannot tell whether its script uses the
            # callback (the script's events go to the chief): not said, but where they go
            config={"argv": run.argv, "callback": None, "events_to": run._forward.address}
            if run._forward is not None
            else {"argv": run.argv, "callback": False},
            devices=devices,
            platform="gpu" if devices else "cpu",
            model=run.name,
            strategy="unknown",
            num_replicas=max(1, len(devices)),
            num_workers=run.num_workers,
            pids=[p.pid for p in run._procs.values()],
            note=(
                f"this is worker {run.worker}: its events go to the chief at "
                f"{run._forward.address}, whose gpuscale shows and records the whole run"
                if run._forward is not None
                else (ADD_CALLBACK_HINT if hint else PROVISIONAL_NOTE)
            ),
        )

    # events from the outside -----------------------------------------------------------
    def handle(self, item: Any) -> None:
        run = self.run_
        if isinstance(item, _ChiefLost):
            if len(self.exited) < len(run._procs) and not run._stopping.is_set():
                self.chief_lost = True
                self.chief_lost_at = time.monotonic()
                self.publish(
                    LogEvent(
                        t=time.time(),
                        source="gpuscale",
                        level="warning",
                        message=(
                            f"the chief at {run.forwarding_to} is gone (its run ended, or its "
                            "machine went away): this worker's events are no longer "
                            f"recorded; its script is stopped in {run.chief_gone_grace_s:g} s "
                            "unless it ends (with no chief, its next all-reduce would wait "
                            "for ever)"
                        ),
                    )
                )
            return
        if isinstance(item, _Exited):
            # a worker that failed before this one: gpuscale is stopping the rest (a
            # SIGTERM of its own, not a loss), and the run failed with the first
            stopped_by_us = self.first_failure() is not None
            if item.returncode != 0 and not stopped_by_us:
                # workers that had ended stopped (Ctrl-C on their machine): the cause
                self.stopped_before_failure = sorted(self.stopped_workers - {item.worker})
            self.exited[item.worker] = item.returncode
            if self.exit_seen_at is None:
                self.exit_seen_at = time.monotonic()
            code = item.returncode
            if (
                code != 0
                and run.num_workers > 1
                and not run._stopping.is_set()
                and not self.lost
                and not self.chief_lost
                and not stopped_by_us
            ):
                if code < 0 and item.worker not in self.lost:
                    self.report_lost(item.worker, describe_exit(code))
                else:  # the others would wait forever in the next all-reduce
                    self.stop_others()
            return
        if isinstance(item, _Disconnect):
            if item.saw_end:
                self.suspects.pop(item.worker, None)
            elif run._server is not None and run._server.connected(item.worker):
                return  # the old connection of a worker that has reconnected
            self.disconnected.add(item.worker)
            # A local process is judged by its exit status; a remote worker that
            # closes its connection without an end event is lost unless it
            # reconnects within the client's back-off (a network hiccup).
            if (
                not item.saw_end
                and item.worker not in run._procs
                and not self.lost  # after the first loss the others are being stopped
                and not run._stopping.is_set()
            ):
                self.suspects[item.worker] = time.monotonic() + run.lost_grace_s
            return
        if isinstance(item, _Line):
            with run._backlog_lock:
                run._backlog_lines -= 1
                run._backlog_bytes -= item.size
            item = item.event
        event: Event = item
        if event.worker not in self.connected and self.awaited():
            # a worker of a multi-host run joined: it needs the time the chief had to
            # send its start (TensorFlow starts none before every worker has joined)
            self.deadline = max(self.deadline, time.monotonic() + run.start_timeout_s)
        self.connected.add(event.worker)
        if isinstance(event, StartEvent):
            self.check_devices(event)
            if self.provisional and event.worker == run.worker:
                self.starts[event.worker] = event
                self.commit(event)
                return
            if self.hinted and not self.starts and event.worker == run.worker:
                self.starts[event.worker] = event
                self.withdraw_hint(event)
                return
            if event.worker in self.starts or self.started:
                self.publish(
                    LogEvent(
                        t=event.t,
                        worker=event.worker,
                        source="gpuscale",
                        message=(
                            f"worker {event.worker} on {event.host} (pid {event.pid}) started: "
                            f"{event.model}, {event.strategy}, {plural(event.num_replicas, 'replica')}"
                        ),
                    )
                )
                if event.worker not in self.starts:
                    self.starts[event.worker] = event
                return
            self.starts[event.worker] = event
            return
        if isinstance(event, EndEvent):
            self.ended_workers[event.worker] = event.steps
            if event.status == "stopped":
                self.stopped_workers.add(event.worker)
            self.publish(
                LogEvent(
                    t=event.t,
                    worker=event.worker,
                    source="gpuscale",
                    message=(
                        (f"worker {event.worker}: " if run.num_workers > 1 else "")
                        + f"training {event.status}"
                        + (f" after {plural(event.steps, 'step')}" if event.steps else "")
                    ),
                )
            )
            return
        if isinstance(event, LogEvent) and event.source == "script" and not self.later_epoch:
            if not self.keras_epoch and KERAS_EPOCH.search(event.message):
                self.keras_epoch = True
            if KERAS_LATER_EPOCH.search(event.message):
                self.later_epoch = True
        if isinstance(event, LogEvent) and event.source == "trainer":
            if (asked := stop_asked_signal(event.message)) is not None:
                self.asked_to_stop.setdefault(event.worker, asked)
        if isinstance(event, LogEvent) and event.source == CALLBACK_SOURCE:
            if self.announced_at is None:
                self.announced_at = time.monotonic()
            self.deadline = max(self.deadline, time.monotonic() + run.callback_timeout_s)
        self.publish(event)

    def check_suspects(self) -> None:
        """A remote worker whose connection closed without an end is lost once its
        grace period is over with no connection from it open."""
        run = self.run_
        now = time.monotonic()
        for worker, deadline in list(self.suspects.items()):
            if worker in self.ended_workers or run._stopping.is_set() or self.lost:
                del self.suspects[worker]
            elif run._server is not None and run._server.connected(worker):
                del self.suspects[worker]  # it reconnected
                self.disconnected.discard(worker)
            elif now >= deadline:
                del self.suspects[worker]
                self.report_lost(worker, "disconnected without finishing")

    def report_lost(self, worker: int, how: str) -> None:
        run = self.run_
        self.lost.append(worker)
        run.lost_workers.append(worker)
        start = self.starts.get(worker)
        where = f" on {start.host} (pid {start.pid})" if start else ""
        steps = self.steps.get(worker, 0)
        message = (
            f"worker {worker}{where} was lost: it {how} after {plural(steps, 'step')}. "
            "MultiWorkerMirroredStrategy is synchronous, so the run cannot go on; "
            "everything received until now is kept"
            + (f" in {run.recording_path}" if run.recording_path else "")
        )
        if not self.started:
            self.send_start(self.merged_start())
        self.publish(ErrorEvent(t=time.time(), worker=worker, message=message, source="gpuscale"))
        self.stop_others()

    def stop_others(self) -> None:
        """The other workers would wait forever in the next all-reduce: stop ours."""
        run = self.run_
        if run.local_workers >= 1 or run.cluster_info is not None:
            threading.Thread(target=run._terminate, args=(3.0,), daemon=True).start()

    # the loop --------------------------------------------------------------------------
    def awaited(self) -> list[int]:
        """The workers the chief of a multi-host run has had no word from yet (none
        connected, or refused: another may start in its place). TensorFlow starts
        training only when every worker has joined, and a cluster started by hand may
        take minutes: no start is made up for the run while they are awaited."""
        run = self.run_
        if run.cluster_info is None or run.local_workers or run._forward is not None:
            return []
        return [w for w in range(run.num_workers) if w != run.worker and w not in self.connected]

    def start_due(self) -> bool:
        run = self.run_
        return (
            len(self.starts) >= run.num_workers
            or len(self.exited) >= len(run._procs)
            or bool(self.lost)
            # awaited workers hold a made-up start back, not the chief's own script's:
            # under MultiWorkerMirroredStrategy it starts only once every worker joined
            # (workers may run without gpuscale, and never connect)
            or (time.monotonic() >= self.deadline and (not self.awaited() or bool(self.starts)))
        )

    def finished(self) -> bool:
        run = self.run_
        if len(self.exited) < len(run._procs) or self.suspects:
            return False
        # all local processes are gone: wait briefly for their connections to drain
        waiting = self.connected - self.disconnected - {run.worker}
        waited = time.monotonic() - (self.exit_seen_at or time.monotonic())
        if run._server is not None and run.cluster_info is not None and not self.lost:
            # the chief of a multi-host run also waits for the remote workers
            refused = set(run._server.refused_workers) - self.connected  # none of theirs came
            remote = set(range(run.num_workers)) - {0} - refused
            if remote - self.disconnected and waited < REMOTE_END_WAIT_S:
                return False
        return not waiting or waited > 2.0

    def run(self) -> None:
        run = self.run_
        while True:
            try:
                item = run._incoming.get(timeout=0.1)
            except queue.Empty:
                item = None
            if item is not None:
                self.handle(item)
            self.check_suspects()
            if (
                self.chief_lost_at is not None
                and not self.stopped_for_chief
                and len(self.exited) < len(run._procs)
                and time.monotonic() - self.chief_lost_at >= run.chief_gone_grace_s
            ):
                self.stopped_for_chief = True
                self.stop_others()  # its next all-reduce would wait for ever, or fail
            if time.monotonic() - run._tracked_at >= 0.5:
                run._tracked_at = time.monotonic()
                run._track_descendants()
            if not self.started and self.start_due():
                if self.may_wait_for_callback():
                    self.send_provisional()
                elif self.stopped_before_start():
                    self.send_start(self.stopped_start())
                elif self.failed_before_start() is not None:
                    self.send_start(self.failed_start())  # an error, not a missing callback
                else:
                    self.send_start(self.merged_start())
                    if not self.starts and run._forward is None:
                        self.hint()
            if (
                self.provisional
                and not self.hinted
                and not run._stopping.is_set()
                and self.hint_due()
            ):
                self.hint()
            self.say_who_is_awaited()
            if (run._stopping.is_set() and len(self.exited) >= len(run._procs)) or (
                self.started and self.finished()
            ):
                break
        # drain what is still queued
        while True:
            try:
                item = run._incoming.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                self.handle(item)
        if not self.started:
            if self.stopped_before_start():
                self.send_start(self.stopped_start())
            elif self.failed_before_start() is not None:
                self.send_start(self.failed_start())
            else:
                self.send_start(self.merged_start())
        elif self.provisional and run._stopping.is_set():  # stopped before any step
            self.commit(self.stopped_start())
        elif self.provisional and self.failed_before_start() is not None:
            self.commit(self.failed_start())  # it failed: no word of the callback
        elif self.provisional:  # the script ended without the callback's start
            self.hint()
        self.finish()

    def finish(self) -> None:
        run = self.run_
        failed = self.first_failure()
        if run._stopping.is_set():
            status = "stopped"
        elif self.lost:
            status = "lost"
        elif self.chief_lost and (self.stopped_for_chief or failed is not None):
            status = "lost"
            failed = None  # stopped by gpuscale, or failing for want of the chief
            self.publish(
                ErrorEvent(
                    t=time.time(),
                    worker=run.worker,
                    message=(
                        f"the chief at {run.forwarding_to} is gone (its gpuscale ended, or "
                        "its machine went away): MultiWorkerMirroredStrategy is synchronous, "
                        + (
                            f"so this worker's script was stopped {run.chief_gone_grace_s:g} s "
                            "later"
                            if self.stopped_for_chief
                            else "and this worker's script failed without it"
                        )
                        + "; the chief's recording keeps what it received"
                    ),
                    source="gpuscale",
                )
            )
        elif failed is not None:
            status = "failed"
            worker, code = failed
            lines = run._stderr_tail.get(worker, ())
            tail = "\n".join(lines)
            how = describe_exit(code)
            if self.stopped_before_failure:  # the likely cause, before the script's words
                names = " and ".join(f"worker {w}" for w in self.stopped_before_failure)
                how += (
                    f" after {names} ended stopped (MultiWorkerMirroredStrategy is "
                    "synchronous: no worker trains on without the others)"
                )
            # a worker forwarding to the chief sees none of its script's steps (the
            # script sends them to the chief itself): it cannot say whether any came
            forwarded = run._forward is not None
            if forwarded or not any(self.steps.values()):  # what it printed last is likely why
                if not forwarded:
                    how += f" {self.before_step()}"
                last = next((line.strip() for line in reversed(lines) if line.strip()), "")
                if last:
                    how += f": {last}"
            who = f"worker {worker} " if run.num_workers > 1 else ""
            self.publish(
                ErrorEvent(
                    t=time.time(),
                    worker=worker,
                    message=f"the script {who}({shlex.join(run.argv)}) {how}",
                    traceback=tail or None,
                    source="script",
                )
            )
        elif self.stopped_workers:  # a worker stopped alone (kill), the others with it
            status = "stopped"  # or the script's own early stop: what it said is recorded
            run.stopped_by_script = not self.signalled()
        else:
            status = "completed"
        if run.cluster_info is not None and run._forward is None:
            self.name_missing_workers()
        run.returncode = failed[1] if failed is not None else 0  # the worker the error names
        steps = max(self.steps.values(), default=0)
        if status == "stopped" and not run._stopping.is_set() and not run.stopped_by_script:
            self.publish(self.stopped_alone(steps))
        run.status = status
        now = time.time()
        starts = [e for e in self.analysis_events if isinstance(e, StartEvent)]
        latest = max((e.t for e in self.analysis_events), default=now)
        end = EndEvent(
            t=now,
            status=status,
            steps=steps,
            # the one duration every view shows (run_duration_s), not the process's
            duration_s=run_duration_s(starts[-1].t, max(latest, now))
            if starts
            else time.perf_counter() - run._t0,
        )
        try:
            from gpuscale.analysis.summary import summarize, summary_document

            summary = summary_document(summarize([*self.analysis_events, end]))
            end = msgspec.structs.replace(end, summary=summary)
        except Exception:  # the summary is a convenience; the events are recorded
            pass
        self.publish(end)

    def signalled(self) -> bool:
        """Whether the workers whose end said ``stopped`` were stopped by a signal, not
        by the script's own choice (a custom loop's ``close("stopped")``): one of them
        said it was asked to stop (:func:`~gpuscale.trainer.vote.stop_asked_message`),
        or they are the built-in trainer, whose workers end ``stopped`` only when one
        of them was (a stop rides the step's all-reduce to every worker)."""
        if builtin_trainer_model(self.run_.argv) is not None:
            return True
        return any(w in self.asked_to_stop for w in self.stopped_workers)

    def stopped_alone(self, steps: int) -> LogEvent:
        """Why a run that gpuscale did not stop ends ``stopped``: the worker asked to
        stop (and by which signal) where it said so, else the workers whose end said
        ``stopped``."""
        if self.asked_to_stop:
            who = " and ".join(
                f"worker {w} was asked to stop ({name})"
                for w, name in sorted(self.asked_to_stop.items())
            )
        else:
            names = " and ".join(f"worker {w}" for w in sorted(self.stopped_workers))
            who = f"{names} ended stopped"
        return LogEvent(
            t=time.time(),
            source="gpuscale",
            level="warning",
            message=f"the run stopped after {plural(steps, 'step')}, not through gpuscale: {who}",
        )

    def say_who_is_awaited(self) -> None:
        """The chief of a multi-host run, while no worker has started training: which
        workers have not connected, :data:`AWAITED_FIRST_S` after the launch and then
        every :data:`AWAITED_EVERY_S` (TensorFlow waits for all of them, silently)."""
        run = self.run_
        info = run.cluster_info
        if (
            info is None
            or run.local_workers  # gpuscale started them all here (--local-workers)
            or run._forward is not None
            or self.starts
            or run._stopping.is_set()
        ):
            return
        waited = time.monotonic() - self.t0
        due = AWAITED_FIRST_S if self.awaited_said == 0 else self.awaited_said + AWAITED_EVERY_S
        if waited < due:
            return
        self.awaited_said = waited
        missing = self.awaited()
        if not missing:
            return
        refused = run._server.refused_workers if run._server is not None else {}
        names = ", ".join(
            f"worker {w} ({info.workers[w]}"
            + (f"; refused: {refused[w]})" if w in refused else ")")
            for w in missing
            if w < len(info.workers)
        )
        event = LogEvent(
            t=time.time(),
            source="gpuscale",
            level="warning",
            message=(
                f"waiting {waited:.0f} s for {names} of {info.source}: training starts only when "
                f"every worker has joined; start gpuscale there with the same {ENV_TOKEN} and cluster"
            ),
        )
        run._record(event)
        if self.started:
            self.publish(event, record=False)
        else:  # said now, before any start (the run may wait for ever), after a start:
            if not self.shown_provisional:  # consumers' streams begin with one
                self.show_provisional()
            run._publish(event)

    def name_missing_workers(self) -> None:
        """The chief of a multi-host run says which workers sent nothing, and why
        where it knows (a hello refused for its token)."""
        run = self.run_
        refused = run._server.refused_workers if run._server is not None else {}
        for worker in range(run.num_workers):
            if worker == run.worker or worker in self.connected:
                continue
            why = (
                f"its hello was refused: {refused[worker]}"
                if worker in refused
                else "it never connected"
            )
            self.publish(
                LogEvent(
                    t=time.time(),
                    worker=worker,
                    source="gpuscale",
                    level="error",
                    message=f"worker {worker} is missing from this run: {why}",
                )
            )

    def fail_internal(self, exc: Exception) -> None:
        run = self.run_
        if not self.started:
            self.send_start(self.synthetic_start())
        elif self.provisional:
            self.commit(self.synthetic_start())
        run.status = "failed"
        self.publish(
            ErrorEvent(
                t=time.time(),
                message=f"gpuscale lost track of the script: {type(exc).__name__}: {exc}",
                source="gpuscale",
            )
        )
        self.publish(EndEvent(t=time.time(), status="failed"))


def split_command(argv: Sequence[str] | None) -> list[str]:
    """The command after ``--`` (argparse.REMAINDER keeps the ``--``); a ``--``
    with nothing after it is an error (not the built-in trainer)."""
    command = list(argv or [])
    if command and command[0] == "--":
        command = command[1:]
        if not command:
            raise GpuscaleError(
                "nothing after '--': give your training command (gpuscale run -- python "
                "train.py), or leave out '--' for the built-in trainer"
            )
    return command


# -- the command line: `gpuscale run|watch [--local-workers N] -- COMMAND` ----------------

TRAINER_START_TIMEOUT_S = 600.0
"""The built-in trainer always sends its start; give it time to import TensorFlow and
build the model on a busy machine before a start is made up for it."""


def add_script_arguments(parser: Any) -> None:
    """The flags ``run`` and ``watch`` share for scripts and multi-worker runs."""
    group = parser.add_argument_group("your own script, several workers")
    group.add_argument(
        "--local-workers",
        type=int,
        metavar="N",
        help="start N workers on this machine as one multi-worker cluster (each with its own "
        "TF_CONFIG on loopback ports): the built-in trainer (N >= 2 implies --strategy "
        "multi-worker; 1 needs it said), or your script after --",
    )
    parser.add_argument(
        "command",
        nargs="...",
        metavar="-- COMMAND",
        help="run your own training script instead of the built-in trainer, e.g. "
        "'-- python train.py --epochs 3'; add gpuscale.keras.ScalingMonitor() to its "
        "model.fit callbacks for step times; --devices N gives it N devices (GPUSCALE_DEVICES, "
        "read by import gpuscale.keras; without --devices the script picks its own)",
    )


def wants_script_run(args: Any) -> bool:
    """Whether ``args`` ask for a :class:`ScriptRun` rather than the single-process trainer."""
    from gpuscale.trainer.options import strategy_of

    return bool(split_command(getattr(args, "command", None))) or (
        strategy_of(args) == "multi-worker" or getattr(args, "local_workers", None) is not None
    )


def script_run_from_args(args: Any, record: Any, **kwargs: Any) -> ScriptRun:
    """The :class:`ScriptRun` that ``gpuscale run|watch`` ``args`` ask for.

    * ``-- COMMAND``: the user's script (one process), or ``--local-workers N`` copies.
    * ``--strategy multi-worker`` without a command: the built-in trainer as the
      worker program (``python -m gpuscale.trainer``), with ``--local-workers N`` on
      this machine, else as this machine's worker of the cluster in TF_CONFIG/Slurm.
      ``--local-workers N`` (N >= 2) without ``--strategy`` implies it
      (:func:`gpuscale.trainer.options.strategy_of`); another ``--strategy`` is refused.
    * ``--strategy multi-worker -- COMMAND``: this machine's worker of that cluster
      running the user's script.
    """
    from gpuscale.trainer.options import strategy_of

    command = split_command(getattr(args, "command", None))
    local_workers = getattr(args, "local_workers", None)
    multi_worker = strategy_of(args) == "multi-worker"
    if local_workers is not None and not 1 <= local_workers <= 16:
        raise GpuscaleError("--local-workers must be between 1 and 16")
    if command:
        argv = command
        kwargs.setdefault("start_timeout_s", 15.0)
        requested = getattr(args, "devices", None), getattr(args, "gpus", None)
        if requested != (None, None):  # --devices N / --gpus: the script's devices
            if local_workers is not None or multi_worker:
                raise GpuscaleError(
                    "--devices/--gpus set one process's devices; each worker of a cluster "
                    "uses its own (CUDA_VISIBLE_DEVICES on each machine)"
                )
            base = kwargs.get("env") or os.environ
            kwargs["env"] = {**base, **device_env(*requested, base)}
    else:
        if not multi_worker:
            given = getattr(args, "strategy", None)
            if given is not None:
                raise GpuscaleError(
                    f"--local-workers {local_workers} starts a multi-worker cluster, not "
                    f"--strategy {given}: leave --strategy out (--local-workers implies "
                    "multi-worker), or give your script after --"
                )
            raise GpuscaleError(
                f"--local-workers {local_workers} is a cluster of one worker: say "
                "--strategy multi-worker for it, or start 2 or more workers (which implies "
                "it), or give your script after --"
            )
        from gpuscale.trainer.options import config_from_args, to_json

        config = config_from_args(args)
        _check_builtin_workers(config, kwargs.get("env") or os.environ)
        argv = [sys.executable, "-m", "gpuscale.trainer", "--config", to_json(config)]
        kwargs.setdefault("start_timeout_s", TRAINER_START_TIMEOUT_S)
    info = None
    if local_workers is None and multi_worker:
        info = cluster.require()
    return ScriptRun(
        argv,
        record=record,
        local_workers=local_workers or 0,
        cluster_info=info,
        **kwargs,
    )


def _check_builtin_workers(config: Any, env: Mapping[str, str]) -> None:
    """The built-in trainer's own checks of a multi-worker configuration, made here
    before any worker starts (each worker would find them only after loading
    TensorFlow, and the run would be recorded as lost): the preflight of a
    single-process run, and :func:`gpuscale.trainer.preflight.check_multi_worker_devices`
    with the GPUs the workers will see (NVML's, or none where ``CUDA_VISIBLE_DEVICES``
    is empty; not told where it narrows them)."""
    from gpuscale.trainer import preflight

    preflight.check_config(config)
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and not visible.strip():
        gpus: int | None = 0
    elif visible is not None or config.gpus is not None:
        gpus = None  # narrowed: the trainer counts what TensorFlow sees
    else:
        found = preflight.gpu_indices()
        gpus = None if found is None else len(found)
    preflight.check_multi_worker_devices(config.devices, gpus)
