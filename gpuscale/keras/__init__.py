"""gpuscale for your own training script: a Keras callback and a custom-loop helper.

Add one line to ``model.fit``::

    from gpuscale.keras import ScalingMonitor
    model.fit(dataset, epochs=3, callbacks=[ScalingMonitor()])

and run the script as usual (it then writes a recording you can open with
``gpuscale replay``), or under gpuscale (``gpuscale run -- python train.py`` or
``gpuscale watch -- python train.py``), which finds the callback through the
environment and shows its steps live. A loop without ``fit``::

    monitor = ScalingMonitor(batch_size=64)
    for x, y in dataset:
        with monitor.step() as step:
            step.sync(train_step(x, y))   # waits for the step's outputs
    monitor.close()

What it measures
----------------
*Step time* (:class:`~gpuscale.events.schema.StepEvent`): wall-clock time
(``time.perf_counter``) from ``on_train_batch_begin`` to ``on_train_batch_end``.
Keras dispatches steps asynchronously unless a callback needs the batch logs;
because this callback implements ``on_train_batch_end``, Keras turns async
dispatch off and converts the logs (the loss and metrics, computed after the
optimizer update) to Python floats before calling it, which waits until the
step's device work is finished. So the time is synchronised, not the time to
enqueue. With ``steps_per_execution=N`` Keras calls the callback once per N
steps: one StepEvent then stands for the execution, with ``step`` the last step
index and ``step_time_s`` the execution's time divided by N (a mean, never a
per-step measurement). The first ``warmup_steps`` steps (tracing, allocation)
are marked ``warmup``.

*Phase breakdown* (:class:`~gpuscale.events.schema.PhaseEvent`, every ``every``
steps, only when the model is trained under a ``tf.distribute`` strategy): the
same differencing as the built-in trainer, on a batch the callback synthesises
(a callback cannot reach the real batch): random inputs of the shape and dtype
of the model's real per-replica input (captured when Keras traces the train
step, else taken from ``model.inputs``), with the per-replica batch of the last
step (samples / replicas), fed through ``model.stateless_call`` so the probe
changes no weight, no BatchNorm statistic and no optimizer state. An input with
another dimension of unknown size (variable-length sequences) has no honest
stand-in: the probe then says it cannot run, once, and step times go on.

* ``compute_s``: forward + backward on every replica, no gradient exchange.
* compute + all-reduce: the same plus the replica-context ``all_reduce`` of the
  gradients through the strategy's own cross-device ops (NCCL, collective, ...).
* ``allreduce_s`` = (compute + all-reduce) - compute, floored at 0: the exposed
  gradient exchange.
* ``step_time_s``: the median of the real training steps since the last probe.
* ``apply_s`` = step - (compute + all-reduce), floored at 0: the optimizer
  update plus Keras's own per-step work (metrics), not separable from outside.

The probe's loss is the mean square of the model's outputs, not your loss:
forward and backward cost the same to within the loss itself, and the gradients
(hence the all-reduce payload) have the same shapes. Each probe costs about two
extra forward+backward passes; it runs between steps, so step times do not
include it, but the run's wall-clock does (up to about 20 % at ``every=10``
when the step is all compute: raise ``every`` for long runs, ``phases=False``
to skip).
Under MultiWorkerMirroredStrategy every worker must use the same ``every``
(the probe's all-reduce is a collective that all workers join).

Where the events go
-------------------
Under ``gpuscale run``/``watch`` (``GPUSCALE_EVENTS`` is set) to the gpuscale
process over TCP; otherwise into a recording in gpuscale's runs folder
(``gpuscale runs`` lists it), whose path is printed when training ends.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import keras
import tensorflow as tf

from gpuscale import __version__
from gpuscale.events.schema import (
    DeviceInfo,
    EndEvent,
    Event,
    LogEvent,
    PhaseEvent,
    StartEvent,
    StepEvent,
)
from gpuscale.events.transport import ENV_ADDRESS, ENV_WORKER, EventClient
from gpuscale.keras.devices import apply_device_request
from gpuscale.keras.identity import workload_name

CALLBACK_SOURCE = "keras-callback"
"""The ``source`` of the LogEvent the module sends when it is loaded under gpuscale,
so the parent knows a callback is coming (see :mod:`gpuscale.live.script_run`)."""

_STRATEGY_NAMES = {
    "MirroredStrategy": "mirrored",
    "MultiWorkerMirroredStrategy": "multi-worker",
    "CollectiveAllReduceStrategy": "multi-worker",
    "CentralStorageStrategy": "central-storage",
    "OneDeviceStrategy": "one-device",
    "_DefaultDistributionStrategy": "none",
}
_CROSS_DEVICE_OPS_NAMES = {
    "NcclAllReduce": "nccl",
    "HierarchicalCopyAllReduce": "hierarchical-copy",
    "ReductionToOneDevice": "reduce-to-one",
    "CollectiveAllReduce": "collective",
}


# --- where events go -------------------------------------------------------------------


class _Channel:
    """The process's one connection to the gpuscale parent (if any), shared by all
    monitors in the process, so a second ``fit`` does not open a second stream."""

    _lock = threading.Lock()
    _client: EventClient | None = None
    _tried = False
    started = False
    """Whether a StartEvent already went out from this process."""
    steps_sent = 0
    """Steps reported by every monitor of the process (one step index sequence per stream)."""

    @classmethod
    def client(cls) -> EventClient | None:
        with cls._lock:
            if not cls._tried:
                cls._tried = True
                try:
                    cls._client = EventClient.from_env(connect_timeout_s=5.0)
                except (ConnectionError, ValueError) as exc:
                    print(f"gpuscale: {exc}; this run is not reported", file=sys.stderr)
                    cls._client = None
                if cls._client is not None:
                    atexit.register(cls._client.close)
            return cls._client


def _worker_index() -> int:
    text = os.environ.get(ENV_WORKER)
    if text and text.isdigit():
        return int(text)
    try:
        from gpuscale.live import cluster

        info = cluster.resolve()
    except Exception:  # a bad TF_CONFIG is TensorFlow's to report, not ours
        return 0
    return info.index if info else 0


def _announce() -> None:
    """Tell a waiting gpuscale parent that a callback is in this script."""
    if os.environ.get(ENV_ADDRESS):
        client = _Channel.client()
        if client is not None:
            client.send(
                LogEvent(
                    t=time.time(),
                    worker=_worker_index(),
                    message=f"gpuscale.keras loaded in process {os.getpid()}",
                    source=CALLBACK_SOURCE,
                    level="debug",
                )
            )


apply_device_request()  # GPUSCALE_DEVICES (gpuscale run --devices N): before TF sets up devices
_announce()


# --- what the strategy and model look like ---------------------------------------------


def _strategy_of(model: Any) -> tf.distribute.Strategy:
    strategy = getattr(model, "distribute_strategy", None)
    return strategy if strategy is not None else tf.distribute.get_strategy()


def describe_strategy(strategy: tf.distribute.Strategy) -> dict[str, Any]:
    """Strategy name, cross-device ops, replicas, workers and devices, as gpuscale names them."""
    class_name = type(strategy).__name__
    name = _STRATEGY_NAMES.get(class_name, class_name)
    cross_ops = None
    extended = strategy.extended
    ops = getattr(extended, "_cross_device_ops", None) or getattr(extended, "_collective_ops", None)
    if name == "multi-worker":
        cross_ops = "collective"
    elif ops is not None:
        ops_name = type(ops).__name__
        cross_ops = _CROSS_DEVICE_OPS_NAMES.get(ops_name, ops_name)
    num_workers = 1
    if name == "multi-worker":
        resolver = getattr(strategy, "cluster_resolver", None)
        try:
            spec = resolver.cluster_spec().as_dict() if resolver else {}
            num_workers = sum(len(v) for k, v in spec.items() if k in ("chief", "worker")) or 1
        except Exception:
            num_workers = 1
    devices: list[DeviceInfo] = []
    try:
        worker_devices = tuple(extended.worker_devices)
    except (RuntimeError, AttributeError, NotImplementedError):  # the default strategy
        worker_devices = ()
    for index, tf_name in enumerate(worker_devices):
        is_gpu = "GPU" in tf_name.upper()
        devices.append(
            DeviceInfo(
                index=index,
                name=tf_name.rsplit("/", 1)[-1],
                kind="gpu" if is_gpu else "cpu-logical",
                tf_name=tf_name,
            )
        )
    if not devices:
        gpus = tf.config.list_logical_devices("GPU")
        devices = [
            DeviceInfo(index=0, name="GPU:0" if gpus else "CPU:0", kind="gpu" if gpus else "cpu")
        ]
    if any(d.kind == "gpu" for d in devices):
        platform = "gpu"
    elif len(devices) > 1:
        platform = "cpu-logical"
    else:
        platform = "cpu"
    return {
        "strategy": name,
        "cross_device_ops": cross_ops,
        "num_replicas": int(strategy.num_replicas_in_sync),
        "num_workers": num_workers,
        "devices": devices,
        "platform": platform,
    }


def _trainable_bytes(model: Any) -> tuple[int, int]:
    params = 0
    payload = 0
    for variable in model.trainable_variables:
        count = 1
        for dim in variable.shape:
            count *= int(dim)
        params += count
        payload += count * tf.as_dtype(variable.dtype).size
    return params, payload


# --- the phase probe ---------------------------------------------------------------------


class _PhaseProbe:
    """Times compute-only and compute+all-reduce on a synthetic per-replica batch
    (see the module docstring). Built on first use; ``None`` results mean the
    probe cannot run for this model (reported once as a log line)."""

    def __init__(
        self,
        model: Any,
        strategy: tf.distribute.Strategy,
        input_spec: Any,
        per_replica_batch: int,
    ):
        self.model = model
        self.strategy = strategy
        self.input_spec = input_spec
        self.per_replica_batch = per_replica_batch
        self._fns: dict[bool, Any] = {}
        self._batch: Any = None
        self.num_tensors = len(model.trainable_variables)

    def _make_batch(self) -> Any:
        def one(spec: tf.TensorSpec) -> tf.Tensor:
            shape = [int(d) for d in spec.shape[1:]]
            shape.insert(0, self.per_replica_batch)  # the real per-replica batch
            if spec.dtype.is_integer:
                return tf.zeros(shape, spec.dtype)
            if spec.dtype.is_bool:
                return tf.zeros(shape, tf.bool)
            return tf.cast(tf.random.normal(shape, seed=1), spec.dtype)

        return tf.nest.map_structure(one, self.input_spec)

    def _build(self, reduce: bool) -> Any:
        model = self.model
        trainable = model.trainable_variables
        non_trainable = model.non_trainable_variables

        def replica_fn(x: Any) -> tf.Tensor:
            with tf.GradientTape() as tape:
                outputs, _ = model.stateless_call(trainable, non_trainable, x, training=True)
                flat = [tf.cast(o, tf.float32) for o in tf.nest.flatten(outputs)]
                loss = tf.add_n([tf.reduce_mean(tf.square(o)) for o in flat])
            grads = tape.gradient(loss, trainable)
            grads = [
                g if g is not None else tf.zeros_like(v)
                for g, v in zip(grads, trainable, strict=True)
            ]
            if reduce:
                grads = tf.distribute.get_replica_context().all_reduce(
                    tf.distribute.ReduceOp.SUM, grads
                )
            return tf.add_n([tf.reduce_sum(tf.cast(g, tf.float32)) for g in grads])

        strategy = self.strategy

        @tf.function
        def fn(x: Any) -> Any:
            return strategy.run(replica_fn, args=(x,))

        return fn

    def _time(self, reduce: bool) -> float:
        fn = self._fns[reduce]
        start = time.perf_counter()
        out = fn(self._batch)
        for value in self.strategy.experimental_local_results(out):
            value.numpy()  # wait for every replica
        return time.perf_counter() - start

    def measure(self) -> tuple[float, float]:
        """(compute_s, compute_plus_allreduce_s), one timing each: a single probe is
        noisy, the medians over many are not (as in the built-in trainer)."""
        if self._batch is None:
            self._batch = self._make_batch()
            for reduce in (False, True):
                self._fns[reduce] = self._build(reduce)
                self._time(reduce)  # trace and warm up, not timed
        return self._time(False), self._time(True)


def _input_spec_from_model(model: Any) -> Any:
    inputs = getattr(model, "inputs", None)
    if not inputs:
        return None
    specs = [tf.TensorSpec(tuple(i.shape), tf.as_dtype(i.dtype)) for i in inputs]
    return specs[0] if len(specs) == 1 else specs


# --- the callback ------------------------------------------------------------------------


class ScalingMonitor(keras.callbacks.Callback):
    """Reports a Keras training run to gpuscale: one StepEvent per step (per execution
    with ``steps_per_execution`` > 1) and, under a ``tf.distribute`` strategy, a
    PhaseEvent every ``every`` steps. See the module docstring for the method.

    ``batch_size``: the global batch, if you want to state it; otherwise it is read
    from the per-replica batch Keras traces (times the replicas). ``warmup_steps``:
    steps marked warm-up (excluded from statistics). ``phases``: run the phase probe.
    ``record``: outside gpuscale, where to write the recording (default: gpuscale's
    runs folder; ``None``: nowhere). ``name``: the workload's name in recordings and
    ``recommend`` (default: the model's name if the script gave it one, else the
    script's file name; see :mod:`gpuscale.keras.identity`).
    """

    def __init__(
        self,
        every: int = 10,
        *,
        batch_size: int | None = None,
        warmup_steps: int = 2,
        phases: bool = True,
        record: str | os.PathLike | None = "default",
        name: str | None = None,
    ):
        super().__init__()
        self.workload_name = name
        if every < 1:
            raise ValueError("ScalingMonitor(every=...) must be at least 1")
        self.every = every
        self.batch_size = batch_size
        self.warmup_steps = warmup_steps
        self.phases = phases
        self._record = record
        self.worker = _worker_index()
        self.steps = 0
        """Training steps seen so far (across ``fit`` calls)."""
        self._recorder: Any = None
        self._events: list[Event] = []
        self._t0 = time.perf_counter()
        self._wall0 = time.time()
        self._batch_start: float | None = None
        self._since_probe: list[float] = []
        self._probe: _PhaseProbe | None = None
        self._probe_failed = False
        self._input_spec: Any = None
        self._samples_var: tf.Variable | None = None
        self._last_samples: int | None = None
        self._wrapped_model: Any = None
        self._ended = False
        self._strategy_info: dict[str, Any] | None = None
        self._strategy: tf.distribute.Strategy | None = None
        self._started = False
        self._pending_start = False
        self._last_index = -1
        self._last_step_samples = 0

    # events --------------------------------------------------------------------------
    def _emit(self, event: Event) -> None:
        client = _Channel.client()
        if client is not None:
            client.send(event)
            return
        if isinstance(event, (StartEvent, StepEvent, PhaseEvent)):
            self._events.append(event)  # for the summary in the end event
        if self._recorder is not None:
            self._recorder.write(event)

    def _log(self, message: str, level: str = "info") -> None:
        self._emit(
            LogEvent(
                t=time.time(), worker=self.worker, message=message, source="script", level=level
            )
        )

    def _open_recording(self, model_name: str, devices: int, platform: str) -> None:
        if _Channel.client() is not None or self._record is None or self._recorder is not None:
            return
        try:
            from gpuscale.recording.store import default_path
            from gpuscale.recording.writer import Recorder
        except ImportError as exc:  # recording package missing in this install
            print(f"gpuscale: cannot record this run: {exc}", file=sys.stderr)
            self._record = None
            return
        path = (
            default_path(model_name, devices, platform)
            if self._record == "default"
            else self._record
        )

        def problem(message: str) -> None:
            print(f"gpuscale: {message}", file=sys.stderr)

        self._recorder = Recorder(path, on_problem=problem)

    # the start -----------------------------------------------------------------------
    def _start_event(
        self, model: Any, strategy: tf.distribute.Strategy, global_batch: int
    ) -> StartEvent:
        info = describe_strategy(strategy)
        self._strategy_info = info
        params, payload = _trainable_bytes(model) if model is not None else (None, None)
        replicas = info["num_replicas"]
        return StartEvent(
            t=time.time(),
            worker=self.worker,
            gpuscale_version=__version__,
            tensorflow_version=tf.__version__,
            host=socket.gethostname(),
            pid=os.getpid(),
            source="script",
            config={
                "script": os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "",
                "argv": list(sys.argv),
                "every": self.every,
                "warmup_steps": self.warmup_steps,
                "phases": self.phases,
                "keras_model": getattr(model, "name", None),
            },
            devices=info["devices"],
            platform=info["platform"],
            model=workload_name(model, self.workload_name, sys.argv),
            strategy=info["strategy"],
            cross_device_ops=info["cross_device_ops"],
            num_replicas=replicas,
            num_workers=info["num_workers"],
            global_batch=global_batch,
            per_replica_batch=global_batch // replicas if global_batch else 0,
            param_count=params,
            payload_bytes=payload,
            mixed_precision=keras.config.dtype_policy().name != "float32",
            pids=[os.getpid()],
            note=(
                "the batch is the script's own: gpuscale cannot tell whether it grows with "
                "the replicas (weak scaling) or is split among them (strong)"
            ),
        )

    def _begin(
        self, model: Any, strategy: tf.distribute.Strategy, global_batch: int | None = None
    ) -> None:
        self._strategy = strategy
        start = self._start_event(model, strategy, global_batch or self.batch_size or 0)
        self._open_recording(start.model, start.num_replicas, start.platform)
        shared = _Channel.client() is not None
        if (shared and _Channel.started) or self._started:
            self._started = True
            next_step = _Channel.steps_sent if shared else self.steps
            self._log(
                f"training restarted ({start.model}, {start.strategy}, "
                f"{start.num_replicas} replicas); steps continue from {next_step}"
            )
            return
        self._started = True
        _Channel.started = _Channel.started or shared
        self._emit(start)

    def set_model(self, model: Any) -> None:
        """Keras calls this before it builds the train function: wrap the model's
        ``train_step`` (on this instance only) to learn the real batch (see
        :meth:`_wrap_train_step`)."""
        super().set_model(model)
        if self._wrapped_model is not model and hasattr(model, "train_step"):
            self._wrap_train_step(model)

    def _wrap_train_step(self, model: Any) -> None:
        """Count the samples of every step and capture the per-replica input spec.

        The count is a ``tf.Variable`` (ON_READ/SUM: one copy per replica, each
        replica adds its own ``tf.shape(x)[0]``), read on the host after the step:
        exact even for a short last batch, and no cross-device traffic (only this
        worker's replicas are summed; the total is that times the workers).
        Takes effect when Keras builds the train function, i.e. the first ``fit``.
        """
        with tf.init_scope():
            self._samples_var = tf.Variable(
                0,
                dtype=tf.int64,
                trainable=False,
                synchronization=tf.VariableSynchronization.ON_READ,
                aggregation=tf.VariableAggregation.SUM,
                name="gpuscale_samples",
            )
        original = model.train_step
        monitor = self
        counter = self._samples_var

        def train_step(data: Any) -> Any:
            x = data[0] if isinstance(data, (tuple, list)) else data
            try:
                monitor._input_spec = tf.nest.map_structure(
                    lambda t: tf.TensorSpec(t.shape, t.dtype), x
                )
            except (TypeError, ValueError, AttributeError):
                pass
            first = tf.nest.flatten(x)[0]
            counter.assign_add(tf.cast(tf.shape(first)[0], tf.int64))
            return original(data)

        model.train_step = train_step
        self._wrapped_model = model

    def _samples_seen(self) -> int | None:
        """Samples counted so far on this worker times the workers (None if not counting)."""
        if self._samples_var is None or self._strategy is None:
            return None
        try:
            local = self._strategy.experimental_local_results(self._samples_var)
            total = sum(int(v.numpy()) for v in local)
        except Exception:
            return None
        workers = (self._strategy_info or {}).get("num_workers", 1)
        return total * workers

    def on_train_begin(self, logs: dict | None = None) -> None:
        # The start goes out after the first step, when the batch is known (the
        # first step also traces the model, so nothing is shown any later).
        self._strategy = _strategy_of(self.model)
        self._strategy_info = describe_strategy(self._strategy)
        self._pending_start = True
        self._ended = False
        self._last_samples = self._samples_seen()

    # steps ---------------------------------------------------------------------------
    def _step_samples(self, executed: int) -> int:
        """Samples of the step(s) just run: ``batch_size`` when given, else counted
        (one read of the counter's per-replica values per step), else 0."""
        if self.batch_size:
            return self.batch_size
        seen = self._samples_seen()
        if seen is not None and self._last_samples is not None and seen > self._last_samples:
            samples = (seen - self._last_samples) // executed
            self._last_samples = seen
            return samples
        return 0

    def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        self._batch_start = time.perf_counter()

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        # Keras has already turned the logs into Python floats (a sync); touching
        # them keeps that true even if a future Keras hands us tensors.
        for value in (logs or {}).values():
            float(value)
            break
        if self._batch_start is None:
            return
        elapsed = time.perf_counter() - self._batch_start
        self._batch_start = None
        executed = max(1, int(getattr(self.model, "steps_per_execution", 1) or 1))
        samples = self._step_samples(executed)
        if self._pending_start:
            self._pending_start = False
            self._begin(self.model, self._strategy, samples)
        self.record_step(elapsed / executed, samples, steps=executed)

    def record_step(self, step_time_s: float, samples: int, *, steps: int = 1) -> None:
        """Report ``steps`` steps whose mean time was ``step_time_s`` (synchronised)."""
        self.steps += steps
        self._last_step_samples = samples
        warmup = self.steps <= self.warmup_steps
        index = self.steps - 1
        if _Channel.client() is not None:  # a second monitor continues the stream's numbering
            with _Channel._lock:
                _Channel.steps_sent += steps
                index = _Channel.steps_sent - 1
        self._last_index = index
        self._emit(
            StepEvent(
                t=time.time(),
                worker=self.worker,
                step=index,
                step_time_s=step_time_s,
                samples=samples,
                warmup=warmup,
            )
        )
        if not warmup:
            self._since_probe.append(step_time_s)
        if self.phases and self.steps % self.every < steps and len(self._since_probe) > 0:
            self._run_probe()

    def _run_probe(self) -> None:
        model = self.model
        if model is None or self._probe_failed:
            return
        strategy = self._strategy or _strategy_of(model)
        if type(strategy).__name__.startswith("_Default"):
            return  # no tf.distribute strategy: no gradient exchange to measure
        if self._probe is None:
            spec = self._input_spec or _input_spec_from_model(model)
            if spec is None:
                self._probe_failed = True
                self._log(
                    "phase breakdown unavailable: the model's input shape is unknown "
                    "(build the model with keras.Input)",
                    "warning",
                )
                return
            dims = [list(s.shape[1:]) for s in tf.nest.flatten(spec)]
            if any(d is None for shape in dims for d in shape):
                self._probe_failed = True
                self._log(
                    "phase breakdown unavailable: an input has a dimension of unknown size "
                    f"({', '.join(str(s.shape) for s in tf.nest.flatten(spec))}); "
                    "the probe needs the real shape",
                    "warning",
                )
                return
            replicas = int(strategy.num_replicas_in_sync)
            if not self._last_step_samples:
                self._probe_failed = True
                self._log(
                    "phase breakdown unavailable: the batch size is unknown "
                    "(pass ScalingMonitor(batch_size=...))",
                    "warning",
                )
                return
            per_replica = max(1, self._last_step_samples // replicas)
            self._probe = _PhaseProbe(model, strategy, spec, per_replica)
        try:
            compute_s, fused_s = self._probe.measure()
        except Exception as exc:  # the probe must never stop the training
            self._probe_failed = True
            self._log(f"phase breakdown unavailable: {type(exc).__name__}: {exc}", "warning")
            return
        step_s = statistics.median(self._since_probe)
        self._since_probe = []
        allreduce_s = max(0.0, fused_s - compute_s)
        _params, payload = _trainable_bytes(model)
        self._emit(
            PhaseEvent(
                t=time.time(),
                worker=self.worker,
                step=self._last_index,
                step_time_s=step_s,
                compute_s=compute_s,
                allreduce_s=allreduce_s,
                apply_s=max(0.0, step_s - fused_s),
                payload_bytes=payload,
                num_tensors=self._probe.num_tensors,
                method="callback-probe",
            )
        )

    # the end -------------------------------------------------------------------------
    def on_train_end(self, logs: dict | None = None) -> None:
        if self._wrapped_model is not None:
            # The built train function keeps the wrapper; the model object gets its
            # own train_step back (so saving or subclass lookups see the original).
            with contextlib.suppress(AttributeError):
                del self._wrapped_model.train_step
        self._finish("completed")

    def _finish(self, status: str) -> None:
        if self._ended:
            return
        self._ended = True
        if not self._started:  # no step ran: there is no run to end
            return
        end = EndEvent(
            t=time.time(),
            worker=self.worker,
            status=status,
            steps=self.steps,
            duration_s=time.perf_counter() - self._t0,
        )
        if self._recorder is not None:
            try:
                import msgspec

                from gpuscale.analysis.summary import summarize

                summary = msgspec.to_builtins(summarize([*self._events, end]))
                end = msgspec.structs.replace(end, summary=summary)
            except Exception:  # the summary is a convenience; the recording is what matters
                pass
        self._emit(end)
        if self._recorder is not None:
            self._recorder.close()
            print(
                f"gpuscale: recorded {self.steps} steps to {self._recorder.path} "
                f"(gpuscale replay {self._recorder.path})",
                file=sys.stderr,
            )
            self._recorder = None

    # the custom-loop helper -------------------------------------------------------------
    def start(self, model: Any = None, strategy: tf.distribute.Strategy | None = None) -> None:
        """Send the start of the run (a custom loop calls it once; :meth:`step` and
        :meth:`wrap` call it for you). ``model`` gives the parameter count and the
        phase probe; ``strategy`` defaults to the current one."""
        if model is not None:
            self.set_model(model)
        else:
            model = getattr(self, "_model", None)
        strategy = strategy or (
            _strategy_of(model) if model is not None else tf.distribute.get_strategy()
        )
        self._begin(model, strategy)

    @contextlib.contextmanager
    def step(self, samples: int | None = None) -> Iterator[_Step]:
        """Time one step of a custom loop. Call ``step.sync(outputs)`` inside the block
        with what the step returned: the step ends when those values are on the host
        (without it, the time is only the dispatch of the step)."""
        if not self._started:
            self.start()
        handle = _Step()
        start = time.perf_counter()
        yield handle
        elapsed = time.perf_counter() - start
        self.record_step(elapsed, samples if samples is not None else (self.batch_size or 0))

    def wrap(self, step_fn: Callable[..., Any], samples: int | None = None) -> Callable[..., Any]:
        """``step_fn`` timed as one step per call, synchronised on its return value."""

        def timed(*args: Any, **kwargs: Any) -> Any:
            with self.step(samples) as handle:
                result = step_fn(*args, **kwargs)
                handle.sync(result)
            return result

        return timed

    def close(self, status: str = "completed") -> None:
        """End a custom-loop run: sends the end event, closes the recording."""
        self._finish(status)


class _Step:
    """Handle of one timed step in :meth:`ScalingMonitor.step`."""

    def sync(self, outputs: Any) -> None:
        """Wait until ``outputs`` (tensors, distributed values, nests of them) are computed."""
        for value in tf.nest.flatten(outputs, expand_composites=False):
            if isinstance(value, tf.distribute.DistributedValues):
                for local in tf.distribute.get_strategy().experimental_local_results(value):
                    _fetch(local)
            else:
                _fetch(value)


def _fetch(value: Any) -> None:
    if hasattr(value, "numpy"):
        value.numpy()
