"""The Keras callback: :class:`ScalingMonitor`, Keras's hooks around the run a
:class:`~gpuscale.keras.monitor.Monitor` reports (see :mod:`gpuscale.keras`)."""

from __future__ import annotations

import os
import time
import weakref
from typing import Any

import keras
import tensorflow as tf

from gpuscale.keras.custom_loop import CustomLoop
from gpuscale.keras.describe import describe_strategy, input_spec_from_model, strategy_of
from gpuscale.keras.monitor import Monitor
from gpuscale.keras.order import fit_callback_list, run_end_hook_first
from gpuscale.trainer.schedule import DEFAULT_BUDGET

SAMPLES_READ_EVERY = 10
"""Fewest steps between two reads of the sample counter (besides the first step of
each ``fit`` and the last of each epoch)."""
SAMPLES_READ_INTERVAL_S = 0.5
"""Shortest time between two such reads. A read costs about 0.17 ms (one read per
replica; 2 CPU logical devices, 2026-11-27): every 10 steps of a 6 ms step that
was 23 µs a step, a third of the callback's own time per step (0.4 % of the
step); at most every 0.5 s it is under 0.04 % of any run's wall clock."""


def _read(variable: Any) -> Any:
    """A replica's copy of a counter, read: one op (``numpy()`` runs a read, a copy and
    layers of Python, 35 us against 13 us on 2 CPU logical devices; a fit reads at its
    first and last steps)."""
    try:
        handle = variable.handle
    except Exception:  # not a resource variable (or not here): read as it reads itself
        return variable.numpy()
    return tf.raw_ops.ReadVariableOp(resource=handle, dtype=variable.dtype)


def sample_counter() -> tf.Variable:
    """gpuscale's own sample counter, for a ``train_step`` that does not count in Keras's
    loss tracker: one copy per replica of the strategy in scope (ON_READ/SUM), each
    replica adding its own ``tf.shape(x)[0]``, read on the host after the step."""
    with tf.init_scope():
        return tf.Variable(
            0,
            dtype=tf.int64,
            trainable=False,
            synchronization=tf.VariableSynchronization.ON_READ,
            aggregation=tf.VariableAggregation.SUM,
            name="gpuscale_samples",
        )


class _Counting:
    """The sample counter built into a model's train function (``None`` where Keras's
    own step counts them: :func:`keras_counts_samples`), and the per-replica input
    spec its trace saw: kept with the model (:data:`_COUNTING`) so a later monitor on
    the same model reads the counter that function increments."""

    def __init__(self, variable: tf.Variable | None):
        self.variable = variable
        self.input_spec: Any = None


def keras_counts_samples(model: Any) -> bool:
    """Whether ``model`` trains with Keras's own ``train_step``, which counts every
    step's samples in its loss tracker (``Mean``'s ``count``: each replica adds its
    batch, ``tf.shape(x)[0]``; reset at every epoch's start): then gpuscale reads that
    and adds nothing to the compiled step. A ``train_step`` of the user's own may not
    update it: gpuscale counts in its own variable there."""
    tracker = getattr(model, "_loss_tracker", None)
    step = getattr(type(model), "train_step", None)
    own = vars(model).get("train_step")  # one the script set on the model itself
    return (
        _KERAS_COUNTS
        and getattr(tracker, "count", None) is not None
        and step is not None
        and getattr(step, "__module__", "").startswith("keras.")
        and (own is None or getattr(own, "_gpuscale_wrapper", False))
    )


def _keras_version() -> tuple[int, int]:
    try:
        major, minor = keras.__version__.split(".")[:2]
        return int(major), int(minor)
    except (AttributeError, ValueError):
        return (0, 0)


_KERAS_COUNTS = _keras_version() >= (3, 2)
"""Keras 3.2 and later weigh the loss tracker by the batch (keras-team/keras#19363);
before, its count was of steps."""


_COUNTING: weakref.WeakKeyDictionary[Any, _Counting] = weakref.WeakKeyDictionary()


def fit_total_steps(params: dict | None, first_epoch: int) -> int | None:
    """The steps a ``fit`` plans: Keras's ``steps`` (per epoch) times the epochs it runs
    from ``first_epoch`` (``initial_epoch``) to ``epochs``; None where Keras does not
    know the epoch's length (data of unknown length without ``steps_per_epoch``)."""
    steps, epochs = (params or {}).get("steps"), (params or {}).get("epochs")
    if not steps or not epochs:
        return None
    return int(steps) * max(0, int(epochs) - int(first_epoch))


class ScalingMonitor(CustomLoop, Monitor, keras.callbacks.Callback):
    """Reports a Keras training run to gpuscale: one StepEvent per step (per execution
    with ``steps_per_execution`` > 1) and, under a ``tf.distribute`` strategy, a
    PhaseEvent per phase probe. See :mod:`gpuscale.keras` for the method.

    ``budget``: the probes' share of the wall clock (default 0.02: 2 %);
    ``every``: probe every K-th step instead, whatever it costs. ``batch_size``:
    the global batch, if you want to state it; otherwise it is read from the
    per-replica batch Keras traces (times the replicas). ``warmup_steps``: steps
    marked warm-up (excluded from statistics). ``phases``: run the phase probe.
    ``record``: outside gpuscale, where to write the recording (default:
    gpuscale's runs folder; ``None``: nowhere). ``name``: the workload's name in
    recordings and ``recommend`` (default: the model's name if the script gave it
    one, else the script's file name; see :mod:`gpuscale.keras.identity`).
    """

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
        keras.callbacks.Callback.__init__(self)
        Monitor.__init__(
            self,
            every,
            budget=budget,
            batch_size=batch_size,
            warmup_steps=warmup_steps,
            phases=phases,
            record=record,
            name=name,
        )
        self._batch_start: float | None = None
        self._batch_begin = 0
        """The first step of the current call (``on_train_batch_begin``'s ``batch``)."""
        self._per_call = 1
        """``steps_per_execution`` of the fit."""
        self._iterations_tell: bool | None = None
        """Whether the optimizer's ``iterations`` counted a whole call's steps on the fit's
        first call (None: not known yet); then an epoch's last call is counted by it."""
        self._iterations_before: int | None = None
        self._waiting: list = []
        """A probe's events run at a held step's successor, sent once that one is said."""
        self._epoch_from: tuple[int | None, int] | None = None
        """Where the epoch's length is unknown and a call runs several steps: the
        optimizer's count and the steps said as the epoch began."""
        self._samples_var: tf.Variable | None = None
        self._last_samples: int | None = None
        """The counter's value at the last read (None: not counting)."""
        self._reported = 0
        """Samples reported since the last read."""
        self._unread_steps = 0
        """Steps since the last read."""
        self._owed = 0
        """Samples the last read found reported beyond the count (a short batch said as
        full, its own step short too): the next step reads again to pay them back."""
        self._clock = time.perf_counter
        self._last_read_t = 0.0
        """When the counter was last read (``_clock``)."""
        self._per_step: int | None = None
        """What steps without a read report: the samples per step of the first read
        of the ``fit``, or of a later interval where every step had the same."""
        self._wrapped_model: Any = None
        self._counting: _Counting | None = None
        self._tracker: Any = None
        """Keras's loss tracker whose ``count`` is read (:func:`keras_counts_samples`)."""
        self._tracker_base = 0
        """Samples of this ``fit``'s epochs before the current one (the tracker's count
        starts again from 0 every epoch): what :meth:`_samples_seen` adds to it."""
        self._epoch_open = False
        """An epoch is running whose count has not been added to the base yet."""
        self._own_step: Any = None
        """A ``train_step`` the script set on the model itself, given back at the end."""
        self._held: tuple[float, float, int, int] | None = None
        """Where Keras does not know an epoch's length, the latest step (its end's
        ``time.time()``, step time, samples, steps), reported at the next step or, if
        it was the epoch's last, at the epoch's end with its samples read then: a
        short last batch is never reported as full (:meth:`_release_held`)."""
        self._pending_start = False
        self._plan_pending = False
        """A ``fit`` has begun whose length is read as its first epoch begins."""

    def set_model(self, model: Any) -> None:
        """Keras calls this before it builds the train function: wrap the model's
        ``train_step`` (on this instance only) to learn the real batch (see
        :meth:`_wrap_train_step`). Another model than the last one's: nothing of that
        one's is kept (its counter, its loss tracker, its input spec)."""
        previous = self._model
        super().set_model(model)
        if previous is not None and model is not previous:
            self._forget_model()
        current = vars(model).get("train_step")
        if hasattr(model, "train_step") and not getattr(current, "_gpuscale_wrapper", False):
            # every fit: a model compiled again since (a new loss tracker, its train
            # function gone) is wrapped again as a new one
            self._wrap_train_step(model)

    def _forget_model(self) -> None:
        """The monitor is given another model: what it read and traced of the last one
        goes (the probe goes when it next runs, :meth:`Monitor._run_probe`)."""
        self._samples_var = self._counting = self._tracker = None
        self._no_probe = False
        self._own_step = self._wrapped_model = None
        self._input_spec = None
        self._warm_from = self.steps  # its first steps trace it: warm-up again

    def _wrap_train_step(self, model: Any) -> None:
        """Learn every step's samples and capture the per-replica input spec.

        Where Keras's own ``train_step`` runs (:func:`keras_counts_samples`), its loss
        tracker already counts the samples: the monitor reads that count and the
        compiled step stays Keras's own (the wrapper below only notes the input spec
        while Keras traces; a train function built before stays as it is, the spec
        then from the model). Otherwise the count is a ``tf.Variable`` of gpuscale's
        (ON_READ/SUM: one copy per replica, each replica adds its own
        ``tf.shape(x)[0]``). Either is read on the host after the step: exact even
        for a short last batch, and no cross-device traffic (only this worker's
        replicas are summed; the total is that times the workers). A model whose
        train function an earlier monitor's count is built into keeps it (this
        monitor reads that counter); one built without a count it needs (``fit``
        before any monitor, a ``train_step`` of the user's own) is built again with
        it, once (Keras traces it again), unless ``batch_size`` was given: then
        nothing needs counting.
        """
        counting = _COUNTING.get(model)
        built = getattr(model, "train_function", None) is not None
        own_count = keras_counts_samples(model)
        if own_count:
            self._tracker = model._loss_tracker
        if counting is not None and built:
            self._samples_var, self._counting = counting.variable, counting
            if counting.variable is not None:
                self._tracker = None  # the counter built in is the one that counts
            self._wrapped_model = model
            return
        spec_known = input_spec_from_model(model) is not None
        if built and (self.batch_size or own_count) and (spec_known or not self.phases):
            return  # the step's own function stays; the batch is known, the spec from model
        variable = None if own_count else sample_counter()
        counting = _COUNTING[model] = _Counting(variable)
        self._samples_var, self._counting = variable, counting
        if variable is not None:
            self._tracker = None
        self._own_step = vars(model).get("train_step")
        original = model.train_step

        def train_step(data: Any) -> Any:
            x = data[0] if isinstance(data, (tuple, list)) else data
            try:
                counting.input_spec = tf.nest.map_structure(
                    lambda t: tf.TensorSpec(t.shape, t.dtype), x
                )
            except (TypeError, ValueError, AttributeError):
                pass
            if variable is not None:
                first = tf.nest.flatten(x)[0]
                variable.assign_add(tf.cast(tf.shape(first)[0], tf.int64))
            return original(data)

        train_step._gpuscale_wrapper = True  # type: ignore[attr-defined]
        model.train_step = train_step
        if built:  # built without the count (or the spec): Keras builds it again, with it
            model.train_function = None
        self._wrapped_model = model

    def _samples_seen(self) -> int | None:
        """Samples counted so far on this worker times the workers (None if not
        counting): by gpuscale's counter, or by Keras's loss tracker this epoch."""
        counter = self._samples_var
        base = 0
        if counter is None and self._tracker is not None:
            counter = getattr(self._tracker.count, "value", self._tracker.count)
            base = self._tracker_base
        if counter is None or self._strategy is None:
            return None
        try:
            local = self._strategy.experimental_local_results(counter)
            # the tracker's count is a float32 sum of whole batches: exact up to 2**24
            # samples an epoch (16.7 M), then to float32's step there (2, 4, ... samples)
            total = base + sum(int(round(float(_read(v)))) for v in local)
        except Exception:
            return None
        workers = (self._strategy_info or {}).get("num_workers", 1)
        return total * workers

    def on_train_begin(self, logs: dict | None = None) -> None:
        # The start goes out after the first step, when the batch is known (the
        # first step also traces the model, so nothing is shown any later).
        self._release_held()  # a fit stopped by an error: its last step, as it was said
        callbacks = fit_callback_list(self)
        if callbacks is not None:  # other callbacks' end-of-batch work is not the step
            run_end_hook_first(callbacks, self)
        self._strategy = strategy_of(self.model)
        self._strategy_info = describe_strategy(self._strategy)
        self._pending_start = True
        self._ended = False
        if self._samples_var is None and keras_counts_samples(self.model):
            self._tracker = self.model._loss_tracker  # this compile's (a new one each time)
        self._tracker_base = 0
        self._epoch_open = False
        self._per_call = max(1, int(getattr(self.model, "steps_per_execution", 1) or 1))
        self._iterations_tell = self._iterations_before = None
        self._last_samples = 0 if self._tracker is not None else self._samples_seen()
        self._last_read_t = self._clock()
        self._reported = self._unread_steps = self._owed = 0
        self._per_step = None
        steps, epochs = (self.params or {}).get("steps"), (self.params or {}).get("epochs")
        if steps and epochs:  # the run's length so far: early probes may take half its budget
            self.schedule.horizon_steps = self.schedule.steps + int(steps) * int(epochs)
        self._total_steps = self._planned = None  # this fit's, once its first epoch begins
        self._plan_pending = True

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        if self._plan_pending:  # the fit's first epoch: ``initial_epoch``, the epochs it runs
            self._plan_pending = False
            self._planned = fit_total_steps(self.params, epoch)
        # Keras has just reset its loss tracker: its count starts again from 0
        self._epoch_open = True
        self._epoch_from = None
        if self._per_call > 1 and not (self.params or {}).get("steps"):
            # several steps a call, the epoch's length unknown: its last call's steps
            # are what the optimizer ran in the epoch less those said (_close_epoch)
            self._epoch_from = (self._optimizer_iterations(), self.steps_said)

    def _close_epoch(self) -> None:
        """The epoch's training is over (validation, or the epoch's end, comes next):
        add its count to the base before Keras resets the tracker, and report the step
        held back (an epoch of unknown length: its last) with the samples counted."""
        if not self._epoch_open:
            return
        self._epoch_open = False
        keras_count = self._tracker is not None and self._samples_var is None
        if not keras_count and self._held is None:
            return
        # with Keras's count: the base and this epoch's. Read at the epoch's last step
        # with no step since (an epoch of known length), the counter holds what that
        # read found: taken from it, not read again (0.1-0.3 ms a fit)
        seen = self._last_samples if self._read_is_current() else self._samples_seen()
        if keras_count and seen is not None:
            self._tracker_base = seen
        self._release_held(seen, steps_ran=self._held_call_steps())

    def _read_is_current(self) -> bool:
        """Whether ``_last_samples`` is what the counter holds now: counted (not
        ``batch_size``) and no step ran since it was read (only a step moves it)."""
        return not self.batch_size and self._last_samples is not None and not self._unread_steps

    def _held_call_steps(self) -> int | None:
        """The steps the held call ran, where the epoch's length is unknown and a call
        runs several (the data ran out in it): the optimizer's steps in the epoch less
        those already said, where its ``iterations`` counted the fit's first call whole."""
        began, self._epoch_from = self._epoch_from, None
        if began is None or began[0] is None or self._held is None or not self._iterations_tell:
            return None
        now = self._optimizer_iterations()
        if now is None:
            return None
        ran = (now - began[0]) - (self.steps_said - began[1])
        return ran if 1 <= ran <= self._held[3] else None

    def _release_held(self, seen: int | None = None, steps_ran: int | None = None) -> None:
        """Report the step held back, its samples settled against ``seen`` (the
        counter read now) where given: what the steps since the last read claimed
        beyond the count is taken off it (a short last batch said as full), what they
        left out added. ``steps_ran``: the steps the held call really ran (several a
        call: fewer where the data ran out), its time theirs."""
        held, self._held = self._held, None
        if held is None:
            return
        t, step_time_s, samples, executed = held
        total = samples * executed  # as said for it so far (in _reported)
        if steps_ran is not None:  # samples a step as they were (batch_size, or settled below)
            step_time_s, executed = step_time_s * executed / steps_ran, steps_ran
        if seen is not None and not self.batch_size and self._last_samples is not None:
            total += (seen - self._last_samples) - self._reported
            samples = max(0, total) // executed
            # what is still reported beyond (or, the remainder, under) the count: paid
            # back by the next read, at the next step (none in this fit: it stays)
            self._reported = self._owed = samples * executed - total
            self._last_samples, self._unread_steps = seen, 0
            self._last_read_t = self._clock()
        due = self.record_step(step_time_s, samples, steps=executed, t=t, probe=False)
        self._say_waiting()  # a probe run after it, waiting for it
        if due:
            self.probe_now(step_time_s)

    def on_test_begin(self, logs: dict | None = None) -> None:
        self._close_epoch()  # fit's validation resets the tracker next

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self._close_epoch()

    # steps ---------------------------------------------------------------------------
    def _step_samples(self, executed: int, last_of_epoch: bool = False) -> int:
        """Samples per step of the step(s) just run: ``batch_size`` when given, else
        counted, else 0. The counter is read on the first step of a ``fit``, on an
        epoch's last step (where Keras does not know which that is: at the epoch's
        end, :meth:`_close_epoch`, the last step held back until then) and otherwise
        once at least :data:`SAMPLES_READ_EVERY` steps and
        :data:`SAMPLES_READ_INTERVAL_S` seconds have passed; steps between reads
        report the usual samples per step (``_per_step``), and a read reports what
        the steps since the last read did not: the sum is exact at every read (a short
        batch shows on the next read, at the latest on the epoch's last step)."""
        if self.batch_size:
            return self.batch_size
        if self._last_samples is None:
            return 0
        self._unread_steps += executed
        if (
            self._per_step is not None
            and not last_of_epoch
            and self._owed <= 0  # the last read found nothing reported beyond the count
            and (
                self._unread_steps < SAMPLES_READ_EVERY
                or self._clock() - self._last_read_t < SAMPLES_READ_INTERVAL_S
            )
        ):
            self._reported += self._per_step * executed
            return self._per_step
        seen = self._samples_seen()
        self._last_read_t = self._clock()
        if seen is None or seen <= self._last_samples:
            return 0
        counted = seen - self._last_samples
        samples = max(0, counted - self._reported) // executed
        usual = counted // self._unread_steps
        if self._per_step is None or (counted % self._unread_steps == 0 and usual > self._per_step):
            # a short batch (the data's end) only ever lowers a read: 72 samples over 3
            # steps of 32, 32 and 8 are no steps of 24, and a first read that was short
            # is raised by the next read whose steps were all full
            self._per_step = usual
        # reported beyond what was counted (over the steps since the last read, or
        # under by the remainder of // executed): carried to the next read, which comes
        # at the next step where it is over (a short batch said as full, found at a
        # read whose own step is short too: the next step pays it back)
        self._reported = samples * executed - (counted - self._reported)
        self._owed = self._reported
        self._last_samples, self._unread_steps = seen, 0
        return samples

    def _optimizer_iterations(self) -> int | None:
        """The optimizer's step count, where it is one: not under loss scaling (a step
        whose gradients overflow is skipped, uncounted: fp16's dynamic scale does it on
        purpose) or gradient accumulation."""
        optimizer = getattr(self.model, "optimizer", None)
        if isinstance(optimizer, keras.optimizers.LossScaleOptimizer) or getattr(
            optimizer, "gradient_accumulation_steps", None
        ):
            return None
        iterations = getattr(optimizer, "iterations", None)
        try:
            return int(iterations.numpy()) if iterations is not None else None
        except Exception:  # a custom optimizer without a readable count: not used
            return None

    def on_train_batch_begin(self, batch: int, logs: dict | None = None) -> None:
        self._batch_begin = batch
        if self._per_call > 1:  # several steps a call: the first, and each epoch's last
            steps = (self.params or {}).get("steps")
            if self._iterations_tell is None or (steps and batch + self._per_call > steps):
                self._iterations_before = self._optimizer_iterations()
        self._batch_start = time.perf_counter()

    def _steps_of_last_call(self, executed: int, steps: int | None) -> int:
        """The steps the call just ended ran (``executed`` a call, ``steps`` an epoch).
        Keras's ``batch`` does not say: it is always ``begin + executed - 1``. Data that
        ends with the epoch ends its last call early (12 steps at 5 a call: 5, 5, 2);
        data that goes on (``repeat()`` with ``steps_per_epoch``) runs every call whole
        (5, 5, 5: Keras overruns the epoch). The optimizer's ``iterations`` tells
        them apart, where it counted the fit's first call whole; else the steps left."""
        before, self._iterations_before = self._iterations_before, None
        now = self._optimizer_iterations() if before is not None else None
        ran = now - before if now is not None and before is not None else None
        if self._iterations_tell is None:
            self._iterations_tell = ran == executed
        if self._iterations_tell and ran is not None and 1 <= ran <= executed:
            return ran
        if not steps:  # the epoch's length unknown: its last call is settled at its end
            return executed
        return max(1, min(executed, steps - self._batch_begin))

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
        executed = self._per_call  # steps_per_execution, as the fit began
        steps = (self.params or {}).get("steps")
        if executed > 1 and (
            self._iterations_before is not None or (steps and self._batch_begin + executed > steps)
        ):
            executed = self._steps_of_last_call(executed, steps)
        last_of_epoch = bool(steps) and self._batch_begin + executed >= steps
        samples = self._step_samples(executed, last_of_epoch=last_of_epoch)
        if self._pending_start:
            self._pending_start = False
            if self._counting is not None and self._counting.input_spec is not None:
                self._input_spec = self._counting.input_spec  # traced by now
            self._begin(self.model, self._strategy, samples)
        if steps or (self._per_call == 1 and (self.batch_size or self._last_samples is None)):
            self.record_step(elapsed / executed, samples, steps=executed)
            return
        # an epoch of unknown length: this step may be its last, whose batch may be
        # short; it is reported at the next step, or settled at the epoch's end
        held, self._held = self._held, (time.time(), elapsed / executed, samples, executed)
        if held is None:
            return
        due = self.record_step(held[1], held[2], steps=held[3], t=held[0], probe=False)
        self._say_waiting()
        if due:
            # the probe runs now; what it says waits for the step just ended (held: it
            # may be the epoch's last, its batch short), whose time is before the probe's
            self._waiting = self._captured(lambda: self.probe_now(held[1]))

    def _captured(self, run: Any) -> list:
        """What ``run()`` emits, kept instead of sent."""
        kept: list = []
        mine = self.__dict__.get("_emit")  # a test's stand-in, else the class's
        self._emit = kept.append
        try:
            run()
        finally:
            if mine is None:
                del self._emit
            else:
                self._emit = mine
        return kept

    def _say_waiting(self) -> None:
        """Send what waited for the held step (a probe's events), now that it is said."""
        if not self._waiting:  # the usual case, on the per-step path
            return
        waiting, self._waiting = self._waiting, []
        for event in waiting:
            self._emit(event)

    def on_train_end(self, logs: dict | None = None) -> None:
        self._close_epoch()  # Keras ends every epoch first: only in case one was left open
        model = self._wrapped_model
        if model is not None and getattr(vars(model).get("train_step"), "_gpuscale_wrapper", 0):
            # The built train function keeps the wrapper; the model object gets its
            # own train_step back (so saving or subclass lookups see the original):
            # only gpuscale's wrapper is taken off, never a step the script set itself
            del model.train_step
            if self._own_step is not None:
                model.train_step = self._own_step
        self._finish("completed")
