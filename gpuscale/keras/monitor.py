"""What a monitor of the user's training does, whatever calls it (Keras's hooks or a
custom loop): the start, steps, phase probes and end of the run, sent to the
gpuscale parent or written to a recording.

The phase probe is the built-in trainer's (:mod:`gpuscale.trainer.probe`), and so
is its schedule (:mod:`gpuscale.trainer.schedule`); only the batch differs: a
callback cannot reach the real one, so the probe runs on random inputs of the
shape and dtype of the model's real per-replica input (captured when Keras
traces the train step, else taken from ``model.inputs``), with the per-replica
batch of the last step, through ``model.stateless_call`` so it changes no
weight, no BatchNorm statistic and no optimizer state. Its loss is the mean
square of the model's outputs, not the user's: forward and backward cost the
same to within the loss itself, and the gradients (hence the all-reduce
payload) have the same shapes.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from typing import Any

import keras
import msgspec
import tensorflow as tf

from gpuscale import __version__
from gpuscale.analysis.script_runs import script_batch_note
from gpuscale.events.schema import (
    EndEvent,
    ErrorEvent,
    Event,
    LogEvent,
    PhaseEvent,
    StartEvent,
    StepEvent,
    run_duration_s,
)
from gpuscale.formatting import plural
from gpuscale.keras import at_exit
from gpuscale.keras.channel import Channel, worker_index
from gpuscale.keras.describe import (
    describe_strategy,
    input_spec_from_model,
    strategy_of,
    trainable_bytes,
)
from gpuscale.keras.identity import workload_name
from gpuscale.trainer.probe import PhaseProbe, exposed_share, phase_event
from gpuscale.trainer.schedule import DEFAULT_BUDGET, ProbeScheduler
from gpuscale.trainer.vote import GapVote


def _synthetic_batch(input_spec: Any, per_replica_batch: int) -> tuple:
    """Random inputs of the real per-replica shape and dtype, as ``strategy.run`` args."""

    def one(spec: tf.TensorSpec) -> tf.Tensor:
        shape = [int(d) for d in spec.shape[1:]]
        shape.insert(0, per_replica_batch)
        if spec.dtype.is_integer:
            return tf.zeros(shape, spec.dtype)
        if spec.dtype.is_bool:
            return tf.zeros(shape, tf.bool)
        return tf.cast(tf.random.normal(shape, seed=1), spec.dtype)

    return (tf.nest.map_structure(one, input_spec),)


def vote_function(strategy: tf.distribute.Strategy) -> Any:
    """The workers' vote (:class:`~gpuscale.trainer.vote.GapVote`): every worker's
    ballot in, replica 0's (worker 0's first device) summed out to every worker."""
    sum_op = tf.distribute.ReduceOp.SUM

    def replica(ballot: tf.Tensor) -> tf.Tensor:
        context = tf.distribute.get_replica_context()
        # identity: on the replica's device (a plain tensor has none under multi-worker)
        mine = tf.identity(ballot)
        mine = tf.where(context.replica_id_in_sync_group == 0, mine, tf.zeros_like(mine))
        return context.all_reduce(sum_op, mine)

    return tf.function(lambda ballot: strategy.run(replica, args=(ballot,)))


def stateless_gradients(model: Any) -> Any:
    """Forward + backward of ``model`` on one replica through ``stateless_call``
    (mean-square loss of the outputs): the callback's ``replica_gradients``."""
    trainable = model.trainable_variables
    non_trainable = model.non_trainable_variables

    def replica_gradients(x: Any) -> list:
        with tf.GradientTape() as tape:
            outputs, _ = model.stateless_call(trainable, non_trainable, x, training=True)
            flat = [tf.cast(o, tf.float32) for o in tf.nest.flatten(outputs)]
            loss = tf.add_n([tf.reduce_mean(tf.square(o)) for o in flat])
        grads = tape.gradient(loss, trainable)
        return [
            g if g is not None else tf.zeros_like(v) for g, v in zip(grads, trainable, strict=True)
        ]

    return replica_gradients


class Monitor:
    """The run a monitor reports; :class:`gpuscale.keras.ScalingMonitor` adds Keras's
    hooks and the custom-loop helper. ``every``: probe every K-th step (overrides
    ``budget``); ``budget``: the probes' share of the wall clock."""

    def __init__(
        self,
        every: int | None = None,
        *,
        budget: float = DEFAULT_BUDGET,
        batch_size: int | None = None,
        warmup_steps: int = 2,
        phases: bool = True,
        record: str | os.PathLike | None = "default",
        name: str | None = None,
    ):
        self.workload_name = name
        if every is not None and every < 1:
            raise ValueError("ScalingMonitor(every=...) must be at least 1 (None: by budget)")
        if not 0 <= budget < 1:
            raise ValueError("ScalingMonitor(budget=...) is a share of the wall clock, e.g. 0.02")
        self.every = every
        self.budget = budget
        self.batch_size = batch_size
        self.warmup_steps = warmup_steps
        self.phases = phases
        self._record = record
        self.worker = worker_index()
        self.steps = 0
        """Training steps seen so far (across ``fit`` calls)."""
        self.steps_said = 0
        """Steps reported by this monitor, never reset (a new run's ``steps`` is)."""
        self.schedule = ProbeScheduler(budget, every=every)
        self._vote: GapVote | None = None
        """Several workers by budget: worker 0's schedule decides for all."""
        self._vote_fn: Any = None
        self._recorder: Any = None
        self._events: list[Event] = []
        self._t0 = time.perf_counter()
        self._probe: PhaseProbe | None = None
        self._probe_batch: tuple | None = None
        self._probe_failed = False
        self._no_probe = False
        """No probe can run in this fit (no ``tf.distribute`` strategy, or the probe
        failed): its steps stop asking the schedule (:meth:`record_step`); each
        :meth:`_begin` (a fit's, a custom loop's) asks again."""
        self._probe_for: tuple[Any, Any] | None = None
        """The model and strategy the probe (or its failure) is of."""
        self._input_spec: Any = None
        self._ended = False
        self._strategy_info: dict[str, Any] | None = None
        self._strategy: tf.distribute.Strategy | None = None
        self._started = False
        self._run_ended = False
        """The run's end went out (a later ``fit`` outside gpuscale is a new run)."""
        self._custom_loop = False
        """The run is a custom loop's (``CustomLoop.start``), not ``fit``'s."""
        self._warm_from = 0
        """The step the warm-up counts from: another model's first (its tracing)."""
        self._start_batch = 0
        """The global batch the run started or restarted with (0: not known)."""
        self._last_index = -1
        self._last_step_samples = 0
        self._planned: int | None = None
        """The steps a ``fit`` plans (Keras's steps per epoch x its epochs), until its
        first step places them in the stream's numbering (:attr:`_total_steps`)."""
        self._total_steps: int | None = None
        """Where the current ``fit`` is planned to end, in step numbering, as each of its
        steps says (``StepEvent.total_steps``); None where not known (a custom loop)."""
        self.batch_scaling: str | None = None
        """What the script said its batch is (``"strong"``, ``"weak"``; ``CustomLoop.start``),
        None: ``fit``'s, split across the replicas (strong scaling)."""

    # events --------------------------------------------------------------------------
    def _emit(self, event: Event) -> None:
        client = Channel.client()
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
        if Channel.client() is not None or self._record is None or self._recorder is not None:
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
        at_exit.track(self)  # ended, recorded and said even if the script never ends it

    # the start -----------------------------------------------------------------------
    def _start_event(
        self,
        model: Any,
        strategy: tf.distribute.Strategy,
        global_batch: int,
        custom_loop: bool = False,
        info: dict[str, Any] | None = None,
    ) -> StartEvent:
        """The run's start (``info``: :func:`describe_strategy`'s, if already known)."""
        info = info if info is not None else describe_strategy(strategy)
        self._strategy_info = info
        params, payload = trainable_bytes(model) if model is not None else (None, None)
        replicas = info["num_replicas"]
        config = {
            "script": os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "",
            "argv": list(sys.argv),
            "every": self.every,
            "probe_budget": self.budget,
            "probe_schedule": self.schedule.describe()
            + (", worker 0's schedule for every worker" if self._vote else ""),
            "warmup_steps": self.warmup_steps,
            "phases": self.phases,
            "keras_model": getattr(model, "name", None),
            **({"custom_loop": True} if custom_loop else {}),  # else Keras fit
            **(
                {"batch_scaling": self.batch_scaling, "batch_scaling_told": True}
                if self.batch_scaling
                else {}
            ),
        }
        return StartEvent(
            t=time.time(),
            worker=self.worker,
            gpuscale_version=__version__,
            tensorflow_version=tf.__version__,
            host=socket.gethostname(),
            pid=os.getpid(),
            source="script",
            config=config,
            devices=info["devices"],
            platform=info["platform"],
            cpu_cores=os.cpu_count() if info["platform"] != "gpu" else None,  # as a sweep's
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
            # fit()'s batch is split across the replicas (script_runs), unless the script
            # (a custom loop) said otherwise
            scaling=self.batch_scaling or "strong",
            note=script_batch_note(config),
        )

    def _begin(
        self,
        model: Any,
        strategy: tf.distribute.Strategy,
        global_batch: int | None = None,
        custom_loop: bool = False,
    ) -> None:
        shared = Channel.client() is not None
        self._no_probe = False  # another fit: perhaps another model or strategy
        if self._started and not shared and self._run_ended:
            # outside gpuscale a monitor used for a second fit records a run of its own,
            # as a second monitor does (its recording was closed with the first run's
            # end: the new one needs its own start, or nothing of it is saved)
            self._started = False
            self._ended = False  # a custom loop's second start: its close() ends it too
            horizon = self.schedule.horizon_steps  # this fit's length, set as it began
            if horizon:
                horizon = max(0, horizon - self.schedule.steps)
            self.steps = self._warm_from = 0
            self._events = []
            self.schedule = ProbeScheduler(self.budget, every=self.every)
            self.schedule.horizon_steps = horizon
            self._vote = None
        self._run_ended = False
        self._custom_loop = custom_loop
        if custom_loop:  # a loop's length is its own: no total (a fit's comes in its hooks)
            self._planned = self._total_steps = None
        self._strategy = strategy
        self.schedule.replicas = int(getattr(strategy, "num_replicas_in_sync", 1) or 1)
        info = describe_strategy(strategy)
        if (
            self._vote is None
            and self.schedule.every is None
            and self.schedule.budget > 0
            and info["num_workers"] > 1
        ):  # the probe's all-reduce is a collective: every worker must probe at the same steps
            self._vote = GapVote(self.schedule, chief=True)  # replica 0's ballot counts
            self._vote_fn = vote_function(strategy)
        global_batch = global_batch or self.batch_size or 0
        if (shared and Channel.started) or self._started:
            # a restart (every fit after the first) is a log line naming the few fields
            # of a start it needs, not a whole StartEvent built and dropped (its
            # parameter count, host, cores...: 0.2-0.4 ms of a fit's first step)
            self._strategy_info = info
            model_name = workload_name(model, self.workload_name, sys.argv)
            self._open_recording(model_name, info["num_replicas"], info["platform"])
            self._started = True
            next_step = Channel.steps_sent if shared else self.steps
            self._log(
                f"training restarted ({model_name}, {info['strategy']}, "
                f"{info['num_replicas']} replicas); steps continue from {next_step}"
            )
            before = Channel.batch if shared else self._start_batch
            if global_batch and before and global_batch != before:
                self._log(
                    f"the batch changed: {global_batch} samples a step, was {before}; "
                    "this run's median step and throughput mix both (to compare device "
                    "counts, keep one batch a run)",
                    "warning",
                )
            self._note_batch(global_batch, shared)
            return
        start = self._start_event(model, strategy, global_batch, custom_loop=custom_loop, info=info)
        self._open_recording(start.model, start.num_replicas, start.platform)
        self._started = True
        Channel.started = Channel.started or shared
        self._note_batch(start.global_batch, shared)
        self._emit(start)

    def _note_batch(self, batch: int | None, shared: bool) -> None:
        """The batch of the run's (re)start, which a restart compares its own with (the
        stream's, kept for every monitor of the process, under gpuscale)."""
        if batch:
            self._start_batch = batch
            if shared:
                Channel.batch = batch

    # steps ---------------------------------------------------------------------------
    def record_step(
        self,
        step_time_s: float,
        samples: int,
        *,
        steps: int = 1,
        t: float | None = None,
        probe: bool = True,
    ) -> bool:
        """Report ``steps`` steps whose mean time was ``step_time_s`` (synchronised),
        which ended at ``t`` (``time.time()``; default: now), and probe if one is due.
        ``probe=False``: a due probe is not run but said (True), for the caller to
        run once what must go out before it has."""
        self.steps += steps
        self.steps_said += steps
        self._last_step_samples = samples
        # warm-up where it includes one of the first steps: several steps a call
        # (steps_per_execution) put the first call's tracing in its first event
        warmup = self.steps - steps - self._warm_from < self.warmup_steps
        index = self.steps - 1
        if Channel.client() is not None:  # a second monitor continues the stream's numbering
            index = Channel.next_indices(steps)
        self._last_index = index
        at_exit.went_on()  # a sys.exit caught before this step is not how the script ends
        if self._planned is not None:  # a fit's first step: its plan from this step's number
            self._total_steps = index - steps + 1 + self._planned
            self._planned = None
        self._emit(
            StepEvent(
                t=time.time() if t is None else t,
                worker=self.worker,
                step=index,
                step_time_s=step_time_s,
                samples=samples,
                warmup=warmup,
                total_steps=self._total_steps,
            )
        )
        if not self.phases:
            return False
        self.schedule.add_step(step_time_s, steps=steps, warmup=warmup)
        if self._vote is not None:  # several workers: they vote, at the same steps
            due = self._vote.voting() and self._cast_vote()
        elif self._no_probe:
            # none can run: a schedule that never sees one is due at every step, and
            # asking it and the probe cost 2-3 us a step warm (a script without a
            # strategy, its 1-device baseline); a worker that votes still votes above
            return False
        else:
            due = self.schedule.due()
        if due and probe:
            self.probe_now(step_time_s)
            return False
        return bool(due)

    def probe_now(self, step_time_s: float) -> None:
        """Run the probe that is due, against the usual step (not ``step_time_s``'s, a
        retrace, a callback: :meth:`ProbeScheduler.reference_step_s`)."""
        self._run_probe(self.schedule.reference_step_s(step_time_s))

    def _cast_vote(self) -> bool:
        """Every worker sums its ballot (replica 0's counts): whether to probe now.
        Before the first vote the sum is compiled and run once, untimed; every vote
        is timed and paid from the probe budget."""
        vote, strategy = self._vote, self._strategy
        assert vote is not None and strategy is not None
        try:
            local = strategy.experimental_local_results
            if not vote.votes:  # compiled (and run: every worker joins), untimed
                local(self._vote_fn(tf.zeros([2], tf.float32)))[0].numpy()
            ballot = tf.constant(vote.ballot(), tf.float32)
            start = time.perf_counter()
            total = local(self._vote_fn(ballot))[0].numpy()
            vote.cost(time.perf_counter() - start)
        except Exception as exc:  # the measurement must never stop the training
            self._vote = None
            self.schedule.budget = 0.0
            self._log(f"phase breakdown stopped: the workers' vote failed: {exc}", "warning")
            return False
        return vote.received((float(total[0]), float(total[1])))

    def _current_model(self) -> Any:
        return getattr(self, "model", None)

    def _make_probe(self, model: Any, strategy: tf.distribute.Strategy) -> PhaseProbe | None:
        """The probe for this model, or None (said once, as a warning) when it cannot run."""
        spec = self._input_spec or input_spec_from_model(model)
        problem = None
        if spec is None:
            problem = "the model's input shape is unknown (build the model with keras.Input)"
        elif any(d is None for s in tf.nest.flatten(spec) for d in list(s.shape[1:])):
            shapes = ", ".join(str(s.shape) for s in tf.nest.flatten(spec))
            problem = f"an input has a dimension of unknown size ({shapes}); the probe needs the real shape"
        elif not self._last_step_samples:
            problem = "the batch size is unknown (pass ScalingMonitor(batch_size=...))"
        if problem is not None:
            self._probe_failed = True
            self._log(f"phase breakdown unavailable: {problem}", "warning")
            return None
        per_replica = max(1, self._last_step_samples // int(strategy.num_replicas_in_sync))
        self._probe_batch = _synthetic_batch(spec, per_replica)
        return PhaseProbe(strategy, model.trainable_variables, stateless_gradients(model))

    def _run_probe(self, step_time_s: float) -> None:
        model = self._current_model()
        if model is None:
            return
        strategy = self._strategy or strategy_of(model)
        made_for = self._probe_for
        if made_for is not None and (made_for[0] is not model or made_for[1] is not strategy):
            # a monitor given to another model's fit (or another strategy): the probe
            # built before runs the other model's gradients, and its failure was its own
            self._probe = self._probe_batch = self._probe_for = None
            self._probe_failed = False
        if self._probe_failed or type(strategy).__name__.startswith("_Default"):
            # failed, or no tf.distribute strategy (no gradient exchange to measure)
            self._no_probe = True
            return
        setup_s = None
        try:
            if self._probe is None:
                self._probe_for = (model, strategy)
                self._probe = self._make_probe(model, strategy)
                if self._probe is None:
                    self._no_probe = True
                    return
            if not self._probe.ready:  # compiled once, timed apart: not the probe budget's
                began = time.perf_counter()
                self._probe.prepare(self._probe_batch)
                setup_s = time.perf_counter() - began
            times = self._probe.measure(self._probe_batch)
        except Exception as exc:  # the probe must never stop the training
            self._probe_failed = self._no_probe = True
            self._log(f"phase breakdown unavailable: {type(exc).__name__}: {exc}", "warning")
            return
        share = exposed_share(times, step_time_s)
        cost_s = times.cost_s
        if self._vote is not None:  # the votes before it are part of what it cost
            times = msgspec.structs.replace(times, cost_s=times.cost_s + self._vote.take_cost())
        _params, payload = trainable_bytes(model)
        event = phase_event(
            times,
            step=self._last_index,
            step_time_s=step_time_s,
            worker=self.worker,
            payload_bytes=payload,
            num_tensors=self._probe.num_tensors,
            method="callback-probe",
            setup_s=setup_s,
        )
        # resolved only where the summary will split the step with these phases
        self.schedule.add_probe(cost_s, share, phases=event)
        self._emit(event)

    # the end -------------------------------------------------------------------------
    def _end_at_exit(self, status: str | None, error: at_exit.Exit | None = None) -> None:
        """The process exits with this run still open (:mod:`gpuscale.keras.at_exit`):
        ``status`` from how it exits (``error``: why it failed, recorded as gpuscale
        records a failed script's), else ``stopped`` where a ``fit`` never returned (a
        SystemExit whose status no hook saw) and ``completed`` where a custom loop was
        never closed."""
        self.phases = False  # no probe on the way out
        self._release_held()  # a step held back, as it was said
        said = status == "failed" and error is not None and error.error
        if said and self._started and not self._ended:  # no step ran: no run to say it of
            self._emit(
                ErrorEvent(
                    t=time.time(),
                    worker=self.worker,
                    message=error.error,
                    traceback=error.traceback,
                    source="script",
                )
            )
        self._finish(status or ("completed" if self._custom_loop else "stopped"))

    def _release_held(self, seen: int | None = None, steps_ran: int | None = None) -> None:
        """Report a step held back (Keras's callback holds one where an epoch's length
        is unknown); nothing here."""

    def _finish(self, status: str) -> None:
        at_exit.untrack(self)
        if self._ended:
            return
        self._ended = True
        if not self._started:  # no step ran: there is no run to end
            return
        self._run_ended = True
        now = time.time()
        start = next((e for e in reversed(self._events) if isinstance(e, StartEvent)), None)
        latest = max((e.t for e in self._events), default=now)
        end = EndEvent(
            t=now,
            worker=self.worker,
            status=status,
            steps=self.steps,
            # the one duration every view shows (run_duration_s), not the process's
            duration_s=run_duration_s(start.t, max(latest, now))
            if start is not None
            else time.perf_counter() - self._t0,
        )
        if self._recorder is not None:
            try:
                import msgspec

                from gpuscale.analysis.summary import summarize, summary_document

                summary = summary_document(summarize([*self._events, end]))
                end = msgspec.structs.replace(end, summary=summary)
            except Exception:  # the summary is a convenience; the recording is what matters
                pass
        self._emit(end)
        if self._recorder is not None:
            recorder, self._recorder = self._recorder, None
            recorder.close()
            how = "" if status == "completed" else f" (the run {status})"
            if recorder.problem is not None and not recorder.events_written:
                # it said why as it stopped (the file was there, the disk full): no
                # "recorded to" a file that holds nothing of this run
                print(f"gpuscale: {plural(self.steps, 'step')}{how}, not recorded", file=sys.stderr)
                return
            print(
                f"gpuscale: recorded {plural(self.steps, 'step')}{how} to {recorder.path} "
                f"(gpuscale replay {recorder.path})",
                file=sys.stderr,
            )
