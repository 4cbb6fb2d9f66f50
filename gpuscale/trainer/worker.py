"""The trainer process: ``python -m gpuscale.trainer --config JSON``.

Reads a :class:`TrainConfig` (``--config`` on the command line, or the
``GPUSCALE_TRAIN_CONFIG`` environment variable), reports to the parent through
:class:`EventClient` (``GPUSCALE_EVENTS``/``GPUSCALE_TOKEN``), and sends: a
StartEvent once the model is built, a StepEvent per step, a PhaseEvent per
probe, LogEvents for Python and TensorFlow warnings, an ErrorEvent with the
traceback on any failure, and an EndEvent last. Without an event server in the
environment it prints the events as JSON lines on stdout.

SIGTERM or SIGINT finishes the current step and ends with status ``stopped``
(several workers: every worker stops after the same step, the first that
carried a worker's stop; :meth:`gpuscale.trainer.loop.Trainer.run`).
Exit status: 0 completed or stopped, 1 failed, 2 bad configuration.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable

import msgspec

from gpuscale import __version__
from gpuscale.errors import GpuscaleError
from gpuscale.events.schema import (
    EndEvent,
    ErrorEvent,
    Event,
    LogEvent,
    StartEvent,
    StepEvent,
    encode,
)
from gpuscale.events.transport import EventClient
from gpuscale.trainer.options import (
    TrainConfig,
    count_over_line,
    device_positions,
    from_json,
    sweep_from_json,
    widest,
)
from gpuscale.trainer.plan import DevicePlan
from gpuscale.trainer.vote import stop_asked_message

ENV_CONFIG = "GPUSCALE_TRAIN_CONFIG"


class _Emitter:
    """Sends events to the parent, or prints them when there is none."""

    def __init__(self, client: EventClient | None):
        self.client = client
        self.worker = client.worker if client else 0
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        if self.worker:
            event.worker = self.worker
        if self.client is not None:
            self.client.send(event)
        else:
            with self._lock:
                sys.stdout.write(encode(event).decode() + "\n")
                sys.stdout.flush()

    def log(self, message: str, level: str = "info") -> None:
        self(LogEvent(t=time.time(), message=message, source="trainer", level=level))

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


class _ForwardHandler(logging.Handler):
    """Python logging records (TensorFlow's, Keras', absl's) as LogEvents."""

    def __init__(self, emit: _Emitter):
        super().__init__(level=logging.WARNING)
        self._emit = emit

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level = "error" if record.levelno >= logging.ERROR else "warning"
            self._emit.log(f"{record.name}: {record.getMessage()}", level)
        except Exception:  # never let logging break training
            pass


def _prepare_environment(config: TrainConfig) -> None:
    """Before TensorFlow is imported: quieter C++ logs, NVML's GPU numbering,
    and the GPU selection (``--gpus``) through CUDA_VISIBLE_DEVICES."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # warnings and errors still reach stderr
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    if config.gpus is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, config.gpus))


def _describe_failure(exc: BaseException) -> str:
    """One paragraph a user can act on."""
    name = type(exc).__name__
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    if name == "ResourceExhaustedError" or "out of memory" in str(exc).lower():
        return (
            f"the trainer ran out of device memory ({first[:300]}); "
            "try a smaller --batch-per-replica / --global-batch or a smaller model"
        )
    where = ""
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    user_frames = [  # the user's own code: not gpuscale, not an installed library
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith((package_dir, "<"))
        and "site-packages" not in f.filename
        and "dist-packages" not in f.filename
        and "/lib/python3" not in f.filename
    ]
    if user_frames:
        frame = user_frames[-1]
        where = f" (at {frame.filename}:{frame.lineno} in {frame.name})"
    message = f"{name}: {first[:500]}" if first else name
    return f"the trainer failed: {message}{where}"


class _StoppedEarly(BaseException):
    """SIGTERM/SIGINT before training began: nothing to finish, end at once."""


def _watch_parent(emit: _Emitter, stop: threading.Event) -> None:
    """The parent holds our stdin open; EOF means it is gone (even ``kill -9``).
    Stop after the current step, and leave for good if that takes too long, so
    a trainer never outlives the command that started it."""
    try:
        while sys.stdin.read(4096):
            pass
    except (OSError, ValueError):
        pass
    if stop.is_set():
        return
    stop.set()
    emit.log("the gpuscale parent process is gone: stopping", "warning")
    time.sleep(10.0)
    os._exit(1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpuscale.trainer")
    parser.add_argument(
        "--config", help="the TrainConfig as JSON (default: $GPUSCALE_TRAIN_CONFIG)"
    )
    parser.add_argument(
        "--sweep",
        metavar="JSON",
        help="a JSON list of TrainConfigs that differ only in their devices: run each in "
        "turn in this one process, each a run of its own (start ... end)",
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        client = EventClient.from_env()
    except (ConnectionError, ValueError) as exc:
        print(f"gpuscale trainer: {exc}", file=sys.stderr)
        return 1
    emit = _Emitter(client)
    stop = threading.Event()
    training = threading.Event()

    def on_signal(signum, frame):
        first = not stop.is_set()
        stop.set()
        if not training.is_set():  # still loading TensorFlow or building: leave now
            raise _StoppedEarly
        if first:
            emit.log(stop_asked_message(signal.Signals(signum).name))

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if os.environ.get("GPUSCALE_PARENT_PIPE") == "1":
        threading.Thread(target=_watch_parent, args=(emit, stop), daemon=True).start()

    configs: list[TrainConfig] = []

    def prepare() -> tuple[int, str]:
        configs.extend(_read_configs(args))
        _prepare_environment(widest(configs))
        logging.getLogger("tensorflow").addHandler(_ForwardHandler(emit))
        logging.getLogger("absl").addHandler(_ForwardHandler(emit))

        def show_warning(message, category, filename, lineno, file=None, line=None):
            emit.log(
                f"{category.__name__}: {message} ({os.path.basename(filename)}:{lineno})", "warning"
            )

        warnings.showwarning = show_warning
        return 0, "completed"

    steps, status, code = _guarded(emit, prepare)
    if code or status != "completed":
        _end(emit, status, steps, started)
        emit.close()
        return code
    training.set()  # until _train clears it: a signal now only asks to stop
    devices = _Devices(configs) if args.sweep else None
    for index, config in enumerate(configs):
        began = started if index == 0 else time.perf_counter()
        if devices is not None:
            devices.run = index + 1
        steps, status, code = _guarded(
            emit, lambda config=config: _train(config, emit, stop, training, devices)
        )
        _end(emit, status, steps, began)
        last = bool(code or status != "completed" or stop.is_set())
        if devices is not None:
            if not last:
                # This count's objects go before its closing line: what TensorFlow's
                # C++ runtime prints to stderr as they go (an iterator's end, a
                # collective's rendezvous) is then this count's output, not the next's.
                devices.release()
            # this count's output ends here, on both streams
            print(count_over_line(index), flush=True)
            print(count_over_line(index), file=sys.stderr, flush=True)
        if last:
            break  # the counts not run are not reported: the parent knows which ran
    emit.close()
    return code


def _read_configs(args: argparse.Namespace) -> list[TrainConfig]:
    if args.sweep:
        return sweep_from_json(args.sweep)
    text = args.config or os.environ.get(ENV_CONFIG)
    if not text:
        raise GpuscaleError(
            "no trainer configuration (give --config JSON or set GPUSCALE_TRAIN_CONFIG)"
        )
    return [from_json(text)]


def _guarded(emit: _Emitter, body: Callable[[], tuple[int, str]]) -> tuple[int, str, int]:
    """Run ``body`` (returning steps and status); a failure becomes an ErrorEvent.
    Returns ``(steps, status, exit_code)``."""
    try:
        steps, status = body()
        return steps, status, 0
    except _StoppedEarly:
        return 0, "stopped", 0
    except GpuscaleError as exc:
        emit(ErrorEvent(t=time.time(), message=str(exc)))
        return 0, "failed", exc.exit_code if exc.exit_code != 0 else 1
    except BaseException as exc:  # the user's code, TensorFlow, out of memory: report, never hang
        emit(
            ErrorEvent(
                t=time.time(), message=_describe_failure(exc), traceback=traceback.format_exc()
            )
        )
        return 0, "failed", 1


def _end(emit: _Emitter, status: str, steps: int, began: float) -> None:
    emit(
        EndEvent(t=time.time(), status=status, steps=steps, duration_s=time.perf_counter() - began)
    )


class _Devices:
    """The devices of a sweep's process (``--sweep``), set up once for the widest
    run; each run gets its subset (:meth:`plan_for`), and between runs
    :meth:`release` drops what the last one built."""

    def __init__(self, configs: list[TrainConfig]):
        self.configs = configs
        self.wide = widest(configs)
        self.run = 1
        """Which run of the process is in progress (1 for the first)."""
        self._plan: DevicePlan | None = None

    def plan_for(self, config: TrainConfig) -> DevicePlan:
        from gpuscale.trainer import loop

        if self._plan is None:
            self._plan = loop.setup_devices(self.wide)
        return self._plan.subset(device_positions(self.wide, config))

    def shared(self) -> dict[str, object]:
        """What the StartEvent's ``config.resolved`` says about the shared process:
        every run's device count, and which run this is (1 for the first)."""
        counts = [c.num_devices for c in self.configs]
        return {"shared_process": {"counts": counts, "run": self.run}}

    def release(self) -> None:
        """Forget the last run's model, optimizer and compiled functions (Keras'
        global state included), so the next run starts as in a fresh process."""
        import gc

        import keras

        keras.backend.clear_session(free_memory=False)
        gc.collect()


def _reclaim_stop_signals() -> None:
    """Install this process's SIGTERM and SIGINT handlers again. A multi-worker
    strategy's coordination service installs TensorFlow's own SIGTERM handler
    (``tsl::SigtermNotifier``, for preemption notices: it only notes the time and
    logs "SIGTERM caught at"), which replaces Python's at the C level: a worker
    then trained on after gpuscale's SIGTERM until it was killed. Python still
    names its own handler, and setting it again installs it again."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        handler = signal.getsignal(signum)
        if callable(handler):
            signal.signal(signum, handler)


def _num_workers(config: TrainConfig) -> int:
    if config.strategy != "multi-worker":
        return 1
    from gpuscale.trainer import multiworker

    return multiworker.num_workers()


def _train(
    config: TrainConfig,
    emit: _Emitter,
    stop: threading.Event,
    training: threading.Event,
    devices: _Devices | None = None,
) -> tuple[int, str]:
    """One run: set up (or take a subset of ``devices``), build, report the
    start, train. ``training`` is clear while building: a stop signal then ends
    the run at once."""
    training.clear()
    if stop.is_set():
        raise _StoppedEarly
    import keras
    import tensorflow as tf  # only here: the parent never imports TensorFlow

    from gpuscale.trainer import loop

    tf.get_logger().setLevel(logging.WARNING)
    plan = loop.setup_devices(config) if devices is None else devices.plan_for(config)
    _reclaim_stop_signals()
    if plan.warning:
        emit.log(plan.warning, "warning")
    trainer = loop.Trainer(config, plan)
    emit(
        StartEvent(
            t=time.time(),
            gpuscale_version=__version__,
            tensorflow_version=tf.__version__,
            host=socket.gethostname(),
            pid=os.getpid(),
            source="trainer",
            config={
                **msgspec.to_builtins(config),
                "resolved": {
                    "width": trainer.sizing.width,
                    "per_replica_batch": trainer.sizing.per_replica_batch,
                    "global_batch": trainer.global_batch,
                    "cross_device_ops": trainer.cross_device_ops,
                    "optimizer": type(trainer.optimizer).__name__,
                    "keras_version": keras.__version__,
                    "python_version": sys.version.split()[0],
                    **(devices.shared() if devices is not None else {}),
                },
            },
            devices=plan.infos,
            platform=plan.platform,
            cpu_cores=os.cpu_count() if plan.platform != "gpu" else None,
            model=config.model
            if trainer.sizing.width in (None, 128)
            else f"{config.model}-w{trainer.sizing.width}",
            strategy=config.strategy,
            cross_device_ops=trainer.cross_device_ops,
            num_replicas=trainer.num_replicas,
            num_workers=_num_workers(config),
            scaling=trainer.sizing.scaling,
            global_batch=trainer.global_batch,
            per_replica_batch=trainer.sizing.per_replica_batch,
            param_count=trainer.param_count,
            payload_bytes=trainer.payload_bytes,
            mixed_precision=config.mixed_precision,
            pids=[os.getpid()],
            note=trainer.note,
        )
    )
    steps = 0
    training.set()  # from here a signal finishes the current step instead
    if stop.is_set():
        return 0, "stopped"
    for event in trainer.run(stop):
        emit(event)
        if isinstance(event, StepEvent):
            steps += 1
    return steps, "stopped" if stop.is_set() and steps < config.steps else "completed"


if __name__ == "__main__":
    raise SystemExit(main())
